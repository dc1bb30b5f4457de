"""What a pool's nodes and Pods say about its claims, kept from the changed members alone.

Part of the carried census (``census.py``): a claim's bucket also depends on its Node (the
operator's ``do-not-disrupt``, Karpenter's disruption taint) and on the Pods bound there (an
active ``karpenter.sh/do-not-disrupt``, which can run out by time alone). A walk over every node
or Pod per pass is most of a pass in a large pool, so these marks are brought up to each
observation from the members that joined or left since the last one, and each refresh says
which claims' standing moved, for the census to classify them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import compress
from operator import is_not, not_
from typing import Any, TypeVar

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.cluster import (
    MemberChanges,
    NodeClaimView,
    NodeView,
    PodView,
    PoolObservation,
)
from fleetgate.domain.rotation.disruption import node_disrupted, opt_out_expiry, pod_opt_out_active
from fleetgate.domain.rotation.reference import (
    REFERENCE_CORDONED,
    REFERENCE_DO_NOT_DISRUPT_OWNED,
    REFERENCE_SURGE_FOR,
)
from fleetgate.domain.rotation.selection import is_opted_out

_REFERENCE_NODE_KEYS = (REFERENCE_DO_NOT_DISRUPT_OWNED, REFERENCE_CORDONED, REFERENCE_SURGE_FOR)
_FEW = 16


def member_diff(
    previous: Sequence[Any] | None, current: Sequence[Any]
) -> tuple[list[Any], list[Any], bool]:
    """The values of ``current`` that are new since ``previous`` and those that left, compared
    by identity in C (an observation value is rebuilt only when its object changed), and
    whether any object joined, left or moved (not only rebuilt)."""
    if previous is not None and len(previous) == len(current):
        # The usual pass: the same objects in the same places, a few of them rebuilt.
        changed = list(compress(range(len(current)), map(is_not, previous, current)))
        # Many changed places mean a claim joined and another left (everything after shifted).
        if len(changed) <= _FEW and all(previous[i].name == current[i].name for i in changed):
            return [current[i] for i in changed], [previous[i] for i in changed], False
    previous = previous or ()
    before, after = set(map(id, previous)), set(map(id, current))
    # Both sequences hold their values, so an id is not reused while it is compared.
    added = list(compress(current, map(not_, map(before.__contains__, map(id, current)))))
    gone = list(compress(previous, map(not_, map(after.__contains__, map(id, previous)))))
    return added, gone, True


_Member = TypeVar("_Member")


def added_and_gone(
    previous: Sequence[_Member] | None,
    current: Sequence[_Member],
    handed: tuple[Sequence[_Member], Sequence[_Member]] | None,
) -> tuple[Sequence[_Member], Sequence[_Member]]:
    """The members that joined (or were rebuilt) and left since ``previous``: as ``handed``
    over by the gateway when it knows them, else found by ``member_diff``."""
    if handed is not None:
        return handed
    added, gone, _ = member_diff(previous, current)
    return added, gone


class MemberMarks:
    """The marks of one pool's nodes and Pods that move claims between buckets. Owned by one
    census tally; not thread-safe."""

    def __init__(self) -> None:
        self.nodes: tuple[NodeView, ...] | None = None
        self.not_ready = 0
        """How many of ``nodes`` are not Ready (the disruption-budget gate asks at each start)."""
        self._opted_nodes: dict[str, bool] = {}
        self.reference_nodes: set[str] = set()
        # The nodes serving a rotation (surge-for value -> node names), so a pass finds the
        # surge's nodes without walking the pool.
        self._node_surge: dict[str, str] = {}
        self._surge_nodes: dict[str, set[str]] = {}
        # Karpenter's marks: the tainted nodes and the Pods carrying the annotation.
        self._taint_nodes: tuple[NodeView, ...] | None = None
        self._tainted: set[str] = set()
        self._opt_pods: tuple[PodView, ...] | None = None
        self._annotated: dict[int, PodView] = {}
        self._opt_until: datetime | None = None
        self.disrupted: frozenset[str] = frozenset()
        """Claims whose Node carries Karpenter's disruption taint."""
        self.pod_opted: frozenset[str] = frozenset()
        """Claims whose Node holds a Pod with an active ``do-not-disrupt``."""

    def opted(self, view: NodeClaimView) -> bool:
        """Whether ``view`` is opted out: by a Pod on its Node, or by its Node itself."""
        if view.name in self.pod_opted:
            return True
        return view.node_name is not None and self._opted_nodes.get(view.node_name, False)

    # --- the operator's opt-outs, surge hosts, reference markers ------------------------------

    def refresh_nodes(self, nodes: tuple[NodeView, ...], known: MemberChanges | None) -> set[str]:
        """Take in ``nodes``; return the nodes whose operator opt-out changed."""
        previous, self.nodes = self.nodes, nodes
        handed = None if known is None else (known.nodes_added, known.nodes_gone)
        added, gone = added_and_gone(previous, nodes, handed)
        marks = self._opted_nodes
        changed: set[str] = set()
        present = {n.name for n in added}
        # A rebuilt node is among both: its old value leaves the count, its new one joins it.
        self.not_ready += sum(not n.ready for n in added) - sum(not n.ready for n in gone)
        for node in gone:
            self.reference_nodes.discard(node.name)
            self._serving(node.name, None)
            if node.name not in present and marks.pop(node.name, False):
                changed.add(node.name)
        for node in added:
            self._serving(node.name, node.annotations.get(ann.SURGE_FOR))
            if any(key in node.annotations for key in _REFERENCE_NODE_KEYS):
                self.reference_nodes.add(node.name)
            mark = is_opted_out(node.annotations)
            if marks.get(node.name, False) != mark:
                changed.add(node.name)
            marks[node.name] = mark
        return changed

    def _serving(self, node: str, claim: str | None) -> None:
        """Record that ``node`` serves the rotation of ``claim`` (None: no rotation)."""
        before = self._node_surge.pop(node, None)
        if before is not None:
            nodes = self._surge_nodes[before]
            nodes.discard(node)
            if not nodes:
                del self._surge_nodes[before]
        if claim is not None:
            self._node_surge[node] = claim
            self._surge_nodes.setdefault(claim, set()).add(node)

    def surge_nodes(self, claim: str) -> set[str]:
        """The names of the nodes serving the rotation of ``claim`` (no copy: do not change)."""
        return self._surge_nodes.get(claim) or set()

    # --- Karpenter's marks --------------------------------------------------------------------

    def refresh_karpenter(
        self,
        obs: PoolObservation,
        now: datetime,
        known: MemberChanges | None,
        on_node: dict[str, str],
    ) -> frozenset[str]:
        """Bring the disruption taints and the Pods' opt-outs up to ``obs`` at ``now``; return
        the claims (by name, through ``on_node``) whose standing in either changed."""
        disrupted, pod_opted = self.disrupted, self.pod_opted
        if obs.nodes is not self._taint_nodes:
            disrupted = self._refresh_taints(obs.nodes, known, on_node)
        if obs.pods is not self._opt_pods or (
            self._opt_until is not None and now >= self._opt_until
        ):
            pod_opted = self._refresh_pod_opt_outs(obs.pods, now, known, on_node)
        changed = (disrupted ^ self.disrupted) | (pod_opted ^ self.pod_opted)
        self.disrupted, self.pod_opted = disrupted, pod_opted
        return changed

    def _refresh_taints(
        self, nodes: tuple[NodeView, ...], known: MemberChanges | None, on_node: dict[str, str]
    ) -> frozenset[str]:
        handed = None if known is None else (known.nodes_added, known.nodes_gone)
        added, gone = added_and_gone(self._taint_nodes, nodes, handed)
        self._taint_nodes = nodes
        tainted = self._tainted
        tainted.difference_update(n.name for n in gone)
        tainted.update(n.name for n in added if node_disrupted(n))
        return frozenset(on_node[n] for n in tainted if n in on_node)

    def _refresh_pod_opt_outs(
        self,
        pods: tuple[PodView, ...],
        now: datetime,
        known: MemberChanges | None,
        on_node: dict[str, str],
    ) -> frozenset[str]:
        if pods is not self._opt_pods:
            handed = None if known is None else (known.pods_added, known.pods_gone)
            added, gone = added_and_gone(self._opt_pods, pods, handed)
            self._opt_pods = pods
            annotated = self._annotated
            for pod in gone:
                annotated.pop(id(pod), None)
            for pod in added:
                if ann.KARPENTER_DO_NOT_DISRUPT in pod.annotations:
                    annotated[id(pod)] = pod
        annotated_pods = self._annotated.values()
        self._opt_until = opt_out_expiry(annotated_pods, now)
        blocked = {
            p.node_name for p in annotated_pods if p.node_name and pod_opt_out_active(p, now)
        }
        return frozenset(on_node[n] for n in blocked if n in on_node)

    def opt_out_expiry(self, now: datetime) -> datetime | None:
        """``opt_out_expiry`` over the observed Pods at ``now`` (only annotated ones count)."""
        return opt_out_expiry(self._annotated.values(), now)
