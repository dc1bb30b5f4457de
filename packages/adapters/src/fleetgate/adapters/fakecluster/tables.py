"""The fake cluster's record tables, each indexed the way the fake Karpenter asks of it.

The cluster's Pods live in a ``PodTable``: besides the Pods by key it keeps which Pods are bound
to which node, each node's free capacity (sorted per resource), the Pending Pods, and the nodes
hosting Pods of each priority. It is told of every change (a Pod joining or leaving the table,
a Pod's ``node_name`` moving, a node launched or removed), so a search for a node with room
looks only at nodes with room, not at the whole fleet.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fleetgate.adapters.fakecluster.model import Node, Pod

if TYPE_CHECKING:
    from fleetgate.adapters.fakecluster.lifecycle import KarpenterLifecycle as FakeCluster


class PodTable(dict[tuple[str, str], Pod]):
    """The cluster's Pods by (namespace, name), indexed by placement (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self.bound: dict[str, dict[tuple[str, str], Pod]] = {}
        self.pending: dict[tuple[str, str], Pod] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._hosts: dict[int, dict[str, int]] = {}  # priority -> node -> how many such Pods
        self._nodes: dict[str, Node] = {}
        self._free: dict[str, list[tuple[int, str]]] = {}  # resource -> sorted (free, node)

    # --- keeping current ---------------------------------------------------------------------

    def __setitem__(self, key: tuple[str, str], pod: Pod) -> None:
        old = self.get(key)
        if old is not None:
            self._leave(old, old.node_name)
        super().__setitem__(key, pod)
        self._join(pod, pod.node_name)

    def __delitem__(self, key: tuple[str, str]) -> None:
        pod = self[key]
        super().__delitem__(key)
        self._leave(pod, pod.node_name)

    def moved(self, pod: Pod, old: str | None, new: str | None) -> None:
        """``Revisions.on_move``: a Pod's ``node_name`` changed."""
        if self.get(pod.key) is not pod:
            return  # not (or no longer) one of the cluster's Pods
        self._leave(pod, old)
        self._join(pod, new)

    def _join(self, pod: Pod, node: str | None) -> None:
        if node is None:
            self.pending[pod.key] = pod
            return
        self.bound.setdefault(node, {})[pod.key] = pod
        hosts = self._hosts.setdefault(pod.priority, {})
        hosts[node] = hosts.get(node, 0) + 1
        self._charge(node, pod.requests, 1)

    def _leave(self, pod: Pod, node: str | None) -> None:
        if node is None:
            self.pending.pop(pod.key, None)
            return
        on = self.bound.get(node)
        if on is None or on.pop(pod.key, None) is None:
            return
        if not on:
            del self.bound[node]
        hosts = self._hosts[pod.priority]
        hosts[node] -= 1
        if not hosts[node]:
            del hosts[node]
        self._charge(node, pod.requests, -1)

    def _charge(self, node: str, requests: dict[str, int], sign: int) -> None:
        tracked = self._nodes.get(node)
        if tracked is not None:
            for resource in self._free:
                self._unfile(resource, tracked)
        used = self._used.setdefault(node, {})
        for name, value in requests.items():
            used[name] = used.get(name, 0) + sign * value
        if tracked is not None:
            for resource in self._free:
                self._file(resource, tracked)

    def _file(self, resource: str, node: Node) -> None:
        bisect.insort(self._free[resource], (self._free_of(node, resource), node.name))

    def _unfile(self, resource: str, node: Node) -> None:
        entries = self._free[resource]
        item = (self._free_of(node, resource), node.name)
        i = bisect.bisect_left(entries, item)
        if i < len(entries) and entries[i] == item:
            del entries[i]

    def _free_of(self, node: Node, resource: str) -> int:
        return node.allocatable.get(resource, 0) - self._used.get(node.name, {}).get(resource, 0)

    def add_node(self, node: Node) -> None:
        """A claim launched ``node``."""
        self._nodes[node.name] = node
        for resource in self._free:
            self._file(resource, node)

    def drop_node(self, name: str) -> None:
        """The claim of node ``name`` was removed."""
        node = self._nodes.pop(name, None)
        if node is not None:
            for resource in self._free:
                self._unfile(resource, node)

    # --- what the scheduler asks -------------------------------------------------------------

    def used_on(self, node: str) -> dict[str, int]:
        """The summed requests of the Pods bound to ``node``."""
        return self._used.get(node, {})

    def roomy(self, cluster: FakeCluster, requests: dict[str, int]) -> Iterable[Node]:
        """Launched nodes with room for ``requests`` (a superset when nothing is requested)."""
        wanted = [(name, want) for name, want in requests.items() if want > 0]
        if not wanted:
            return list(self._nodes.values())
        resource, want = max(wanted)
        if resource not in self._free:
            self._free[resource] = sorted(
                (self._free_of(n, resource), n.name) for n in self._nodes.values()
            )
        entries = self._free[resource]
        start = bisect.bisect_left(entries, (want, ""))
        nodes = self._nodes
        return [
            nodes[name]
            for _, name in entries[start:]
            if all(w <= self._free_of(nodes[name], r) for r, w in wanted)
        ]

    def hosts_below(self, cluster: FakeCluster, priority: int) -> Iterable[Node]:
        """Launched nodes hosting at least one Pod of a priority below ``priority``."""
        names: set[str] = set()
        for level, hosts in self._hosts.items():
            if level < priority:
                names.update(hosts)
        return [self._nodes[n] for n in names if n in self._nodes]
