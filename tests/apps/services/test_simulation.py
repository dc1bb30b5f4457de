"""The simulation use case: the real controller on the fake cluster, in virtual time, and its
typed result."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from fleetgate.apps.container import Container
from fleetgate.apps.services.bounded import RanTooLong
from fleetgate.apps.services.simulation import (
    PoolNotSelected,
    SimulationError,
    SimulationInputs,
    prepare,
    selects,
)
from fleetgate.apps.simulate.fleet import load_fleet
from fleetgate.domain.rotation.findings import FindingCode
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.windows import MaintenanceWindow
from tests.apps.controller.world import policy
from tests.strategies import SIM_START, sim_fleets, sim_policies
from tests.waiting import HANG_SECONDS

TOKYO = (MaintenanceWindow("Asia/Tokyo", ("Wed", "Sat"), "02:00", "06:00"),)
WEEKLY = (MaintenanceWindow("UTC", ("Sun",), "01:00", "02:30"),)
THROUGHPUT = {
    FindingCode.THROUGHPUT_BELOW_ARRIVAL,
    FindingCode.THROUGHPUT_BURST_SHORTFALL,
    FindingCode.ROTATION_SPANS_NEXT_WINDOW,
}


def simulate(inputs: SimulationInputs) -> dict[str, Any]:
    """The document of a run with the composition root's simulator."""
    return Container().simulator().run(inputs).document()


def run(pol: RotationPolicy, document: dict[str, object], days: int = 60, **kw: object) -> dict:
    fleet = load_fleet(document, SIM_START)
    inputs = SimulationInputs(pol, fleet, SIM_START, SIM_START + timedelta(days=days), **kw)
    return simulate(inputs)


def generated(count: int, spread: str, expire: str = "14d") -> dict[str, object]:
    return {
        "fleet": {
            "expireAfter": expire,
            "terminationGracePeriod": "1h",
            "generate": {"count": count, "spread": spread},
        }
    }


def test_a_feasible_fleet_is_rotated_make_before_break_and_never_breaches() -> None:
    doc = run(policy(windows=TOKYO), generated(12, "5d"))
    assert doc["result"]["findings"] == [] and doc["summary"]["breaches"] == 0
    assert doc["summary"]["rotations"] == doc["summary"]["succeeded"] > 12
    # Every rotation started inside a window, and the slot moved to the surge node.
    windows = [(w["start"], w["end"]) for w in doc["windows"]]
    for r in doc["rotations"]:
        assert any(a <= r["start"] < b for a, b in windows), r
        assert r["mode"] == "surge" and r["ready"] is not None and r["replacement"]
    births = {g["birthMode"] for g in doc["generations"]}
    assert births == {"initial", "surge"}


def test_an_infeasible_fleet_breaches_and_the_simulator_says_so() -> None:
    pol = policy(windows=WEEKLY, k=1)
    doc = run(pol, generated(40, "1d"), days=30)
    codes = {f["code"] for f in doc["result"]["findings"]}
    assert FindingCode.THROUGHPUT_BURST_SHORTFALL in codes
    assert doc["summary"]["breaches"] > 0
    breaches = [e for e in doc["events"] if e["type"] == "expire-after-breach"]
    assert len(breaches) == doc["summary"]["breaches"]
    assert any(d["code"] == "ExpireAfterBreach" for d in doc["diagnostics"])
    assert all(
        g["breached"] == (g["name"] in {e["node"] for e in breaches}) for g in doc["generations"]
    )


def test_identical_inputs_give_identical_output() -> None:
    pol = policy(windows=TOKYO)
    first = json.dumps(run(pol, generated(8, "3d")), sort_keys=True)
    second = json.dumps(run(pol, generated(8, "3d")), sort_keys=True)
    assert first == second


def test_months_of_virtual_time_take_seconds_not_minutes() -> None:
    # Counted, not timed: minute stepping would take some 260,000 passes over 180 days.
    doc = run(policy(windows=TOKYO), generated(6, "5d"), days=180)
    assert doc["simulatedThrough"] == "2024-06-29T00:00:00Z" and not doc["partial"]
    assert doc["summary"]["controllerPasses"] < 5_000  # idle minutes were folded away


def test_reasons_are_coalesced_into_one_event_per_change() -> None:
    doc = run(policy(windows=TOKYO), generated(2, "1d"), days=10)
    reasons = [e for e in doc["events"] if e["type"] in ("blocked-by-gate", "no-eligible-claim")]
    assert reasons[0]["type"] == "blocked-by-gate" and reasons[0]["gate"] == "outOfWindow"
    assert {e["type"] for e in reasons} == {"blocked-by-gate", "no-eligible-claim"}
    last = None
    for e in doc["events"]:
        if e["type"] == "rotation-start":
            last = None  # a rotation in between is a change of its own
        elif e in reasons:
            key = (e["type"], e.get("gate"), json.dumps(e.get("census")))
            assert key != last, e
            last = key


def test_windows_are_reported_with_their_clipping() -> None:
    always = policy()  # open all week: one window clipped at both ends
    doc = run(always, generated(1, "0s"), days=2)
    assert doc["windows"] == [
        {
            "start": "2024-01-01T00:00:00Z",
            "end": "2024-01-03T00:00:00Z",
            "startClipped": True,
            "endClipped": True,
        }
    ]
    assert not any(e["type"].startswith("window-") for e in doc["events"])


def test_a_slow_environment_is_diagnosed_and_its_surges_fail() -> None:
    doc = run(
        policy(windows=TOKYO),
        generated(2, "5d"),
        days=10,
        env_provisioning=timedelta(minutes=20),
        env_drain=timedelta(hours=2),
    )
    codes = {d["code"] for d in doc["diagnostics"]}
    assert {"EnvProvisioningAboveReadyTimeout", "EnvDrainAboveTGP"} <= codes
    assert doc["summary"]["failed"] > 0 and doc["summary"]["succeeded"] == 0


def test_a_policy_that_does_not_select_the_pool_is_an_input_error() -> None:
    pol = policy(match_labels={"team": "web"})
    with pytest.raises(SimulationError, match="nodePoolSelector"):
        run(pol, generated(1, "0s"))


def test_the_pass_budget_makes_the_result_partial() -> None:
    doc = run(policy(windows=TOKYO), generated(4, "5d"), budget=10)
    assert doc["partial"] and any(d["code"] == "StepBudgetExhausted" for d in doc["diagnostics"])


def test_an_estimate_far_from_reality_is_reported_from_observed_rotations() -> None:
    doc = run(policy(windows=TOKYO), generated(6, "5d"), days=30, env_drain=timedelta(minutes=40))
    events = [e for e in doc["events"] if e["type"] == "estimate-disagrees"]
    assert (
        events and "40m" in events[0]["message"] and "surge.drainEstimate" in events[0]["message"]
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pol=sim_policies(), document=sim_fleets())
def test_a_fleet_derive_calls_feasible_never_breaches(pol: RotationPolicy, document: dict) -> None:
    fleet = load_fleet(document, SIM_START)
    derivation = pol.resolve(fleet.tgp).derive(fleet.expire_after, len(fleet.nodes))
    feasible = not derivation.fatal and not THROUGHPUT & set(derivation.codes)
    oldest = max(SIM_START - n.created_at for n in fleet.nodes)
    # Feasibility is about a pool in its steady state: no node already past the age threshold.
    if not feasible or oldest > derivation.age_threshold:
        return
    days = 2 * fleet.expire_after.days + 1
    doc = simulate(SimulationInputs(pol, fleet, SIM_START, SIM_START + timedelta(days=days)))
    assert doc["summary"]["breaches"] == 0, doc["events"]


# --- Karpenter's own states declared in the fleet file (issue 16) -----------------------------


def _with(**pool: object) -> dict[str, object]:
    """Four nodes close to their expiry, in a pool with these Karpenter states."""
    doc = generated(4, "13d")
    return {"fleet": {**doc["fleet"], **pool}}  # type: ignore[dict-item]


def _pair(**node: object) -> dict[str, object]:
    """Two young nodes; the first has these Karpenter states."""
    born = "2023-12-31T00:00:00Z"
    nodes = [{"name": "a", "createdAt": born, **node}, {"name": "b", "createdAt": born}]
    return {"fleet": {"expireAfter": "14d", "terminationGracePeriod": "1h", "nodes": nodes}}


def _of(doc: dict, kind: str) -> list[dict]:
    return [e for e in doc["events"] if e["type"] == kind]


@pytest.mark.parametrize(
    ("pool", "gate", "code"),
    [
        ({"replicas": 4}, "staticNodePool", FindingCode.STATIC_NODE_POOL),
        ({"ready": False}, "nodePoolNotReady", FindingCode.NODE_POOL_NOT_READY),
    ],
)
def test_a_pool_where_no_surge_can_work_is_never_rotated_and_the_report_says_why(
    pool: dict[str, object], gate: str, code: FindingCode
) -> None:
    doc = run(policy(windows=TOKYO), _with(**pool), days=20)
    assert doc["summary"]["rotations"] == 0 and doc["summary"]["breaches"] > 0
    assert gate in {e["gate"] for e in _of(doc, "blocked-by-gate")}
    assert [e["code"] for e in _of(doc, "pool-finding")] == [code.value]


def test_a_static_pool_replaces_a_lost_node_itself_after_it_is_gone() -> None:
    doc = run(policy(windows=TOKYO), _with(replicas=4), days=20)
    born = {g["name"]: g for g in doc["generations"]}
    later = [g for g in born.values() if g["name"].startswith("default-")]
    assert later and all(g["birthMode"] != "surge" for g in later)


def test_a_pool_at_its_node_limit_gets_no_surge_and_the_report_says_why() -> None:
    doc = run(policy(windows=TOKYO), _with(limits={"nodes": 4}), days=20)
    assert doc["summary"]["rotations"] == 0
    assert {e["reason"] for e in _of(doc, "not-starting")} == {"headroom"}
    assert [e["code"] for e in _of(doc, "pool-finding")] == [FindingCode.NODE_LIMIT_REACHED.value]
    roomy = run(policy(windows=TOKYO), _with(limits={"nodes": 5}), days=20)
    # One node of room is enough (while a surge node is up the pool is at its limit again).
    assert roomy["summary"]["succeeded"] > 0 and roomy["summary"]["breaches"] == 0


@pytest.mark.parametrize(
    ("node", "bucket"),
    [
        ({"drifted": True}, "Drifted"),
        ({"doNotDisrupt": "true"}, "OptedOut"),
        ({"doNotDisrupt": "48h"}, "OptedOut"),
        # Inside the first window (Tokyo 02:00-06:00 is 17:00-21:00 UTC).
        ({"disruptedAt": "2024-01-02T18:00:00Z"}, "KarpenterDisrupting"),
    ],
)
def test_a_node_karpenter_owns_shows_in_its_census_bucket(
    node: dict[str, object], bucket: str
) -> None:
    doc = run(policy(windows=TOKYO), _pair(**node), days=20)
    censuses = [e["census"] for e in _of(doc, "no-eligible-claim")]
    assert any(c[bucket] == 1 for c in censuses)
    assert "a" not in {r["node"] for r in doc["rotations"] if r["start"] < "2024-01-03"}


def test_a_duration_opt_out_ends_and_the_node_is_rotated_then() -> None:
    doc = run(policy(windows=TOKYO), _pair(doNotDisrupt="48h"), days=20)
    censuses = [(e["at"], e["census"]["OptedOut"]) for e in _of(doc, "no-eligible-claim")]
    assert censuses[0] == ("2024-01-02T17:00:00Z", 1)  # 48h from the start: still active
    assert all(n == 0 for at, n in censuses if at >= "2024-01-03T00:00:00Z")
    assert "a" in {r["node"] for r in doc["rotations"]}


def test_karpenters_own_replacement_is_never_replaced_twice() -> None:
    doc = run(policy(windows=TOKYO), _pair(disruptedAt="2024-01-02T18:00:00Z"), days=20)
    assert "a" not in {r["node"] for r in doc["rotations"]}
    assert doc["summary"]["breaches"] == 0


# --- PodDisruptionBudgets on the workload (issue 28) -----------------------------------------


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_pdb_allowing_no_disruption_holds_every_drain_to_the_tgp_yet_rotates_in_order() -> None:
    doc = run(policy(windows=TOKYO), _with(podDisruptionBudget={"maxUnavailable": 0}), days=20)
    s = doc["summary"]
    assert s["breaches"] == 0 and s["rotations"] == s["succeeded"] == s["forcedDrains"] >= 4
    forced = {e["node"]: _at(e["at"]) for e in _of(doc, "drain-forced")}
    blocked = {e["node"]: _at(e["at"]) for e in _of(doc, "eviction-blocked")}
    assert set(forced) == set(blocked) == {r["node"] for r in doc["rotations"]}
    for r in doc["rotations"]:
        # Make before break: the surge node was Ready before the old node's drain began, and
        # Karpenter force-deleted the held Pod its own 30 s grace period before the claim's
        # terminationGracePeriod (1h) ran out, inside the drain bound (tGP + 2m), so the
        # controller never reports it stuck.
        assert r["ready"] is not None and _at(r["ready"]) <= blocked[r["node"]]
        assert forced[r["node"]] == blocked[r["node"]] + timedelta(hours=1, seconds=-30)
    assert not _of(doc, "drain-stuck")
    assert "DrainForcedAtTerminationGracePeriod" in {d["code"] for d in doc["diagnostics"]}


def test_without_a_tgp_a_pdb_holds_the_drain_for_good_and_it_is_reported_stuck() -> None:
    doc = generated(2, "13d")
    del doc["fleet"]["terminationGracePeriod"]  # type: ignore[attr-defined]
    doc["fleet"]["podDisruptionBudget"] = {"minAvailable": "100%"}  # type: ignore[index]
    doc = run(policy(windows=TOKYO), doc, days=20)
    [first] = doc["rotations"]  # the pool's one rotation never ends, and says so once
    assert first["outcome"] == "in-flight"
    [stuck] = _of(doc, "drain-stuck")
    [blocked, *later] = _of(doc, "eviction-blocked")
    assert stuck["node"] == blocked["node"] == first["node"]
    assert _at(stuck["at"]) > _at(blocked["at"]) + timedelta(hours=1)  # the 1h fallback bound
    # The other node, never rotated, is force-expired by Karpenter and held the same way.
    assert [e["node"] for e in later] == ["node-2"]
    assert not _of(doc, "drain-forced") and doc["summary"]["forcedDrains"] == 0


def test_a_pdb_with_a_disruption_to_spare_never_holds_a_drain() -> None:
    doc = run(policy(windows=TOKYO), _with(podDisruptionBudget={"maxUnavailable": 1}), days=20)
    assert doc["summary"]["forcedDrains"] == 0 and doc["summary"]["breaches"] == 0
    assert not _of(doc, "eviction-blocked") and not _of(doc, "drain-stuck")


def test_a_drifted_node_karpenter_never_replaces_is_rotated_in_a_window_before_its_expiry() -> None:
    # Karpenter sets Drifted but never acts on it (no disruptedAt: e.g. a Drifted budget of "0").
    doc = run(policy(windows=TOKYO), _pair(drifted=True), days=20)
    assert not _of(doc, "expire-after-breach"), _of(doc, "expire-after-breach")
    (start,) = [e for e in _of(doc, "rotation-start") if e["node"] == "a"]
    assert start["rule"] == "driftedDue"
    (rotation,) = [r for r in doc["rotations"] if r["node"] == "a"]
    assert rotation["outcome"] == "success" and rotation["done"] < rotation["deadline"]
    opened = [e["at"] for e in _of(doc, "window-open")]
    closed = [e["at"] for e in _of(doc, "window-close")]
    assert any(o <= start["at"] < c for o, c in zip(opened, closed, strict=False))
    # Before it fell due it was Karpenter's; the census said so, then said why it was ours.
    censuses = [e["census"] for e in _of(doc, "no-eligible-claim")]
    assert censuses[0]["Drifted"] == 1
    assert all(e["rule"] == "driftedDue" for e in _of(doc, "rotation-start") if "rule" in e)


def test_a_drifted_node_karpenter_may_not_replace_under_its_budget_is_rotated_by_fleetgate() -> (
    None
):
    # Karpenter would replace it on the 2nd, but a Drifted budget of "0" holds it back.
    document = _pair(drifted=True, disruptedAt="2024-01-02T12:00:00Z")
    document["fleet"]["budgets"] = [{"nodes": "0", "reasons": ["Drifted"]}]  # type: ignore[index]
    doc = run(policy(windows=TOKYO), document, days=20)
    assert not _of(doc, "expire-after-breach")
    (start,) = [e for e in _of(doc, "rotation-start") if e["node"] == "a"]
    assert start["rule"] == "driftedDue"
    # Without the budget Karpenter replaces it itself, and fleetgate leaves it alone.
    free = run(policy(windows=TOKYO), _pair(drifted=True, disruptedAt="2024-01-02T12:00:00Z"))
    assert "a" not in {r["node"] for r in free["rotations"]} and free["summary"]["breaches"] == 0


def test_no_rotation_starts_while_a_budget_for_every_reason_allows_none() -> None:
    # Windows are 17:00-21:00 UTC; the budget forbids disruption from 17:00 for two hours.
    document = _with(budgets=[{"nodes": "0", "schedule": "0 17 * * *", "duration": "2h"}])
    doc = run(policy(windows=TOKYO), document, days=20)
    assert doc["rotations"] and all(r["start"][11:] >= "19:00:00Z" for r in doc["rotations"])
    gated = [e for e in _of(doc, "blocked-by-gate") if e["gate"] == "disruptionBudget"]
    assert gated and all(e["until"][11:] == "19:00:00Z" for e in gated)
    unbudgeted = run(policy(windows=TOKYO), _with(), days=20)
    assert any(r["start"][11:] < "19:00:00Z" for r in unbudgeted["rotations"])


def test_the_report_shows_the_windows_the_budgets_leave_and_says_what_they_cost() -> None:
    budget = {"nodes": "0", "schedule": "0 17 * * tue", "duration": "4h"}  # every Tuesday window
    doc = run(policy(windows=TOKYO), _with(budgets=[budget]), days=20)
    unusable = doc["budgetWindows"]["unusable"]
    assert unusable and all(w["start"][11:] == "17:00:00Z" for w in unusable)
    effective = doc["budgetWindows"]["effective"]
    assert effective and not {w["start"] for w in effective} & {w["start"] for w in unusable}
    codes = {d["code"] for d in doc["diagnostics"]}
    assert {"BudgetBlocksWindow", "BudgetShrinksWindows"} <= codes
    assert not any(r["start"] in {w["start"] for w in unusable} for r in doc["rotations"])
    assert "budgetWindows" not in run(policy(windows=TOKYO), _with(), days=20)


# --- the use case: one selector check, checked inputs, a typed result, one bounded run --------


def test_the_selector_check_names_the_labels_and_refuses_a_policy_without_a_selector() -> None:
    selects(policy(match_labels={"team": "web"}), {"team": "web", "zone": "a"})
    with pytest.raises(PoolNotSelected, match="nodePoolSelector") as refused:
        selects(policy(match_labels={"team": "web"}), {"team": "db"})
    assert refused.value.labels == {"team": "db"} and "'default'" in str(refused.value)
    unselecting = replace(policy(), node_pool_selector=None)
    with pytest.raises(PoolNotSelected):
        selects(unselecting, {})


def _inputs(days: int = 10, **kw: Any) -> SimulationInputs:
    fleet = load_fleet(generated(3, "5d"), SIM_START)
    return SimulationInputs(
        policy(windows=TOKYO), fleet, SIM_START, SIM_START + timedelta(days=days), **kw
    )


def test_inputs_are_checked_before_anything_runs() -> None:
    with pytest.raises(SimulationError, match="--to: must be after --from"):
        prepare(replace(_inputs(), end=SIM_START))
    invalid = replace(_inputs(), policy=policy(windows=TOKYO, failure_pause=timedelta(0)))
    with pytest.raises(SimulationError, match=r"policy 'default': .*failurePause"):
        prepare(invalid)


def test_the_environment_is_the_inputs_then_the_fleets_then_the_estimates() -> None:
    estimated = prepare(_inputs())
    d = estimated.derivation
    assert (estimated.provisioning, estimated.drain) == (
        d.provisioning_estimate,
        d.drain_estimate,
    )
    given_env = prepare(_inputs(env_drain=timedelta(minutes=7)))
    assert given_env.drain == timedelta(minutes=7)
    assert given_env.provisioning == d.provisioning_estimate


def test_the_result_is_typed_and_its_document_keeps_the_documented_order() -> None:
    result = Container().simulator().run(_inputs(days=20))
    doc = result.document()
    assert list(doc) == [
        "result",
        "env",
        "summary",
        "events",
        "generations",
        "rotations",
        "windows",
        "diagnostics",
        "partial",
        "simulatedFrom",
        "simulatedThrough",
    ]
    assert doc["summary"] == result.summary.as_dict()
    assert result.summary.rotations == len(result.rotations) > 0
    assert result.simulated_through == SIM_START + timedelta(days=20) and not result.partial
    assert not result.fatal and result.codes == []


def test_a_fatal_diagnostic_makes_the_result_fatal_and_names_its_code_once() -> None:
    result = Container().simulator().run(_inputs(budget=5))
    assert result.partial and result.fatal
    assert result.codes.count("StepBudgetExhausted") == 1
    assert [d.as_dict() for d in result.diagnostics] == result.document()["diagnostics"]


async def test_the_bounded_run_gives_the_same_result_and_reports_progress_in_order() -> None:
    seen: list[datetime] = []
    simulator = Container().simulator()
    bounded = await simulator.run_bounded(_inputs(), HANG_SECONDS, progress=seen.append)
    assert bounded.document() == (await simulator.run_async(_inputs())).document()
    assert seen == sorted(seen) and seen[-1] == SIM_START + timedelta(days=10)


async def test_a_bounded_run_past_its_bound_is_stopped() -> None:
    # No time at all: refused whatever the machine's speed (the world alone takes longer).
    with pytest.raises(RanTooLong):
        await Container().simulator().run_bounded(_inputs(), 0.0)
