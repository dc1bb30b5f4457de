"""The node-sync plan: when a cluster node joins, is cordoned, drains and leaves the ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetgate.domain import nodesync as ns
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import NodeMetrics, NodeState
from fleetgate.domain.rotation.cluster import NodeClaimView, NodeView, PoolObservation

T0 = datetime(2024, 1, 1, tzinfo=UTC)
CAP = Capacity(4, 16384, 100)
GIB_MILLI = 2**30 * 1000


def cnode(name: str = "n1", **kw: object) -> ns.ClusterNode:
    fields: dict[str, object] = {"pool": "p", "capacity": CAP, "ready": True, **kw}
    return ns.ClusterNode(name, **fields)  # type: ignore[arg-type]


def lnode(
    name: str = "n1",
    *,
    schedulable: bool = True,
    marked: bool = False,
    source: bool = True,
    pool: str = "p",
    capacity: Capacity = CAP,
    used: Resources = Resources(),
) -> NodeState:
    labels = {ns.SOURCE: "true"} if source else {}
    if marked:
        labels[ns.CORDONED] = "true"
    return NodeState(
        name=name,
        pool=pool,
        labels=labels,
        capacity=capacity,
        limits=Resources(12, 16384, 100),
        used=used,
        expected_demand=0.0,
        metrics=NodeMetrics(),
        schedulable=schedulable,
        updated_at=T0,
    )


def kinds(actions: list[ns.SyncAction]) -> list[str]:
    return [type(a).__name__ for a in actions]


# --- capacity and observation ----------------------------------------------------------------


def test_capacity_rounds_milli_units_down_to_whole_threads_mib_and_gib() -> None:
    cap = ns.capacity_of(
        {"cpu": 3_999, "memory": 16 * 2**30 * 1000 + 5, "ephemeral-storage": 50 * GIB_MILLI - 1}
    )
    assert cap == Capacity(3, 16384, 49)


def test_capacity_without_ephemeral_storage_assumes_the_default_disk() -> None:
    assert ns.capacity_of({"cpu": 2000}) == Capacity(2, 0, ns.DEFAULT_DISK_GB)
    assert ns.capacity_of({}, default_disk_gb=7).disk_gb == 7


def test_a_node_whose_claim_is_deleting_is_draining() -> None:
    obs = PoolObservation(
        name="p",
        version="1",
        expire_after=timedelta(days=14),
        claims=(
            NodeClaimView("a", T0, None, node_name="a", deleting_at=T0),
            NodeClaimView("b", T0, None, node_name="b"),
        ),
        nodes=(
            NodeView("a", ready=True, allocatable={"cpu": 4000}),
            NodeView("b", ready=True, unschedulable=True, labels={"x": "y"}),
        ),
    )
    a, b = ns.cluster_nodes(obs)
    assert (a.name, a.draining, a.takes_work, a.capacity.threads) == ("a", True, False, 4)
    assert (b.draining, b.unschedulable, b.takes_work, b.pool) == (False, True, False, "p")


# --- joining ---------------------------------------------------------------------------------


def test_a_ready_node_joins_schedulable_with_its_pool_capacity_and_source_label() -> None:
    node = cnode(labels={"topology.kubernetes.io/zone": "z1", "noise": "x"})
    (action,) = ns.plan([node], [], {})
    assert isinstance(action, ns.AddNode)
    assert action.spec.pool == "p" and action.spec.capacity == CAP
    assert action.spec.labels == {ns.SOURCE: "true", "topology.kubernetes.io/zone": "z1"}


def test_a_node_that_is_not_ready_or_already_draining_does_not_join() -> None:
    assert ns.plan([cnode(ready=False)], [], {}) == []
    assert ns.plan([cnode(draining=True)], [], {}) == []


def test_a_ready_but_cordoned_node_joins_marked_and_cordoned() -> None:
    add, cordon = ns.plan([cnode(unschedulable=True)], [], {})
    assert isinstance(add, ns.AddNode) and add.spec.labels[ns.CORDONED] == "true"
    assert cordon == ns.Cordon("n1")


def test_a_node_in_step_with_the_cluster_needs_nothing() -> None:
    assert ns.plan([cnode()], [lnode()], {}) == []


# --- cordon and uncordon ---------------------------------------------------------------------


def test_a_node_the_cluster_cordons_is_marked_before_it_is_cordoned() -> None:
    update, cordon = ns.plan([cnode(unschedulable=True)], [lnode()], {})
    assert isinstance(update, ns.UpdateNode) and update.spec.labels[ns.CORDONED] == "true"
    assert cordon == ns.Cordon("n1")


def test_a_marked_schedulable_node_left_by_a_crash_is_cordoned_without_a_second_mark() -> None:
    assert ns.plan([cnode(unschedulable=True)], [lnode(marked=True)], {}) == [ns.Cordon("n1")]


def test_our_cordon_is_lifted_before_the_marker_is_dropped() -> None:
    uncordon, update = ns.plan([cnode()], [lnode(schedulable=False, marked=True)], {})
    assert uncordon == ns.Uncordon("n1")
    assert isinstance(update, ns.UpdateNode) and ns.CORDONED not in update.spec.labels


def test_an_operators_cordon_survives_the_cluster_uncordoning() -> None:
    assert ns.plan([cnode()], [lnode(schedulable=False, marked=False)], {}) == []


def test_an_operators_cordon_is_not_marked_as_ours_when_the_cluster_cordons_too() -> None:
    assert ns.plan([cnode(unschedulable=True)], [lnode(schedulable=False)], {}) == []


def test_a_node_that_is_no_longer_ready_stops_taking_work() -> None:
    assert kinds(ns.plan([cnode(ready=False)], [lnode()], {})) == ["UpdateNode", "Cordon"]


# --- drain and removal -----------------------------------------------------------------------


def test_a_draining_node_is_cordoned_then_its_placements_relocated() -> None:
    actions = ns.plan([cnode(draining=True)], [lnode()], {"n1": 3})
    assert kinds(actions) == ["UpdateNode", "Cordon", "Relocate"]
    assert actions[-1] == ns.Relocate("n1")


def test_an_empty_draining_node_only_stops_taking_work() -> None:
    assert kinds(ns.plan([cnode(draining=True)], [lnode()], {})) == ["UpdateNode", "Cordon"]


def test_a_node_gone_from_the_cluster_relocates_first_and_leaves_once_empty() -> None:
    assert ns.plan([], [lnode(schedulable=False, marked=True)], {"n1": 2}) == [ns.Relocate("n1")]
    assert ns.plan([], [lnode(schedulable=False, marked=True)], {}) == [ns.RemoveNode("n1")]


def test_a_vanished_node_still_schedulable_is_cordoned_before_anything_moves() -> None:
    assert kinds(ns.plan([], [lnode()], {"n1": 1})) == ["UpdateNode", "Cordon", "Relocate"]


def test_operator_nodes_unknown_to_the_cluster_are_left_alone() -> None:
    assert ns.plan([], [lnode("manual", source=False)], {"manual": 4}) == []


def test_a_ledger_node_named_like_a_cluster_node_is_adopted() -> None:
    (update,) = ns.plan([cnode()], [lnode(source=False)], {})
    assert isinstance(update, ns.UpdateNode) and update.spec.labels[ns.SOURCE] == "true"


def test_a_capacity_change_updates_the_node_and_keeps_our_marker() -> None:
    bigger = Capacity(8, 32768, 100)
    (update,) = ns.plan(
        [cnode(capacity=bigger, unschedulable=True)], [lnode(schedulable=False, marked=True)], {}
    )
    assert isinstance(update, ns.UpdateNode)
    assert update.spec.capacity == bigger and update.spec.labels[ns.CORDONED] == "true"


def test_the_plan_is_in_name_order() -> None:
    actions = ns.plan([cnode("b"), cnode("a")], [], {})
    assert [a.spec.name for a in actions if isinstance(a, ns.AddNode)] == ["a", "b"]


# --- what other departures hold ---------------------------------------------------------------


def test_only_nodes_fleetgate_took_out_of_service_and_holding_something_are_taken_out() -> None:
    held = Resources(1, 1, 1)
    nodes = [
        lnode("src", schedulable=False, marked=True, used=held),
        lnode("leaving", schedulable=False, marked=True, used=held),
        lnode("empty", schedulable=False, marked=True),
        lnode("operator", schedulable=False, used=held),  # an API cordon: not leaving
        lnode("working", marked=True, used=held),  # marked, not yet cordoned
    ]
    assert ns.taken_out(nodes, "src") == ["leaving"]
    assert ns.taken_out(nodes) == ["leaving", "src"]


def test_applying_a_plan_leaves_nothing_more_to_do() -> None:
    """Level-triggered: the plan's own result plans to nothing (simulated on plain values)."""
    cluster = [cnode("a"), cnode("b", unschedulable=True), cnode("c", draining=True)]
    ledger = [lnode("b"), lnode("c"), lnode("d", schedulable=False, marked=True)]
    state = {n.name: n for n in ledger}
    for action in ns.plan(cluster, ledger, {"c": 0, "d": 0}):
        if isinstance(action, ns.AddNode | ns.UpdateNode):
            s = action.spec
            old = state.get(s.name)
            state[s.name] = lnode(s.name, schedulable=old.schedulable if old else True)
            state[s.name] = NodeState(**{**vars(state[s.name]), "labels": dict(s.labels)})
        elif isinstance(action, ns.Cordon | ns.Uncordon):
            old = state[action.node]
            state[action.node] = NodeState(
                **{**vars(old), "schedulable": isinstance(action, ns.Uncordon)}
            )
        elif isinstance(action, ns.RemoveNode):
            del state[action.node]
    assert ns.plan(cluster, list(state.values()), {}) == []
    assert sorted(state) == ["a", "b", "c"]
    assert not state["b"].schedulable and not state["c"].schedulable


def test_relocations_come_after_every_join_so_a_new_node_can_take_them() -> None:
    actions = ns.plan([cnode("b-surge"), cnode("a", draining=True)], [lnode("a")], {"a": 1})
    assert kinds(actions) == ["UpdateNode", "Cordon", "AddNode", "Relocate"]
