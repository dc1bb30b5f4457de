"""The controller shell: gates, governance, events, metrics, logs and the startup sweep."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.windows import MaintenanceWindow
from tests.apps.controller.world import World, policy

DUE = timedelta(days=14) - timedelta(hours=1)
M = timedelta(minutes=1)
SUNDAY_ONLY = (MaintenanceWindow("UTC", ("Sun",), "00:00", "04:00"),)  # T0 is a Monday


def logged(logs: list[dict], message: str) -> list[dict]:
    return [entry for entry in logs if entry["event"] == message]


async def test_out_of_window_nothing_starts_and_the_log_says_which_gate_once() -> None:
    world = World(policy(windows=SUNDAY_ONLY), expire_after="30d")
    world.node(timedelta(days=29))
    with capture_logs() as logs:
        await world.pass_once()
        await world.pass_once()
    assert world.pool_annotations().get(ann.ACTIVE_ROTATION) is None
    lines = logged(logs, "no rotation candidate")
    assert len(lines) == 1  # edge-triggered: the same reason is not repeated
    assert lines[0]["reason"] == "outOfWindow" and lines[0]["until"] == "2024-01-07T00:00:00Z"
    assert world.metric("fleetgate_rotation_window_active") == 0
    assert world.metric("fleetgate_rotation_candidates") == 1


async def test_no_eligible_claim_is_explained_with_the_census() -> None:
    world = World()
    world.node(timedelta(days=1))
    with capture_logs() as logs:
        await world.pass_once()
    (line,) = logged(logs, "no rotation candidate")
    assert line["reason"] == "noEligibleClaim"
    assert line["NotTriggered"] == 1 and line["Total"] == 1 and line["Eligible"] == 0


async def test_gate_a_holds_the_next_start_for_cooldown_after_a_success() -> None:
    world = World(policy(cooldown_after=timedelta(minutes=30)))
    first = world.node(DUE + timedelta(minutes=1), name="first")  # earliest deadline goes first
    second = world.node(DUE, name="second")
    with capture_logs() as logs:
        await world.run(9 * M)  # first rotated by ~7m
        assert first not in world.cluster.claims
        assert world.claim_annotations(second).get(ann.CLAIM_STATE) is None
    assert logged(logs, "no rotation candidate")[-1]["reason"] == "cooldownAfterSuccess"
    await world.run(30 * M)
    assert world.claim_annotations(second).get(ann.CLAIM_STATE) in ("pending", "draining")


async def test_gate_b_pauses_the_pool_after_a_failure() -> None:
    world = World(policy(failure_pause=timedelta(hours=1), retry_backoff=timedelta(minutes=5)))
    world.node(DUE, name="a")
    world.node(DUE, name="b")
    world.cluster.fail_provisioning("pool")
    with capture_logs() as logs:
        await world.run(40 * M)
    failed = [c for c in ("a", "b") if world.claim_annotations(c).get(ann.CLAIM_STATE)]
    assert len(failed) == 1  # the other claim was not tried while the pool paused
    assert "failurePause" in {e.get("reason") for e in logged(logs, "no rotation candidate")}


async def test_a_frozen_pool_starts_nothing_and_holds_a_pending_rotation() -> None:
    world = World()
    old = world.node(DUE)
    await world.cluster.annotate_pool("pool", {ann.FREEZE: "2024-01-01T06:00:00Z"})
    result = await world.pass_once()
    assert result.step is not None and result.step.report.reason == "frozen"
    assert world.metric("fleetgate_rotation_freeze_until_timestamp_seconds") > 0  # type: ignore[operator]
    await world.cluster.annotate_pool("pool", {ann.FREEZE: None})
    await world.pass_once()
    assert world.claim_annotations(old)[ann.CLAIM_STATE] == "pending"
    await world.cluster.annotate_pool("pool", {ann.FREEZE: "2024-01-01T06:00:00Z"})
    world.cluster.preempt_placeholders()
    await world.pass_once()
    assert [p for p in world.cluster.pods.values() if p.priority < 0] == []  # not recreated


async def test_conflicting_policies_rotate_nothing_and_say_so_once() -> None:
    world = World([policy("a"), policy("b")])
    world.node(DUE)
    await world.pass_once()
    await world.pass_once()
    assert world.pool_annotations().get(ann.ACTIVE_ROTATION) is None
    assert world.events.kinds().count("PolicyConflict") == 1
    assert "['a', 'b']" in world.events.events[0].data["message"]
    assert world.metric("fleetgate_rotation_policy_conflict") == 1
    assert world.metric("fleetgate_rotation_candidates") is None  # other series dropped


async def test_the_most_specific_policy_wins() -> None:
    world = World(
        [policy("broad", windows=SUNDAY_ONLY), policy("narrow", match_labels={"team": "web"})],
        labels={"team": "web"},
    )
    old = world.node(DUE)
    await world.pass_once()
    assert world.pool_annotations().get(ann.ACTIVE_ROTATION) == old  # "narrow" is always open


async def test_losing_governance_mid_rotation_releases_everything() -> None:
    world = World()
    old = world.node(DUE)
    await world.pass_once()
    world.policies = []
    await world.pass_once()
    assert world.pool_annotations().get(ann.ACTIVE_ROTATION) is None
    assert [p for p in world.cluster.pods.values() if p.priority < 0] == []
    node = world.cluster.claims[old].node
    assert node is not None and not node.unschedulable and ann.SURGE_FOR not in node.annotations
    assert "GovernanceLost" in world.events.kinds()
    assert world.claim_annotations(old)[ann.CLAIM_STATE] == "pending"  # left as is (spec §12.6)
    world.restart()
    await world.pass_once()  # the restart sweep fails the orphaned attempt
    assert world.claim_annotations(old)[ann.CLAIM_STATE] == "failed"


async def test_the_startup_sweep_cleans_leftovers_of_a_dead_controller() -> None:
    world = World(policy(windows=SUNDAY_ONLY), expire_after="30d")
    old = world.node(timedelta(days=1))
    node = world.cluster.claims[old].node
    assert node is not None
    await world.cluster.annotate_node(old, {ann.SURGE_FOR: "gone", ann.CORDONED: "true"})
    await world.cluster.set_unschedulable(old, True)
    await world.cluster.annotate_pool("pool", {ann.ACTIVE_ROTATION_STATE: "draining"})
    await world.pass_once()
    assert not node.unschedulable and node.annotations == {}
    assert ann.ACTIVE_ROTATION_STATE not in world.pool_annotations()


async def test_warn_findings_become_one_warning_event_each_until_they_clear() -> None:
    world = World(policy(retry_backoff=timedelta(minutes=5)))  # < readyTimeout: RetryBackoffShort
    world.node(timedelta(days=1))
    await world.pass_once()
    await world.pass_once()
    assert world.events.kinds().count("RetryBackoffShort") == 1
    world.policies = [policy()]
    await world.pass_once()
    world.policies = [policy(retry_backoff=timedelta(minutes=5))]
    await world.pass_once()
    assert world.events.kinds().count("RetryBackoffShort") == 2  # re-fired after clearing


async def test_gauges_report_the_derivation() -> None:
    world = World()
    world.node(timedelta(days=1))
    await world.pass_once()
    assert world.metric("fleetgate_rotation_t_rot_bound_seconds") == (15 + 60 + 2) * 60
    assert world.metric("fleetgate_rotation_window_period_seconds") == 60  # continuous window
    assert world.metric("fleetgate_rotation_in_progress") == 0
    assert world.metric("fleetgate_rotation_window_active") == 1


async def test_a_stuck_drain_is_reported_and_the_rotation_keeps_waiting() -> None:
    world = World(tgp="1h")
    old = world.node(DUE)
    world.cluster.stick_drain(old, forever=True)  # e.g. a finalizer that never clears
    await world.run(70 * M)
    assert world.metric("fleetgate_rotation_drain_stuck") == 1
    assert world.pool_annotations()[ann.ACTIVE_ROTATION] == old


async def test_estimates_far_from_reality_raise_a_warning_and_a_metric_with_the_value() -> None:
    world = World(policy(cooldown_after=timedelta(minutes=1)), drain="40m", provisioning="5m")
    for i in range(4):  # each comes due as the previous one finishes its 40m drain
        world.node(DUE - i * timedelta(minutes=45), name=f"n{i}")
    await world.run(5 * 60 * M)
    warnings = [e for e in world.events.events if e.kind == "EstimateDisagreesWithObservation"]
    assert len(warnings) == 1
    assert "40m" in warnings[0].data["message"]
    assert world.metric("fleetgate_rotation_observed_seconds", estimate="drain") == 40 * 60
    assert world.metric("fleetgate_rotation_estimate_disagreement", estimate="drain") == 1
    assert world.metric("fleetgate_rotation_estimate_disagreement", estimate="provisioning") == 0


def _kept(p: RotationPolicy, generation: int = 1) -> RotationPolicy:
    """``p`` as read from the cluster (it has a generation, so a status to write)."""
    return replace(p, generation=generation)


async def test_a_policy_status_is_written_once_and_not_rewritten_on_an_unchanged_pass() -> None:
    world = World(_kept(policy()))
    world.node(timedelta(days=1))
    await world.pass_once()
    status = world.cluster.policy_statuses["default"]
    assert status.observed_generation == 1
    assert status.matched_node_pools == ("pool",) and status.rotating_node_pools == ()
    assert (status.ready.status, status.ready.reason) == (True, "Accepted")
    assert status.ready.message == "valid and governs 1 NodePool(s)"
    assert status.ready.last_transition_time == world.clock.now()
    assert world.controller.due["pool"] == world.clock.now() + timedelta(seconds=1)  # recheck

    world.clock.advance(timedelta(seconds=1))
    await world.pass_once()
    assert world.cluster.policy_status_writes == 1
    assert world.controller.due["pool"] > world.clock.now() + timedelta(seconds=1)


async def test_a_started_rotation_shows_in_the_status_and_keeps_the_transition_time() -> None:
    world = World(_kept(policy()))
    old = world.node(DUE)
    first = world.clock.now()
    await world.pass_once()
    assert world.pool_annotations()[ann.ACTIVE_ROTATION] == old
    status = world.cluster.policy_statuses["default"]
    assert status.rotating_node_pools == ("pool",)
    world.clock.advance(M)
    world.policies = [_kept(policy(), generation=2)]
    await world.pass_once()
    status = world.cluster.policy_statuses["default"]
    assert status.observed_generation == 2
    assert status.ready.last_transition_time == first  # still Ready=True
    assert world.cluster.policy_status_writes == 2


async def test_tied_and_invalid_policies_say_why_in_their_status() -> None:
    world = World([_kept(policy("a")), _kept(policy("b")), _kept(policy("c", k=0))])
    await world.pass_once()
    statuses = world.cluster.policy_statuses
    # c is invalid (Invalid outranks Conflict); a and b tie with each other and with c.
    assert statuses["c"].ready.reason == "Invalid"
    assert statuses["c"].ready.message == "spec.minRotationChances: must be at least 1"
    assert statuses["a"].ready.reason == "Conflict"
    assert statuses["a"].ready.message == "ties with [b c] for NodePool(s) [pool]"
    assert statuses["a"].matched_node_pools == ()


async def test_a_lost_status_write_is_retried_silently() -> None:
    world = World(_kept(policy()))
    world.cluster.conflict_policy_status()
    with capture_logs() as logs:
        result = await world.pass_once()
    assert result.interrupted is None and "default" not in world.cluster.policy_statuses
    assert not [e for e in logs if e["log_level"] in ("warning", "error")]
    assert world.controller.due["pool"] == world.clock.now() + timedelta(seconds=1)
    world.clock.advance(timedelta(seconds=1))
    await world.pass_once()
    assert world.cluster.policy_statuses["default"].ready.reason == "Accepted"


async def test_a_policy_from_a_file_has_no_status_to_write() -> None:
    world = World(policy())
    await world.pass_once()
    assert world.cluster.policy_statuses == {}


async def test_a_restarted_controller_does_not_rewrite_a_status_that_is_still_right() -> None:
    world = World(_kept(policy()))
    await world.pass_once()
    written = world.cluster.policy_statuses["default"]
    world.cluster.set_policies([{"metadata": {"name": "default"}, "status": written.as_manifest()}])
    world.restart()
    world.clock.advance(timedelta(hours=1))
    await world.pass_once()
    assert world.cluster.policy_status_writes == 1


async def test_a_failing_status_write_is_retried_on_the_next_pass_not_every_second() -> None:
    world = World(_kept(policy()))
    write = world.cluster.write_policy_status

    async def forbidden(name: str, status: object) -> bool:
        raise RuntimeError("403 cannot patch rotationpolicies/status")

    world.cluster.write_policy_status = forbidden  # type: ignore[method-assign]
    with capture_logs() as logs:
        result = await world.pass_once()
    assert result.interrupted is None
    assert logged(logs, "RotationPolicy status not written")
    assert world.controller.due["pool"] > world.clock.now() + timedelta(seconds=1)
    world.cluster.write_policy_status = write  # type: ignore[method-assign]
    await world.pass_once()
    assert world.cluster.policy_statuses["default"].ready.reason == "Accepted"


async def test_an_action_the_shell_cannot_apply_is_an_error_not_a_silent_skip() -> None:
    world = World()
    unknown: Any = object()
    with pytest.raises(TypeError, match="the shell cannot apply object for pool pool"):
        await world.controller._apply("pool", [unknown], world.clock.now())


async def test_a_watch_poke_during_the_status_write_leaves_the_pool_due_not_a_crash() -> None:
    world = World(_kept(policy()))
    world.node(timedelta(days=1))
    write = world.cluster.write_policy_status

    async def poked_meanwhile(name: str, status: object) -> bool:
        world.controller.poke("pool")  # a watch event arrives while the write is in flight
        return await write(name, status)  # type: ignore[arg-type]

    world.cluster.write_policy_status = poked_meanwhile  # type: ignore[method-assign]
    await world.pass_once()  # raised KeyError('pool') before
    assert world.controller.due["pool"] == world.clock.now()  # poked: due at once


async def test_the_status_carries_window_columns_rewritten_only_at_a_transition() -> None:
    world = World(_kept(policy(windows=SUNDAY_ONLY)))
    world.node(timedelta(days=1))
    await world.pass_once()  # Monday 00:00: closed until Sunday
    status = world.cluster.policy_statuses["default"]
    sunday = world.clock.now() + timedelta(days=6)
    assert (status.window_open, status.next_window) == (False, sunday)
    derived = world.controller._governance["pool"].age_threshold
    assert derived is not None and status.age_threshold == format_duration(derived)
    writes = world.cluster.policy_status_writes
    world.clock.advance(timedelta(hours=5))
    await world.pass_once()  # still closed: nothing to write
    assert world.cluster.policy_status_writes == writes
    world.clock.advance(sunday - world.clock.now())
    await world.pass_once()  # the window opened: one write, the next window a week on
    status = world.cluster.policy_statuses["default"]
    assert (status.window_open, status.next_window) == (True, sunday + timedelta(days=7))
    assert world.cluster.policy_status_writes == writes + 1
