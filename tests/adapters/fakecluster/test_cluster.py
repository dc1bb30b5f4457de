"""The fake cluster behaves like Karpenter where the rotation controller can tell."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster, NodeChange
from fleetgate.adapters.fakecluster.faults import ControllerCrash
from fleetgate.adapters.fakecluster.scheduler import BATCH
from fleetgate.domain.ports import ClusterGateway, SimulatedCluster
from fleetgate.domain.rotation.annotations import KARPENTER_DO_NOT_DISRUPT
from fleetgate.domain.rotation.budgets import budgets_from_spec
from fleetgate.domain.rotation.cluster import ClusterConflict, ObjectNotFound, PlaceholderSpec
from fleetgate.domain.rotation.status import PolicyStatus, ReadyCondition
from tests.ports import assert_implements

T0 = datetime(2024, 1, 1, tzinfo=UTC)
CPU = {"cpu": 3_000}


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(T0)


@pytest.fixture
def cluster(clock: VirtualClock) -> FakeCluster:
    fc = FakeCluster(clock)
    fc.add_pool(
        "pool",
        expire_after="14d",
        termination_grace_period="1h",
        provisioning_delay="2m",
        drain_time="5m",
    )
    return fc


def placeholder(surge_for: str, requests: dict[str, int] | None = None) -> PlaceholderSpec:
    return PlaceholderSpec(
        namespace="ns",
        name=f"ph-{surge_for}",
        pool="pool",
        surge_for=surge_for,
        requests=requests or CPU,
        avoid_hosts=(surge_for,),
    )


def test_the_fake_cluster_is_a_cluster_gateway(cluster: FakeCluster) -> None:
    assert_implements(cluster, ClusterGateway)
    assert_implements(cluster, SimulatedCluster)


async def test_observe_reports_claims_nodes_pods_and_template(cluster: FakeCluster) -> None:
    name = cluster.add_node("pool", workload=CPU)
    obs = await cluster.observe("pool")
    assert obs is not None
    assert obs.expire_after == timedelta(days=14)
    assert obs.termination_grace_period == timedelta(hours=1)
    (claim,) = obs.claims
    assert (claim.name, claim.ready, claim.node_name) == (name, True, name)
    assert [p.name for p in obs.pods_on(name)] == [f"{name}-app"]
    assert obs.resources["cpu"] == 4_000
    assert await cluster.observe("missing") is None


async def test_a_placeholder_that_fits_nowhere_brings_a_new_claim_ready_after_the_delay(
    cluster: FakeCluster,
) -> None:
    old = cluster.add_node("pool", workload=CPU)
    await cluster.create_placeholder(placeholder(old))
    assert cluster.next_event_at() == T0 + BATCH  # Karpenter batches before it launches
    cluster.advance_to(T0 + BATCH)
    obs = await cluster.observe("pool")
    assert obs is not None
    new = next(c for c in obs.claims if c.name != old)
    assert new.created_at == T0 + BATCH
    assert not new.ready and obs.placeholders[0].phase == "Pending"
    assert cluster.next_event_at() == T0 + timedelta(minutes=2)  # the delay includes the batch
    cluster.advance_to(T0 + timedelta(minutes=2))
    obs = await cluster.observe("pool")
    assert obs is not None
    assert obs.claim(new.name).ready  # type: ignore[union-attr]
    assert obs.placeholders[0].node_name == new.name and obs.placeholders[0].phase == "Running"


async def test_a_placeholder_lands_on_spare_capacity_without_a_new_claim(
    cluster: FakeCluster, clock: VirtualClock
) -> None:
    """As Karpenter does: it provisions only for a Pod the scheduler could not place (its
    ``IsProvisionable``: marked Unschedulable, not bound), so a placeholder that fits a node
    that existed brings no new node, however long one waits (issue 41: no surge to count)."""
    old = cluster.add_node("pool", workload=CPU)
    spare = cluster.add_node("pool")
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(clock.now() + timedelta(hours=1))
    obs = await cluster.observe("pool")
    assert obs is not None
    assert len(obs.claims) == 2
    assert obs.placeholders[0].node_name == spare and obs.placeholders[0].phase == "Running"
    assert sum(r.kind == "claim-created" for r in cluster.history) == 2  # the two added


async def test_a_deleted_claim_drains_moves_its_pods_preempting_the_placeholder_then_goes(
    cluster: FakeCluster,
) -> None:
    old = cluster.add_node("pool", workload=CPU)
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(minutes=3))
    await cluster.delete_claim(old)
    obs = await cluster.observe("pool")
    assert obs is not None
    assert obs.claim(old).deleting  # type: ignore[union-attr]
    assert obs.placeholders == ()  # preempted by the evicted workload
    new = next(c for c in obs.claims if c.name != old)
    assert [p.name for p in obs.pods_on(new.name)] == [f"{old}-app"]
    assert cluster.next_event_at() == T0 + timedelta(minutes=8)  # the drain began at 3m
    cluster.advance_to(T0 + timedelta(minutes=8))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is None
    assert any(r.kind == "placeholder-preempted" for r in cluster.history)


async def test_a_stuck_drain_ends_only_at_the_claims_tgp(cluster: FakeCluster) -> None:
    old = cluster.add_node("pool", workload=CPU)
    cluster.stick_drain(old)
    await cluster.delete_claim(old)
    cluster.advance_to(T0 + timedelta(minutes=59))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is not None  # the 5m drain did not end it
    cluster.advance_to(T0 + timedelta(hours=1))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is None


async def test_a_claim_reaching_its_expiry_is_force_expired_and_recorded_as_a_breach(
    cluster: FakeCluster, clock: VirtualClock
) -> None:
    old = cluster.add_node("pool", created_at=T0 - timedelta(days=14) + timedelta(hours=1))
    assert cluster.next_event_at() == T0 + timedelta(hours=1)
    cluster.advance_to(T0 + timedelta(hours=1))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old).deleting  # type: ignore[union-attr]
    assert [b.name for b in cluster.breaches] == [old]


async def test_provisioning_that_never_completes_leaves_the_placeholder_pending(
    cluster: FakeCluster,
) -> None:
    old = cluster.add_node("pool", workload=CPU)
    cluster.fail_provisioning("pool")
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(hours=1))
    assert cluster.next_event_at() == T0 + timedelta(days=14)  # only the old claim's expiry
    obs = await cluster.observe("pool")
    assert obs is not None and obs.placeholders[0].phase == "Pending"


async def test_a_capacity_shortage_marks_the_placeholder_unschedulable(
    cluster: FakeCluster,
) -> None:
    old = cluster.add_node("pool", workload=CPU)
    cluster.capacity_shortage("pool")
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + BATCH)
    obs = await cluster.observe("pool")
    assert obs is not None and len(obs.claims) == 1
    assert obs.placeholders[0].unschedulable_reason == "Unschedulable"
    assert "capacity" in (obs.placeholders[0].unschedulable_message or "")


@pytest.mark.parametrize("limit", ["cpu", "nodes"])  # nodes: counted per claim (issue 16)
async def test_pool_limits_block_a_new_claim(clock: VirtualClock, limit: str) -> None:
    fc = FakeCluster(clock)
    fc.add_pool("pool", expire_after=None, limits={limit: {"cpu": 4_000, "nodes": 1_000}[limit]})
    old = fc.add_node("pool", workload=CPU)
    await fc.create_placeholder(placeholder(old))
    fc.advance_to(T0 + timedelta(hours=1))
    obs = await fc.observe("pool")
    assert obs is not None and len(obs.claims) == 1
    assert f"limits.{limit}" in (obs.placeholders[0].unschedulable_message or "")


async def test_preempting_placeholders_deletes_them(cluster: FakeCluster) -> None:
    old = cluster.add_node("pool", workload=CPU)
    await cluster.create_placeholder(placeholder(old))
    assert cluster.preempt_placeholders("pool") == [f"ph-{old}"]
    obs = await cluster.observe("pool")
    assert obs is not None and obs.placeholders == ()


async def test_the_anchor_write_is_conditional_on_the_version(cluster: FakeCluster) -> None:
    obs = await cluster.observe("pool")
    assert obs is not None
    await cluster.annotate_pool("pool", {"a": "1"}, expect_version=obs.version)
    with pytest.raises(ClusterConflict):
        await cluster.annotate_pool("pool", {"b": "2"}, expect_version=obs.version)
    await cluster.annotate_pool("pool", {"a": None, "c": "3"})
    after = await cluster.observe("pool")
    assert after is not None and dict(after.annotations) == {"c": "3"}


async def test_writes_to_missing_objects_say_so_and_deletes_are_idempotent(
    cluster: FakeCluster,
) -> None:
    with pytest.raises(ObjectNotFound):
        await cluster.annotate_claim("nope", {"a": "1"})
    with pytest.raises(ObjectNotFound):
        await cluster.set_unschedulable("nope", True)
    await cluster.delete_claim("nope")
    await cluster.delete_placeholder("ns", "nope")


async def test_node_listeners_hear_ready_cordon_and_removal(cluster: FakeCluster) -> None:
    heard: list[NodeChange] = []
    unsubscribe = cluster.subscribe(heard.append)
    name = cluster.add_node("pool")
    await cluster.set_unschedulable(name, True)
    await cluster.set_unschedulable(name, False)
    await cluster.delete_claim(name)
    cluster.advance_to(T0 + timedelta(minutes=5))
    await cluster.observe("pool")
    assert [(c.kind, c.node) for c in heard] == [
        ("ready", name),
        ("cordoned", name),
        ("uncordoned", name),
        ("removed", name),
    ]
    unsubscribe()
    cluster.add_node("pool")
    assert len(heard) == 4


async def test_an_injected_crash_fires_after_the_named_write_was_applied(
    cluster: FakeCluster,
) -> None:
    cluster.crash_after(2)
    await cluster.annotate_pool("pool", {"a": "1"})
    with pytest.raises(ControllerCrash):
        await cluster.annotate_pool("pool", {"b": "2"})
    obs = await cluster.observe("pool")
    assert obs is not None and obs.annotations["b"] == "2"
    await cluster.annotate_pool("pool", {"c": "3"})  # disarmed after firing


async def test_the_plugin_builds_a_fake_cluster_on_the_given_clock(clock: VirtualClock) -> None:
    from fleetgate.adapters import plugins

    pm = plugins.plugin_manager(allow={"fake"})
    fc = plugins.make_cluster(pm, "fake", {"drain_time": "7m"}, clock)
    assert isinstance(fc, FakeCluster) and fc.drain_time == timedelta(minutes=7)
    assert await fc.list_pools() == []
    assert await fc.list_policies() is None


async def test_an_unchanged_pool_is_observed_by_reuse_and_every_change_shows(
    cluster: FakeCluster, clock: VirtualClock
) -> None:
    a = cluster.add_node("pool", "a", workload=CPU)
    cluster.add_node("pool", "b")
    first = await cluster.observe("pool")
    again = await cluster.observe("pool")
    assert first is not None and again is first  # nothing changed: the same value
    await cluster.annotate_claim(a, {"x": "1"})
    changed = await cluster.observe("pool")
    assert changed is not None and changed is not first
    assert changed.claims[0].annotations == {"x": "1"}
    assert changed.claims[1] is first.claims[1]  # an unchanged object's value is reused
    assert first.claims[0].annotations == {}  # a value handed out never changes
    await cluster.set_unschedulable(a, True)
    await cluster.delete_claim("b")
    after = await cluster.observe("pool")
    assert after is not None
    node_a = after.node(a)
    assert node_a is not None and node_a.unschedulable
    claim_b = after.claim("b")
    assert claim_b is not None and claim_b.deleting
    clock.advance(timedelta(minutes=10))
    gone = await cluster.observe("pool")
    assert gone is not None and [c.name for c in gone.claims] == [a]
    assert [p.name for p in gone.pods] == [f"{a}-app"]


def _status(matched: tuple[str, ...] = ("pool",)) -> PolicyStatus:
    return PolicyStatus(
        observed_generation=1,
        matched_node_pools=matched,
        rotating_node_pools=(),
        ready=ReadyCondition(True, "Accepted", f"valid and governs {len(matched)} NodePool(s)", T0),
    )


async def test_a_policy_status_is_stored_and_shows_in_the_policy_it_carries(
    cluster: FakeCluster,
) -> None:
    cluster.set_policies([{"kind": "RotationPolicy", "metadata": {"name": "p"}, "spec": {}}])
    assert await cluster.write_policy_status("p", _status()) is True
    assert cluster.policy_statuses["p"] == _status()
    [manifest] = await cluster.list_policies() or []
    assert manifest["metadata"]["generation"] == 1  # set as an API server would
    assert manifest["status"] == _status().as_manifest()
    assert cluster.writes == 0 and cluster.policy_status_writes == 1
    with pytest.raises(ObjectNotFound):
        await cluster.write_policy_status("other", _status())


async def test_a_cluster_carrying_no_policies_stores_any_status(cluster: FakeCluster) -> None:
    assert await cluster.write_policy_status("from-a-file", _status()) is True
    assert cluster.policy_statuses["from-a-file"] == _status()


async def test_an_injected_status_conflict_is_a_lost_write(cluster: FakeCluster) -> None:
    cluster.conflict_policy_status()
    assert await cluster.write_policy_status("p", _status(("a",))) is False
    assert "p" not in cluster.policy_statuses
    assert await cluster.write_policy_status("p", _status(("a",))) is True


async def test_karpenters_own_states_show_in_the_observation(
    cluster: FakeCluster, clock: VirtualClock
) -> None:
    # The states fleetgate must respect (issue 16), so that the simulator shows them too.
    cluster.add_pool("static", expire_after="14d", replicas=2, limits={"nodes": 2_000})
    cluster.add_node("static")
    cluster.add_node("static")
    static = await cluster.observe("static")
    assert static is not None and static.static and static.replicas == 2 and static.ready
    assert static.resources["nodes"] == 2_000  # at its node limit
    cluster.set_pool_ready("static", False)
    assert not (await cluster.observe("static")).ready  # type: ignore[union-attr]

    guarded = cluster.add_node("pool")
    cluster.add_pod(
        "apps",
        "batch",
        node=guarded,
        requests=CPU,
        annotations={"karpenter.sh/do-not-disrupt": "1h"},
    )
    drifted = cluster.add_node("pool")
    cluster.set_drifted(drifted)
    disrupted = cluster.add_node("pool")
    replacement = cluster.karpenter_disrupt(disrupted, "Expired")
    obs = await cluster.observe("pool")
    assert obs is not None
    views = {c.name: c.selection_view for c in obs.claims}
    assert views[drifted].drifted and not views[drifted].karpenter_disrupting
    assert views[disrupted].disruption_reason == "Expired" and views[disrupted].deleting
    node = obs.node(disrupted)
    assert node is not None and [t.key for t in node.taints] == ["karpenter.sh/disrupted"]
    assert replacement in views and not views[replacement].karpenter_disrupting
    (pod,) = obs.pods_on(guarded)
    assert pod.annotations == {"karpenter.sh/do-not-disrupt": "1h"}
    assert pod.started_at == clock.now()


# --- Karpenter's provisioning in the states fleetgate respects (issue 16) ---------------------


async def test_a_static_pool_provisions_nothing_for_a_pending_placeholder(
    clock: VirtualClock,
) -> None:
    fc = FakeCluster(clock)
    fc.add_pool("pool", expire_after=None, replicas=1)
    old = fc.add_node("pool", workload=CPU)
    await fc.create_placeholder(placeholder(old))
    fc.advance_to(T0 + timedelta(hours=1))
    obs = await fc.observe("pool")
    assert obs is not None and [c.name for c in obs.claims] == [old]
    assert obs.placeholders[0].phase == "Pending"
    assert "static" in (obs.placeholders[0].unschedulable_message or "")


async def test_a_pool_that_is_not_ready_provisions_nothing_until_it_is(
    cluster: FakeCluster, clock: VirtualClock
) -> None:
    old = cluster.add_node("pool", workload=CPU)
    cluster.set_pool_ready("pool", False)
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(hours=1))
    obs = await cluster.observe("pool")
    assert obs is not None and len(obs.claims) == 1
    assert "not Ready" in (obs.placeholders[0].unschedulable_message or "")
    cluster.set_pool_ready("pool", True)  # Ready again: the Pending Pod gets its node
    cluster.advance_to(clock.now() + BATCH)
    obs = await cluster.observe("pool")
    assert obs is not None and len(obs.claims) == 2


async def test_a_node_limit_with_room_still_launches(clock: VirtualClock) -> None:
    fc = FakeCluster(clock)
    fc.add_pool("pool", expire_after=None, limits={"nodes": 2_000})
    old = fc.add_node("pool", workload=CPU)
    await fc.create_placeholder(placeholder(old))
    fc.advance_to(T0 + BATCH)
    obs = await fc.observe("pool")
    assert obs is not None and len(obs.claims) == 2


async def test_a_deleted_claim_of_a_static_pool_is_replaced_after_it_is_gone(
    clock: VirtualClock,
) -> None:
    fc = FakeCluster(clock)
    fc.add_pool("pool", expire_after=None, replicas=2, provisioning_delay="2m", drain_time="5m")
    first, second = fc.add_node("pool"), fc.add_node("pool")
    await fc.delete_claim(first)
    fc.advance_to(T0 + timedelta(minutes=4))
    obs = await fc.observe("pool")
    assert obs is not None and {c.name for c in obs.claims} == {first, second}  # no make first
    fc.advance_to(T0 + timedelta(minutes=5))  # drained: gone, and a replacement is launched
    obs = await fc.observe("pool")
    assert obs is not None and len(obs.claims) == 2 and first not in {c.name for c in obs.claims}
    (new,) = [c for c in obs.claims if c.name != second]
    assert new.created_at == T0 + timedelta(minutes=5) and not new.ready
    fc.advance_to(T0 + timedelta(minutes=7))
    assert (await fc.observe("pool")).claim(new.name).ready  # type: ignore[union-attr]
    kinds = [r.kind for r in fc.history if r.name == new.name]
    assert kinds[:2] == ["claim-created", "static-replacement"]


async def test_a_static_pool_is_kept_at_its_replicas_only_within_its_node_limit(
    clock: VirtualClock,
) -> None:
    fc = FakeCluster(clock)
    fc.add_pool("pool", expire_after=None, replicas=3, limits={"nodes": 2_000}, drain_time="0s")
    first, second = fc.add_node("pool"), fc.add_node("pool")
    fc.set_pool_ready("pool", False)
    await fc.delete_claim(first)
    fc.advance_to(T0 + timedelta(minutes=1))
    assert {c.name for c in fc.claims.values()} == {second}  # not Ready: nothing replaced
    fc.set_pool_ready("pool", True)
    assert len(fc.claims) == 2  # topped up, but only to limits.nodes, not to replicas


async def test_karpenter_disrupting_at_an_instant_makes_before_it_breaks(
    cluster: FakeCluster,
) -> None:
    old = cluster.add_node("pool")
    at = T0 + timedelta(hours=1)
    cluster.disrupt_at(old, at, "Drifted")
    assert cluster.next_event_at() == at
    cluster.advance_to(at)
    obs = await cluster.observe("pool")
    assert obs is not None and len(obs.claims) == 2
    view = obs.claim(old).selection_view  # type: ignore[union-attr]
    assert view.karpenter_disrupting and not view.deleting  # replacing it, not yet deleting
    (new,) = [c for c in obs.claims if c.name != old]
    assert not new.ready and new.created_at == at
    cluster.advance_to(at + timedelta(minutes=2))  # the replacement is Ready: the old one goes
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(new.name).ready  # type: ignore[union-attr]
    assert obs.claim(old).deleting  # type: ignore[union-attr]
    cluster.advance_to(at + timedelta(minutes=7))
    assert [c.name for c in cluster.claims.values()] == [new.name]


def _identity_diff(before: tuple, after: tuple) -> tuple[set[int], set[int]]:
    old, new = {id(v) for v in before}, {id(v) for v in after}
    return new - old, old - new


async def test_an_observation_carries_exactly_the_member_changes_since_the_last(
    cluster: FakeCluster, clock: VirtualClock
) -> None:
    names = [cluster.add_node("pool", workload=CPU) for _ in range(4)]
    first = await cluster.observe("pool")
    assert first is not None and first.serial is not None and first.changes is None
    # Between the two observations: one claim annotated, one node annotated twice (shown,
    # replaced and replaced again), one claim's deletion started, one node added.
    await cluster.annotate_claim(names[0], {"a": "1"})
    await cluster.annotate_node(names[1], {"b": "1"})
    await cluster.annotate_node(names[1], {"b": "2"})
    await cluster.delete_claim(names[2])
    cluster.add_node("pool", workload=CPU)
    second = await cluster.observe("pool")
    assert second is not None and second.changes is not None
    changes = second.changes
    assert changes.since == first.serial
    for attr in ("claims", "nodes", "pods"):
        added, gone = _identity_diff(getattr(first, attr), getattr(second, attr))
        assert {id(v) for v in getattr(changes, f"{attr}_added")} == added, attr
        assert {id(v) for v in getattr(changes, f"{attr}_gone")} == gone, attr
    assert {c.name for c in changes.claims_added} >= {names[0], names[2]}
    # Nothing changed: the same value again, and the next one counts from the second.
    assert await cluster.observe("pool") is second
    clock.advance(timedelta(minutes=10))
    cluster.catch_up()
    third = await cluster.observe("pool")
    assert third is not None and third.changes is not None
    assert third.changes.since == second.serial
    added, gone = _identity_diff(second.claims, third.claims)
    assert {id(v) for v in third.changes.claims_added} == added
    assert {id(v) for v in third.changes.claims_gone} == gone
    assert names[2] not in {c.name for c in third.claims}  # its drain ended: it left


async def test_a_pdb_that_allows_no_disruption_holds_the_drain_until_the_tgp(
    cluster: FakeCluster,
) -> None:
    old = cluster.add_node("pool", workload=CPU)
    cluster.add_pdb("default", "app", match_labels={"app": "pool"}, max_unavailable=0)
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(minutes=3))  # the surge node is Ready
    await cluster.delete_claim(old)

    cluster.advance_to(T0 + timedelta(minutes=59))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is not None  # the 5m drain could not end it
    assert [p.name for p in obs.pods_on(old)] == [f"{old}-app"]  # evictions refused, retried
    kinds = [r.kind for r in cluster.history]
    assert kinds.count("eviction-blocked") == 1 and "drain-forced" not in kinds

    # Deleted at 3m with a tGP of 1h: Karpenter force-deletes the Pod its own 30 s grace period
    # before that deadline (needsForceDelete), and the claim goes at the deadline.
    deadline = T0 + timedelta(minutes=63)
    cluster.advance_to(deadline - timedelta(seconds=31))
    obs = await cluster.observe("pool")
    assert obs is not None and [p.name for p in obs.pods_on(old)] == [f"{old}-app"]
    cluster.advance_to(deadline - timedelta(seconds=30))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is not None and obs.pods_on(old) == ()
    forced = [r for r in cluster.history if r.kind == "drain-forced"]
    assert [(r.name, r.at) for r in forced] == [(old, deadline - timedelta(seconds=30))]
    cluster.advance_to(deadline)
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is None
    new = next(c for c in obs.claims if c.name != old)
    assert [p.name for p in obs.pods_on(new.name)] == [f"{old}-app"]  # it lands after the force


async def test_a_do_not_disrupt_pod_holds_the_drain_until_it_is_forced(
    cluster: FakeCluster,
) -> None:
    # Karpenter never evicts a Pod whose do-not-disrupt is active: the drain waits for it until
    # the claim's deadline less the Pod's grace period (here 10 minutes), then forces it.
    old = cluster.add_node("pool", workload=CPU)
    cluster.add_pod(
        "batch",
        "job",
        node=old,
        annotations={KARPENTER_DO_NOT_DISRUPT: "true"},
        termination_grace_period=timedelta(minutes=10),
    )
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(minutes=3))
    await cluster.delete_claim(old)
    deadline = T0 + timedelta(minutes=63)

    cluster.advance_to(deadline - timedelta(minutes=10, seconds=1))
    obs = await cluster.observe("pool")
    assert obs is not None and [p.name for p in obs.pods_on(old)] == ["job"]  # app evicted
    blocked = [r for r in cluster.history if r.kind == "eviction-blocked"]
    assert [dict(r.data)["pods"] for r in blocked] == ["job"]
    cluster.advance_to(deadline - timedelta(minutes=10))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is not None and obs.pods_on(old) == ()
    cluster.advance_to(deadline)
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is None


async def test_a_duration_opt_out_that_runs_out_lets_the_drain_end(cluster: FakeCluster) -> None:
    old = cluster.add_node("pool", workload=CPU)
    cluster.add_pod("batch", "job", node=old, annotations={KARPENTER_DO_NOT_DISRUPT: "20m"})
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(minutes=3))
    await cluster.delete_claim(old)
    cluster.advance_to(T0 + timedelta(minutes=19))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is not None  # held past the 5m drain
    cluster.advance_to(T0 + timedelta(minutes=21))  # ran out at 20m; a retry follows within 10s
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is None
    assert "drain-forced" not in {r.kind for r in cluster.history}


async def test_a_pdb_with_room_lets_the_drain_end_on_time(cluster: FakeCluster) -> None:
    old = cluster.add_node("pool", workload=CPU)
    cluster.add_pdb("default", "app", match_labels={"app": "pool"}, max_unavailable=1)
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(minutes=3))
    await cluster.delete_claim(old)
    cluster.advance_to(T0 + timedelta(minutes=8))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is None
    assert not {"eviction-blocked", "drain-forced"} & {r.kind for r in cluster.history}


async def test_a_held_drain_ends_once_the_budget_recovers_not_at_the_tgp(
    cluster: FakeCluster,
) -> None:
    # Two replicas, minAvailable 1: one node's Pod is Pending (its node not Ready), so the
    # drained node's Pod is held until the other becomes healthy; then the drain ends.
    old = cluster.add_node("pool", workload=CPU)
    other = cluster.add_node("pool", workload=CPU, ready=False)
    cluster.add_pdb("default", "app", match_labels={"app": "pool"}, min_available=1)
    await cluster.create_placeholder(placeholder(old))
    cluster.advance_to(T0 + timedelta(minutes=3))
    await cluster.delete_claim(old)
    cluster.advance_to(T0 + timedelta(minutes=20))
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is not None

    cluster.set_ready(other, True)
    cluster.advance_to(T0 + timedelta(minutes=21))  # the next retry is at most 10 s away
    obs = await cluster.observe("pool")
    assert obs is not None and obs.claim(old) is None
    kinds = [r.kind for r in cluster.history]
    assert "eviction-done" in kinds and "drain-forced" not in kinds


def test_a_pdb_names_exactly_one_bound(cluster: FakeCluster) -> None:
    with pytest.raises(ValueError, match="exactly one of minAvailable or maxUnavailable"):
        cluster.add_pdb("default", "app", match_labels={}, min_available=1, max_unavailable=1)


async def test_karpenters_own_disruptions_wait_for_the_budgets_for_their_reason(
    clock: VirtualClock,
) -> None:
    fc = FakeCluster(clock)
    nightly = {"nodes": "0", "schedule": "0 0 * * *", "duration": "2h", "reasons": ["Drifted"]}
    fc.add_pool(
        "pool",
        expire_after="14d",
        provisioning_delay="2m",
        drain_time="5m",
        budgets=budgets_from_spec([nightly, {"nodes": "0", "reasons": ["Empty"]}]),
    )
    drifted, other = fc.add_node("pool"), fc.add_node("pool")
    fc.disrupt_at(drifted, T0 + timedelta(minutes=30), "Drifted")
    fc.disrupt_at(other, T0 + timedelta(minutes=30), "Underutilized")
    fc.advance_to(T0 + timedelta(minutes=30))
    obs = await fc.observe("pool")
    assert obs is not None and obs.budgets[0].reasons == ("Drifted",)
    assert not obs.claim(drifted).selection_view.karpenter_disrupting  # type: ignore[union-attr]
    assert obs.claim(other).selection_view.karpenter_disrupting  # type: ignore[union-attr]
    blocked = [r for r in fc.history if r.kind == "karpenter-disruption-blocked"]
    assert [(r.name, dict(r.data)["reason"]) for r in blocked] == [(drifted, "Drifted")]
    # Held back until the Drifted budget turns off at 02:00; by then the other one is done.
    assert fc.next_event_at() is not None
    fc.advance_to(T0 + timedelta(hours=2) - timedelta(seconds=1))
    assert fc.claims[drifted].disruption_reason is None
    fc.advance_to(T0 + timedelta(hours=2))
    assert fc.claims[drifted].disruption_reason == "Drifted"


async def test_disruptions_under_way_hold_back_the_next_one(clock: VirtualClock) -> None:
    fc = FakeCluster(clock)
    fc.add_pool("pool", expire_after="14d", provisioning_delay="2m", drain_time="5m")
    first, second = fc.add_node("pool"), fc.add_node("pool")  # the default 10%: one at a time
    fc.disrupt_at(first, T0 + timedelta(minutes=1))
    fc.disrupt_at(second, T0 + timedelta(minutes=1))
    fc.advance_to(T0 + timedelta(minutes=1))
    going = [c for c in (first, second) if fc.claims[c].disruption_reason is not None]
    assert len(going) == 1
    fc.advance_to(T0 + timedelta(minutes=30))  # the first is gone; the budget's next look
    assert all(c not in fc.claims or fc.claims[c].disruption_reason for c in (first, second))
