"""The two halves share nodes: what the capacity ledger must do so it agrees with the cluster.

The cluster (Karpenter, or the fake one) owns which nodes exist and whether they may take new
work; the ledger owns what is placed on them. ``plan`` compares the two and returns the ledger
writes that bring it in line, in the order they must be applied:

* a cluster node joins the ledger once it is Ready (never while it is still launching or
  already being deleted), with its capacity from the node's allocatable;
* a node the cluster cordons, drains or loses is cordoned in the ledger, so nothing new is
  placed on a node that is going away; fleetgate marks the cordon it applied (the
  ``fleetgate.io/cordoned`` label, set *before* the cordon) and lifts only cordons so marked, so
  an operator's own cordon through the API survives the cluster uncordoning the node;
* the placements of a draining (or vanished) node are relocated by the node's relocation plan
  (``capacity.relocation.plan``, the very plan the rotation's ledger gate judged);
* a node that has left the cluster leaves the ledger, but only once it holds nothing.

Ledger nodes the sync never adopted (no ``fleetgate.io/cluster-node`` label, and no cluster node
of that name) are the operator's and are left alone. Level-triggered: applying the plan and
planning again yields nothing more to do, and a sync interrupted anywhere is finished by the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from fleetgate.domain.capacity.dimensions import Capacity
from fleetgate.domain.capacity.model import NodeSpec, NodeState
from fleetgate.domain.rotation.annotations import CORDONED as ROTATION_CORDONED
from fleetgate.domain.rotation.cluster import PoolObservation

SOURCE = "fleetgate.io/cluster-node"
"""Ledger label on nodes the sync manages (they mirror a cluster node of the same name)."""
CORDONED = ROTATION_CORDONED
"""Ledger label marking a cordon fleetgate applied because of the cluster (same key as the
rotation's own marker on the Node: only a cordon fleetgate applied is ever lifted by it)."""
TRUE = "true"
COPIED_LABELS = (
    "karpenter.sh/nodepool",
    "karpenter.sh/capacity-type",
    "kubernetes.io/arch",
    "topology.kubernetes.io/zone",
)
"""Node labels worth carrying into the ledger (for reading placements by zone, say)."""
DEFAULT_DISK_GB = 100
"""Disk a node is assumed to offer when it publishes no ``ephemeral-storage``."""

_MILLI = 1000
_MIB = 2**20
_GIB = 2**30


@dataclass(frozen=True)
class ClusterNode:
    """One Node as the sync needs it: identity, capacity and whether it may take new work."""

    name: str
    pool: str
    capacity: Capacity
    ready: bool
    unschedulable: bool = False
    draining: bool = False
    labels: Mapping[str, str] | None = None

    @property
    def takes_work(self) -> bool:
        """Ready, not cordoned and not being deleted: new placements may land here."""
        return self.ready and not self.unschedulable and not self.draining


def capacity_of(allocatable: Mapping[str, int], default_disk_gb: int = DEFAULT_DISK_GB) -> Capacity:
    """A node's ledger capacity from its allocatable (milli-units, as the cluster reports them).

    Whole threads, whole MiB and whole GiB, rounded down: the ledger never believes in capacity
    the node does not have.
    """
    cpu = allocatable.get("cpu", 0)
    memory = allocatable.get("memory", 0)
    disk = allocatable.get("ephemeral-storage")
    return Capacity(
        threads=max(0, cpu) // _MILLI,
        memory_mb=max(0, memory) // (_MILLI * _MIB),
        disk_gb=default_disk_gb if disk is None else max(0, disk) // (_MILLI * _GIB),
    )


def cluster_nodes(observation: PoolObservation) -> list[ClusterNode]:
    """The pool's Nodes with their claims' deletion folded in (a deleted claim drains its node)."""
    deleting = {c.node_name for c in observation.claims if c.deleting and c.node_name}
    return [
        ClusterNode(
            name=node.name,
            pool=observation.name,
            capacity=capacity_of(node.allocatable),
            ready=node.ready,
            unschedulable=node.unschedulable,
            draining=node.name in deleting,
            labels=dict(node.labels),
        )
        for node in observation.nodes
    ]


# --- the writes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddNode:
    """Add the node to the ledger (it joins schedulable; a cordon follows if it must not be)."""

    spec: NodeSpec


@dataclass(frozen=True)
class UpdateNode:
    """Replace the node's pool, labels and capacity (markers change this way too)."""

    spec: NodeSpec


@dataclass(frozen=True)
class Cordon:
    """Mark the ledger node unschedulable."""

    node: str


@dataclass(frozen=True)
class Uncordon:
    """Mark the ledger node schedulable again."""

    node: str


@dataclass(frozen=True)
class Relocate:
    """Re-admit every placement of ``node`` elsewhere through the placement walk (moves)."""

    node: str


@dataclass(frozen=True)
class RemoveNode:
    """Take the node (which holds nothing) out of the ledger."""

    node: str


SyncAction = AddNode | UpdateNode | Cordon | Uncordon | Relocate | RemoveNode


def node_spec(node: ClusterNode, *, cordoned_by_us: bool) -> NodeSpec:
    """The ledger's declaration of a cluster node, with the cordon marker if fleetgate set one."""
    labels = {k: v for k, v in (node.labels or {}).items() if k in COPIED_LABELS}
    labels[SOURCE] = TRUE
    if cordoned_by_us:
        labels[CORDONED] = TRUE
    return NodeSpec(name=node.name, capacity=node.capacity, pool=node.pool, labels=labels)


def _spec_of(state: NodeState) -> NodeSpec:
    return NodeSpec(state.name, state.capacity, state.pool, dict(state.labels))


def _marked(state: NodeState) -> bool:
    return state.labels.get(CORDONED) == TRUE


def _with_marker(state: NodeState, marked: bool) -> NodeSpec:
    labels = dict(state.labels)
    if marked:
        labels[CORDONED] = TRUE
    else:
        labels.pop(CORDONED, None)
    return NodeSpec(state.name, state.capacity, state.pool, labels)


def _take_out_of_service(state: NodeState) -> list[SyncAction]:
    """Cordon a schedulable ledger node, marker first (a crash in between leaves a marked,
    still-schedulable node, which the next plan cordons; never an unmarked cordon of ours)."""
    if not state.schedulable:
        return []
    actions: list[SyncAction] = []
    if not _marked(state):
        actions.append(UpdateNode(_with_marker(state, True)))
    actions.append(Cordon(state.name))
    return actions


def _follow(node: ClusterNode, state: NodeState, held: int) -> list[SyncAction]:
    """The writes for a node both sides know."""
    actions: list[SyncAction] = []
    wanted = node_spec(node, cordoned_by_us=_marked(state))
    if wanted != _spec_of(state):
        actions.append(UpdateNode(wanted))
        state = _updated(state, wanted)
    if not node.takes_work:
        actions += _take_out_of_service(state)
        if node.draining and held:
            actions.append(Relocate(node.name))
    elif _marked(state):
        # Uncordon before dropping the marker: a crash in between leaves a marked schedulable
        # node, which the next plan simply unmarks.
        if not state.schedulable:
            actions.append(Uncordon(state.name))
        actions.append(UpdateNode(_with_marker(state, False)))
    return actions


def _updated(state: NodeState, spec: NodeSpec) -> NodeState:
    """``state`` as it will be once ``spec`` is written (the counters are not touched)."""
    return replace(state, pool=spec.pool, labels=dict(spec.labels), capacity=spec.capacity)


def plan(
    cluster: Sequence[ClusterNode],
    ledger: Sequence[NodeState],
    held: Mapping[str, int],
) -> list[SyncAction]:
    """The ledger writes that make ``ledger`` agree with ``cluster``, in the order to apply them.

    ``held`` counts the placements on each ledger node (a missing name holds none). Every join,
    update and cordon comes before every relocation and removal, so displaced placements can land
    on a node that joins in the same plan (the surge node) and never on one being cordoned.
    Within each part nodes go in name order, so the plan is deterministic.
    """
    in_cluster = {n.name: n for n in cluster}
    in_ledger = {n.name: n for n in ledger}
    actions: list[SyncAction] = []
    for name in sorted(in_cluster.keys() | in_ledger.keys()):
        node, state = in_cluster.get(name), in_ledger.get(name)
        count = held.get(name, 0)
        if node is not None and state is None:
            if node.ready and not node.draining:
                actions.append(AddNode(node_spec(node, cordoned_by_us=not node.takes_work)))
                if not node.takes_work:
                    actions.append(Cordon(name))
        elif node is not None and state is not None:
            actions += _follow(node, state, count)
        elif state is not None and state.labels.get(SOURCE) == TRUE:
            # Gone from the cluster: nothing may land here, what is here moves, then it leaves.
            actions += _take_out_of_service(state)
            actions.append(Relocate(name) if count else RemoveNode(name))
    last = [a for a in actions if isinstance(a, Relocate | RemoveNode)]
    return [a for a in actions if not isinstance(a, Relocate | RemoveNode)] + last


def taken_out(nodes: Sequence[NodeState], source: str | None = None) -> list[str]:
    """The ledger nodes, but ``source``, that fleetgate took out of service because the cluster
    cordoned, drained or lost them (marker set, not schedulable) and that hold anything: what
    they hold is stranded there, or will have to move when their rotation drains them. A
    relocation plan counts it against the room it may use (``relocation.Snapshot.elsewhere``).
    An operator's own cordon through the API (no marker) is not a departure."""
    return sorted(
        n.name
        for n in nodes
        if n.name != source and not n.schedulable and _marked(n) and not n.used.is_zero()
    )


__all__ = [
    "CORDONED",
    "DEFAULT_DISK_GB",
    "SOURCE",
    "AddNode",
    "ClusterNode",
    "Cordon",
    "Relocate",
    "RemoveNode",
    "SyncAction",
    "Uncordon",
    "UpdateNode",
    "capacity_of",
    "cluster_nodes",
    "node_spec",
    "plan",
    "taken_out",
]
