"""The machine as a pure step: hand-built observations in, ordered actions out (spec §7)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import (
    AnnotateClaim,
    AnnotateNode,
    AnnotatePool,
    Announce,
    CountCompletion,
    CreatePlaceholder,
    DeleteClaim,
    DeletePlaceholder,
    Log,
    ObserveDuration,
    SetUnschedulable,
)
from fleetgate.domain.rotation.budgets import DEFAULT_BUDGETS, budgets_from_spec
from fleetgate.domain.rotation.cluster import (
    NodeClaimView,
    NodeView,
    PodView,
    PoolObservation,
    Taint,
)
from fleetgate.domain.rotation.context import Pass
from fleetgate.domain.rotation.fallback import surgeless_fallback
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.machine import MachineConfig, PoolCensus, step
from fleetgate.domain.rotation.policy import ForcefulFallback, RotationPolicy, Surge
from fleetgate.domain.rotation.quiet import next_eligibility
from fleetgate.domain.rotation.selection import DRIFTED_DUE, DriftRule
from fleetgate.domain.rotation.windows import DAY_NAMES, MaintenanceWindow

NOW = datetime(2024, 1, 10, 12, 0, tzinfo=UTC)
E = timedelta(days=14)
LEAD = timedelta(minutes=15 + 2 + 2 + 60)  # K·P (P = 1m) + readyTimeout + buffer + tGP
ALWAYS = (MaintenanceWindow("UTC", DAY_NAMES, "00:00", "24:00"),)
POOL_LABEL = {ann.KARPENTER_NODEPOOL: "p"}


def policy(**surge: object) -> RotationPolicy:
    return RotationPolicy(
        name="p",
        node_pool_selector=LabelSelector(),
        maintenance_windows=ALWAYS,
        surge=Surge(**surge),
    )  # type: ignore[arg-type]


def claim(name: str, age: timedelta, **kw: object) -> NodeClaimView:
    fields: dict[str, object] = {
        "expire_after": E,
        "termination_grace_period": timedelta(hours=1),
        "ready": True,
        "node_name": name,
    }
    fields.update(kw)
    return NodeClaimView(name, NOW - age, **fields)  # type: ignore[arg-type]


def pool(
    *claims: NodeClaimView,
    annotations: dict[str, str] | None = None,
    placeholders: tuple[PodView, ...] = (),
    extra_nodes: tuple[NodeView, ...] = (),
    **kw: object,
) -> PoolObservation:
    nodes = (
        tuple(NodeView(c.node_name, labels=POOL_LABEL, ready=True) for c in claims if c.node_name)
        + extra_nodes
    )
    pods = tuple(
        PodView(
            "app",
            f"{c.node_name}-w",
            node_name=c.node_name,
            phase="Running",
            requests={"cpu": 3000},
            owner_kind="ReplicaSet",
        )
        for c in claims
        if c.node_name
    )
    return PoolObservation(
        name="p",
        version="7",
        expire_after=E,
        termination_grace_period=timedelta(hours=1),
        annotations=annotations or {},
        claims=claims,
        nodes=nodes,
        pods=pods,
        placeholders=placeholders,
        **kw,
    )  # type: ignore[arg-type]


def writes(actions: tuple[object, ...]) -> list[type]:
    return [type(a) for a in actions if not isinstance(a, (Log, Announce))]


def test_an_ungoverned_pool_is_left_alone() -> None:
    result = step(pool(claim("a", E)), [], NOW)
    assert result.actions == () and result.requeue_at is None
    assert result.report.reason == "ungoverned"


def test_the_earliest_deadline_is_picked_and_the_anchor_is_the_first_conditional_write() -> None:
    obs = pool(
        claim("young", E - LEAD + timedelta(minutes=1)),
        claim("old", E - LEAD + timedelta(minutes=5)),
    )
    result = step(obs, [policy()], NOW, MachineConfig(namespace="sys"))
    assert result.started == "old"
    assert result.actions[0] == AnnotatePool("p", {ann.ACTIVE_ROTATION: "old"}, expect_version="7")
    assert writes(result.actions) == [
        AnnotatePool,
        AnnotateClaim,
        AnnotateNode,
        SetUnschedulable,
        CreatePlaceholder,
    ]
    create = result.actions[-1]
    assert isinstance(create, CreatePlaceholder)
    assert create.spec.namespace == "sys" and create.spec.requests == {"cpu": 3000}
    assert "old" in create.spec.avoid_hosts and "young" in create.spec.avoid_hosts
    assert result.requeue_at == NOW + timedelta(seconds=30)


def test_a_claim_inside_its_lead_time_only_by_a_hair_is_not_yet_triggered() -> None:
    result = step(pool(claim("a", E - LEAD)), [policy()], NOW)  # age == threshold: strict >
    assert result.started is None and result.report.reason == "noEligibleClaim"
    assert result.quiet_until == NOW + timedelta(microseconds=1)


def pending(started: datetime, **extra: str) -> NodeClaimView:
    return claim(
        "old",
        E - LEAD + timedelta(hours=1),
        annotations={
            ann.CLAIM_STATE: "pending",
            ann.STARTED_AT: ann.format_timestamp(started),
            **extra,
        },
    )


ANCHOR = {ann.ACTIVE_ROTATION: "old"}


def test_surge_ready_freezes_the_host_mirrors_then_deletes_the_old_claim_last() -> None:
    placeholder = PodView(
        "fleetgate-system",
        "fleetgate-surge-old",
        node_name="new",
        phase="Running",
        labels={ann.SURGE_FOR: "old"},
    )
    new = claim("new", timedelta(minutes=3))
    obs = pool(
        pending(NOW - timedelta(minutes=3)), new, annotations=ANCHOR, placeholders=(placeholder,)
    )
    result = step(obs, [policy()], NOW)
    kinds = writes(result.actions)
    assert kinds[-1] is DeleteClaim and result.actions[-1] == DeleteClaim("old")
    mirror = next(
        a
        for a in result.actions
        if isinstance(a, AnnotatePool) and ann.ACTIVE_ROTATION_STATE in a.patch
    )
    assert mirror.patch[ann.SURGE_WAIT] == "3m" and mirror.expect_version is None
    assert AnnotateClaim("old", {ann.CLAIM_STATE: "draining"}) in result.actions
    assert ObserveDuration("surge_wait", 180.0) in result.actions
    host_freeze = next(a for a in result.actions if isinstance(a, AnnotateNode) and a.name == "new")
    assert host_freeze.patch[ann.SURGE_FOR] == "old"
    assert result.actions.index(host_freeze) < result.actions.index(mirror)


def test_a_surge_on_the_candidate_itself_or_a_foreign_pool_is_not_ready() -> None:
    on_self = PodView("ns", "ph", node_name="old", phase="Running", labels={ann.SURGE_FOR: "old"})
    result = step(
        pool(pending(NOW - timedelta(minutes=3)), annotations=ANCHOR, placeholders=(on_self,)),
        [policy()],
        NOW,
    )
    assert DeleteClaim("old") not in result.actions


def test_ready_timeout_rolls_back_placeholder_before_the_surge_claim() -> None:
    started = NOW - timedelta(minutes=16)
    surge = claim("surge", timedelta(minutes=15), ready=False, node_name=None)
    placeholder = PodView("fleetgate-system", "fleetgate-surge-old", labels={ann.SURGE_FOR: "old"})
    obs = pool(pending(started), surge, annotations=ANCHOR, placeholders=(placeholder,))
    result = step(obs, [policy()], NOW)
    actions = list(result.actions)
    delete_ph = actions.index(DeletePlaceholder("fleetgate-system", "fleetgate-surge-old"))
    assert actions.index(DeleteClaim("surge")) > delete_ph
    failed = next(a for a in actions if isinstance(a, AnnotateClaim))
    assert failed.patch[ann.CLAIM_STATE] == "failed" and failed.patch[ann.RETRY_COUNT] == "1"
    last = actions[-1]
    assert isinstance(last, AnnotatePool) and last.patch[ann.ACTIVE_ROTATION] is None
    assert last.patch[ann.LAST_FAILURE_AT] == ann.format_timestamp(NOW)
    assert actions.index(CountCompletion("failure")) < actions.index(failed)


def test_exactly_ready_timeout_is_not_yet_a_failure() -> None:
    result = step(pool(pending(NOW - timedelta(minutes=15)), annotations=ANCHOR), [policy()], NOW)
    assert CountCompletion("failure") not in result.actions


def test_a_success_counts_before_the_write_and_observes_the_drain_after_it() -> None:
    drained = {
        **ANCHOR,
        ann.ACTIVE_ROTATION_STATE: "draining",
        ann.DRAINING_AT: ann.format_timestamp(NOW - timedelta(minutes=7)),
    }
    result = step(pool(claim("new", timedelta(hours=1)), annotations=drained), [policy()], NOW)
    actions = list(result.actions)
    write = next(a for a in actions if isinstance(a, AnnotatePool))
    assert write.patch[ann.LAST_ROTATION_AT] == ann.format_timestamp(NOW)
    assert write.patch["fleetgate.io/observed-drain"] == "7m"
    assert actions.index(CountCompletion("success")) < actions.index(write)
    assert actions.index(ObserveDuration("drain", 420.0)) > actions.index(write)


def test_fatal_findings_stop_new_starts_but_not_an_anchored_rotation() -> None:
    short = replace(
        pool(claim("a", timedelta(minutes=30), expire_after=timedelta(hours=1))),
        expire_after=timedelta(hours=1),
    )
    result = step(short, [policy()], NOW)
    assert result.report.reason == "fatal" and writes(result.actions) == []
    drained = {**ANCHOR, ann.ACTIVE_ROTATION_STATE: "draining"}
    gone = replace(pool(annotations=drained), expire_after=timedelta(hours=1))
    assert CountCompletion("success") in step(gone, [policy()], NOW).actions


def test_the_surgeless_race_is_strict_and_needs_the_opt_in() -> None:
    enabled = policy(forceful_fallback=ForcefulFallback(enabled=True))
    resolved = enabled.resolve(timedelta(hours=1))
    bound = resolved.ready_timeout + resolved.drain_bound  # 15m + 1h2m
    exactly = claim("a", E - bound)
    inside = claim("b", E - bound + timedelta(seconds=1))
    p = Pass.begin(pool(exactly, inside), resolved, NOW, MachineConfig())
    assert not surgeless_fallback(p, exactly) and surgeless_fallback(p, inside)
    off = Pass.begin(p.obs, policy().resolve(timedelta(hours=1)), NOW, MachineConfig())
    assert not surgeless_fallback(off, inside)


def test_limits_without_headroom_write_nothing() -> None:
    obs = pool(
        claim("a", E - LEAD + timedelta(minutes=5)), limits={"cpu": 5000}, resources={"cpu": 4000}
    )
    result = step(obs, [policy()], NOW)
    assert result.report.reason == "headroom" and writes(result.actions) == []


def test_next_eligibility_is_the_earliest_trigger_or_backoff_end() -> None:
    resolved = policy().resolve(timedelta(hours=1))
    young = claim("a", timedelta(days=1))
    failed = claim(
        "b",
        E,
        annotations={
            ann.CLAIM_STATE: "failed",
            ann.RETRY_COUNT: "3",
            ann.FAILED_AT: ann.format_timestamp(NOW),
        },
    )
    p = Pass.begin(pool(young, failed), resolved, NOW, MachineConfig())
    assert next_eligibility(p) == NOW + timedelta(hours=2)  # third failure: 30m · 2^2
    p = Pass.begin(pool(young), resolved, NOW, MachineConfig())
    assert next_eligibility(p) == NOW + E - LEAD - timedelta(days=1) + timedelta(microseconds=1)


# --- Karpenter's own state (issue 16) -----------------------------------------------------------

DUE = E - LEAD + timedelta(minutes=5)


def test_a_claim_karpenter_is_already_disrupting_is_skipped() -> None:
    # Karpenter tainted the oldest claim's node: picking it too would replace it twice.
    disrupted = NodeView(
        "old", labels=POOL_LABEL, ready=True, taints=(Taint("karpenter.sh/disrupted"),)
    )
    base = pool(claim("old", DUE + timedelta(minutes=5)), claim("next", DUE))
    obs = replace(base, nodes=(disrupted, *base.nodes[1:]))
    result = step(obs, [policy()], NOW)
    assert result.started == "next"
    assert result.report.census is not None
    assert result.report.census.as_dict()["KarpenterDisrupting"] == 1
    # The DisruptionReason condition alone says the same.
    reason = pool(claim("old", DUE, disruption_reason="Drifted"))
    skipped = step(reason, [policy()], NOW)
    assert skipped.started is None and skipped.report.reason == "noEligibleClaim"


def test_a_node_holding_an_opted_out_pod_is_not_eligible_while_the_opt_out_lasts() -> None:
    base = pool(claim("a", DUE))
    guarded = PodView(
        "app",
        "guarded",
        node_name="a",
        phase="Running",
        annotations={ann.KARPENTER_DO_NOT_DISRUPT: "2h"},
        started_at=NOW - timedelta(hours=1),
    )
    obs = replace(base, pods=(*base.pods, guarded))
    result = step(obs, [policy()], NOW)
    assert result.started is None and writes(result.actions) == []
    assert result.report.census is not None and result.report.census.as_dict()["OptedOut"] == 1
    # The simulator wakes when the opt-out runs out, and the claim is then eligible.
    assert result.quiet_until == NOW + timedelta(hours=1)
    later = NOW + timedelta(hours=1, seconds=1)
    assert step(obs, [policy()], later).started == "a"


def test_static_and_not_ready_pools_refuse_to_start_with_a_gate_reason_and_a_finding() -> None:
    for obs, reason, code in [
        (pool(claim("a", DUE), replicas=3), "staticNodePool", "StaticNodePool"),
        (pool(claim("a", DUE), ready=False), "nodePoolNotReady", "NodePoolNotReady"),
    ]:
        result = step(obs, [policy()], NOW)
        assert result.started is None and writes(result.actions) == []
        assert result.report.blocked is not None
        assert result.report.blocked.reason.value == reason == result.report.reason
        assert result.report.derivation is not None
        assert code in [f.code.value for f in result.report.derivation.findings]
        assert any(isinstance(a, Announce) and a.reason == code for a in result.actions)


def test_a_pool_at_its_node_limit_can_never_surge() -> None:
    obs = pool(claim("a", DUE), limits={"nodes": 2000}, resources={"nodes": 2000})
    result = step(obs, [policy()], NOW)
    assert result.report.reason == "headroom" and writes(result.actions) == []
    room = pool(claim("a", DUE), limits={"nodes": 3000}, resources={"nodes": 2000})
    assert step(room, [policy()], NOW).started == "a"


def test_a_carried_census_follows_karpenters_taint_and_pod_opt_outs_as_a_new_one_does() -> None:
    # The census is keyed by each claim's own value; the taint (on the Node) and a Pod's opt-out
    # are not part of it, so a pass where only they change must still reclassify the claim.
    carried: PoolCensus | None = PoolCensus()
    base = pool(claim("old", DUE + timedelta(minutes=5)), claim("next", DUE))
    tainted = NodeView(
        "old", labels=POOL_LABEL, ready=True, taints=(Taint("karpenter.sh/disrupted"),)
    )
    guarded = PodView(
        "app",
        "guarded",
        node_name="next",
        phase="Running",
        annotations={ann.KARPENTER_DO_NOT_DISRUPT: "2h"},
        started_at=NOW - timedelta(hours=1),
    )
    passes = [
        (base, NOW),
        (replace(base, nodes=(tainted, *base.nodes[1:])), NOW),
        (replace(base, nodes=(tainted, *base.nodes[1:]), pods=(*base.pods, guarded)), NOW),
        (replace(base, pods=(*base.pods, guarded)), NOW),
        # the same observation value once the 2h opt-out ran out: time alone ends it
        (replace(base, pods=(*base.pods, guarded)), NOW + timedelta(hours=1, seconds=1)),
        (base, NOW + timedelta(hours=1, seconds=2)),
    ]
    seen = set()
    for obs, at in passes:
        fast, fresh = step(obs, [policy()], at, census=carried), step(obs, [policy()], at)
        assert fast == fresh
        carried = fast.census
        seen.add(fresh.started)
    assert seen == {"old", "next", None}  # each mark moved the pick, so each was exercised


def test_a_due_drifted_claim_is_rotated_and_the_log_and_event_say_by_which_rule() -> None:
    young = pool(claim("d", DUE - timedelta(minutes=10), drifted=True))
    waiting = step(young, [policy()], NOW)
    assert waiting.started is None and waiting.report.census is not None
    assert waiting.report.census.as_dict()["Drifted"] == 1
    due = pool(claim("d", DUE, drifted=True))
    started = step(due, [policy()], NOW)
    assert started.started == "d" and started.drift_rule is DriftRule.DUE
    assert started.report.census is not None
    assert started.report.census.as_dict()[DRIFTED_DUE] == 1
    (selected,) = [a for a in started.actions if isinstance(a, Log) and "selected" in a.message]
    assert selected.fields["rule"] == "driftedDue"
    (event,) = [a for a in started.actions if isinstance(a, Announce)]
    assert "rule driftedDue" in event.message
    # A carried census moves the claim out of Drifted by time alone, when it falls due.
    waited = step(young, [policy()], NOW, census=PoolCensus())
    assert waited.started is None
    later = step(young, [policy()], NOW + timedelta(minutes=10), census=waited.census)
    assert later.started == "d" and later.drift_rule is DriftRule.DUE


def test_no_rotation_starts_while_the_budgets_for_every_reason_allow_none() -> None:
    nightly = budgets_from_spec([{"nodes": "0", "schedule": "0 6 * * *", "duration": "8h"}])
    blocked = step(pool(claim("a", DUE), budgets=nightly), [policy()], NOW)  # 12:00 UTC
    assert blocked.started is None and writes(blocked.actions) == []
    assert blocked.report.blocked is not None
    assert blocked.report.reason == "disruptionBudget"
    assert blocked.report.blocked.until == NOW.replace(hour=14)  # when the budget turns off
    assert step(pool(claim("a", DUE), budgets=nightly), [policy()], NOW.replace(hour=14)).started
    # A Drifted-only budget of 0 says nothing about fleetgate's rotations.
    drift_only = budgets_from_spec([{"nodes": "0", "reasons": ["Drifted"]}])
    assert step(pool(claim("a", DUE), budgets=drift_only), [policy()], NOW).started == "a"
    # The policy may ignore the budgets.
    ignoring = replace(policy(), ignore_disruption_budgets=True)
    assert step(pool(claim("a", DUE), budgets=nightly), [ignoring], NOW).started == "a"


def test_nodes_already_disrupting_use_the_budget_up_as_karpenter_counts_them() -> None:
    ten = DEFAULT_BUDGETS  # 10% of 2 nodes: 1 disruption
    calm = pool(claim("a", DUE), claim("b", timedelta(days=1)), budgets=ten)
    assert step(calm, [policy()], NOW).started == "a"
    sick = replace(calm, nodes=(calm.nodes[0], replace(calm.nodes[1], ready=False)))
    result = step(sick, [policy()], NOW)
    assert result.started is None and result.report.reason == "disruptionBudget"
    assert result.report.blocked is not None and result.report.blocked.until is None
    deleting = pool(claim("a", DUE), claim("b", timedelta(days=1), deleting_at=NOW), budgets=ten)
    assert step(deleting, [policy()], NOW).report.reason == "disruptionBudget"
    # A replacement not yet initialized counts for neither side.
    coming = pool(claim("a", DUE), claim("c", timedelta(minutes=1), ready=False), budgets=ten)
    assert step(coming, [policy()], NOW).started == "a"
