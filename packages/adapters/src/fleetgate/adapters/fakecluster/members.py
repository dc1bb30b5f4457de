"""One pool's members as the fake cluster hands them to an observation: kept by change.

An informer cache does not re-list a fleet on every read; it applies the changes it is told of.
``PoolMembers`` does the same for the fake cluster: it is given the records that changed
(``Revisions.dirty``: written, attached or removed) and moves only those into, out of or within
its four sorted lists (claims and nodes by name, Pods and placeholders by namespace/name), with
the observed value of each member beside it. Reading a pool then costs a copy of the lists
(``tuple`` over a list, in C) instead of a sort and a rebuild of every value.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from fleetgate.adapters.fakecluster.model import Claim, Node, Pod, is_placeholder
from fleetgate.adapters.fakecluster.state import ClusterState
from fleetgate.domain.rotation.cluster import MemberChanges


class _Sorted:
    """Members by key, kept sorted, each with its observed value."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.records: list[Any] = []
        self.views: list[Any] = []
        # Per key touched since the last ``take``, the value it showed then (None: absent).
        self.touched: dict[Any, Any] = {}
        self._shown: tuple[Any, ...] | None = None  # ``views`` as last handed out

    def shown(self) -> tuple[Any, ...]:
        """The values shown, in key order: the same tuple while none of them changed (so a
        reader may take an identical tuple for unchanged members, and no pass copies a
        fleet-sized list that did not change)."""
        if self._shown is None:
            self._shown = tuple(self.views)
        return self._shown

    def put(self, key: Any, record: Any) -> None:
        """Add or refresh ``record`` under ``key``."""
        i = bisect.bisect_left(self.keys, key)
        view = record.view()
        if i < len(self.keys) and self.keys[i] == key:
            self.touched.setdefault(key, self.views[i])
            self.records[i] = record
            if self.views[i] is not view:
                self.views[i] = view
                self._shown = None
        else:
            self.touched.setdefault(key, None)
            self.keys.insert(i, key)
            self.records.insert(i, record)
            self.views.insert(i, view)
            self._shown = None

    def drop(self, key: Any) -> Any:
        """Remove the member under ``key``; return it (None when absent)."""
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            self.touched.setdefault(key, self.views[i])
            del self.keys[i], self.views[i]
            self._shown = None
            return self.records.pop(i)
        return None

    def view(self, key: Any) -> Any:
        """The value shown under ``key``, or None."""
        i = bisect.bisect_left(self.keys, key)
        return self.views[i] if i < len(self.keys) and self.keys[i] == key else None

    def take(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The values shown now that were not at the last call, and those shown then but no
        longer: per key touched in between, its value then against its value now."""
        touched, self.touched = self.touched, {}
        added, gone = [], []
        for key, then in touched.items():
            now = self.view(key)
            if now is not then:
                if then is not None:
                    gone.append(then)
                if now is not None:
                    added.append(now)
        return tuple(added), tuple(gone)

    def get(self, key: Any) -> Any:
        """The member under ``key``, or None."""
        i = bisect.bisect_left(self.keys, key)
        return self.records[i] if i < len(self.keys) and self.keys[i] == key else None


class PoolMembers:
    """One pool's claims, nodes, workload Pods on its nodes, placeholders, and resources."""

    def __init__(self, state: ClusterState, pool: str) -> None:
        self.pool = pool
        self.claims = _Sorted()
        self.nodes = _Sorted()
        self.pods = _Sorted()
        self.placeholders = _Sorted()
        self.resources: dict[str, int] = {}
        self.pending: dict[int, Any] = {}
        """Records changed since this pool last applied changes (the observations fill it)."""
        self.shown_in: int | None = None
        """The serial of the observation the member lists were last shown in."""
        for claim in state.claims.values():
            self._claim(state, claim)
        for pod in state.pods.values():
            self._pod(state, pod)

    def apply(self, state: ClusterState) -> None:
        """Take in every record that changed since the last call."""
        changed, self.pending = self.pending, {}
        for record in changed.values():
            if isinstance(record, Claim):
                self._claim(state, record)
            elif isinstance(record, Node):
                self._node(state, record)
            elif isinstance(record, Pod):
                self._pod(state, record)

    def shown(self) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
        """The member values: claims, nodes, Pods, placeholders."""
        return (
            self.claims.shown(),
            self.nodes.shown(),
            self.pods.shown(),
            self.placeholders.shown(),
        )

    def changes(self, since: int) -> MemberChanges:
        """What the claims, nodes and Pods shown now changed since the last call (whose
        observation was numbered ``since``)."""
        claims_added, claims_gone = self.claims.take()
        nodes_added, nodes_gone = self.nodes.take()
        pods_added, pods_gone = self.pods.take()
        return MemberChanges(
            since, claims_added, claims_gone, nodes_added, nodes_gone, pods_added, pods_gone
        )

    def forget_changes(self) -> None:
        """Start counting changes from what is shown now."""
        for kept in (self.claims, self.nodes, self.pods, self.placeholders):
            kept.take()

    def _claim(self, state: ClusterState, claim: Claim) -> None:
        member = state.claims.get(claim.name) is claim and claim.pool == self.pool
        held = self.claims.get(claim.name)
        if held is not None and held is not claim:
            self._leave_claim(state, held)
            held = None
        if not member:
            if held is not None:
                self._leave_claim(state, claim)
            return
        if held is None:
            _add(self.resources, claim.allocatable, 1)
        self.claims.put(claim.name, claim)
        self._node_of(state, claim)

    def _leave_claim(self, state: ClusterState, claim: Claim) -> None:
        self.claims.drop(claim.name)
        _add(self.resources, claim.allocatable, -1)
        node = self.nodes.drop(claim.name)
        if node is not None:
            self._repod(state, node.name)

    def _node_of(self, state: ClusterState, claim: Claim) -> None:
        node = claim.node
        held = self.nodes.get(claim.name)
        if node is None:
            if held is not None:
                self.nodes.drop(claim.name)
                self._repod(state, held.name)
            return
        self.nodes.put(claim.name, node)
        if held is not node:
            self._repod(state, node.name)

    def _node(self, state: ClusterState, node: Node) -> None:
        if self.nodes.get(node.name) is node:
            self.nodes.put(node.name, node)

    def _repod(self, state: ClusterState, node: str) -> None:
        """A node joined or left the pool: its Pods follow it."""
        for pod in _bound_to(state, node):
            self._pod(state, pod)

    def _pod(self, state: ClusterState, pod: Pod) -> None:
        present = state.pods.get(pod.key) is pod
        if is_placeholder(pod):
            if present and pod.pool == self.pool:
                self.placeholders.put(pod.key, pod)
            elif self.placeholders.get(pod.key) is pod:
                self.placeholders.drop(pod.key)
            return
        on_pool = present and pod.node_name is not None and self.nodes.get(pod.node_name)
        if on_pool:
            self.pods.put(pod.key, pod)
        elif self.pods.get(pod.key) is pod:
            self.pods.drop(pod.key)


def _bound_to(state: ClusterState, node: str) -> Iterable[Pod]:
    return list(state.pods.bound.get(node, {}).values())


def _add(total: dict[str, int], amounts: dict[str, int], sign: int) -> None:
    for name, value in amounts.items():
        total[name] = total.get(name, 0) + sign * value
