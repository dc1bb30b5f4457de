"""The fake cluster's record tables, each indexed the way the fake Karpenter asks of it.

A table is a dict told of every change that can move a record between its indexes: a record
joining or leaving (``__setitem__`` / ``__delitem__``) and a write to an attribute an index
depends on (``Revisions.on_pod`` / ``on_claim``, called by the records' ``__setattr__``, so no
code that writes a record can forget an index). A question asked on every event then costs what
its answer holds, not a walk of the fleet. (Use item assignment and ``del``: ``pop``, ``update``
and the like would bypass the hooks.)

* ``PodTable``: the Pods by key; which are bound to which node, each node's free capacity
  (sorted per resource), the nodes hosting Pods of each priority, the Pending Pods (also by
  pool), the Pods nominated to each claim, and the placeholders of each pool.
* ``ClaimTable``: the NodeClaims by name; each pool's claims, and those still launching.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from typing import Any

from fleetgate.adapters.fakecluster.model import Claim, Node, Pod

Key = tuple[str, str]
Filing = tuple[str | None, int, str | None, str | None, str | None]
"""What a Pod is indexed by: (node_name, priority, pool, nominated_claim, owner_kind)."""

_SLOT = {"node_name": 0, "priority": 1, "pool": 2, "nominated_claim": 3, "owner_kind": 4}
"""Where each attribute ``Pod.__setattr__`` reports sits in a ``Filing``."""


class PodTable(dict[Key, Pod]):
    """The cluster's Pods by (namespace, name), indexed by placement (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self.bound: dict[str, dict[Key, Pod]] = {}
        self.pending: dict[Key, Pod] = {}
        self.pending_in: dict[str | None, dict[Key, Pod]] = {}
        """Pending Pods by their pool affinity (a pool with none is absent)."""
        self.nominated: dict[str, dict[Key, Pod]] = {}
        """Pods by the claim Karpenter nominated them to (a claim with none is absent)."""
        self.placeholders: dict[str | None, dict[Key, Pod]] = {}
        """Placeholder Pods, bound or not, by their pool (a pool with none is absent)."""
        self._position: dict[Key, int] = {}  # key -> its place in the dict's own order
        self._positions = itertools.count()
        self._used: dict[str, dict[str, int]] = {}
        self._hosts: dict[int, dict[str, int]] = {}  # priority -> node -> how many such Pods
        self._nodes: dict[str, Node] = {}
        self._free: dict[str, list[tuple[int, str]]] = {}  # resource -> sorted (free, node)

    # --- keeping current ---------------------------------------------------------------------

    def __setitem__(self, key: Key, pod: Pod) -> None:
        old = self.get(key)
        if old is not None:
            self._leave(old, _filing(old))
        else:
            self._position[key] = next(self._positions)  # a replaced key keeps its place
        super().__setitem__(key, pod)
        self._join(pod, _filing(pod))

    def __delitem__(self, key: Key) -> None:
        pod = self[key]
        super().__delitem__(key)
        del self._position[key]
        self._leave(pod, _filing(pod))

    def changed(self, pod: Pod, name: str, old: Any) -> None:
        """``Revisions.on_pod``: the Pod's attribute ``name`` changed from ``old``."""
        if self.get(pod.key) is not pod:
            return  # not (or no longer) one of the cluster's Pods
        now = _filing(pod)
        if name == "nominated_claim":  # the hot case: only one index depends on it
            _discard(self.nominated, old, pod.key)
            if now[3] is not None:
                self.nominated.setdefault(now[3], {})[pod.key] = pod
            return
        then = list(now)
        then[_SLOT[name]] = old
        self._leave(pod, tuple(then))  # type: ignore[arg-type]
        self._join(pod, now)

    def _join(self, pod: Pod, filing: Filing) -> None:
        node, priority, pool, nominated, owner_kind = filing
        key = pod.key
        if nominated is not None:
            self.nominated.setdefault(nominated, {})[key] = pod
        if priority < 0 and owner_kind is None:  # ``is_placeholder``, of these values
            self.placeholders.setdefault(pool, {})[key] = pod
        if node is None:
            self.pending[key] = pod
            self.pending_in.setdefault(pool, {})[key] = pod
            return
        self.bound.setdefault(node, {})[key] = pod
        hosts = self._hosts.setdefault(priority, {})
        hosts[node] = hosts.get(node, 0) + 1
        self._charge(node, pod.requests, 1)

    def _leave(self, pod: Pod, filing: Filing) -> None:
        node, priority, pool, nominated, owner_kind = filing
        key = pod.key
        _discard(self.nominated, nominated, key)
        if priority < 0 and owner_kind is None:
            _discard(self.placeholders, pool, key)
        if node is None:
            self.pending.pop(key, None)
            _discard(self.pending_in, pool, key)
            return
        on = self.bound.get(node)
        if on is None or on.pop(key, None) is None:
            return
        if not on:
            del self.bound[node]
        hosts = self._hosts[priority]
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

    def roomy(self, requests: dict[str, int]) -> Iterable[Node]:
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

    def nominated_to(self, claim: str) -> list[Pod]:
        """The Pods nominated to ``claim``, in the table's order."""
        return self.in_order(self.nominated.get(claim, {}).values())

    def placeholders_of(self, pool: str | None) -> list[Pod]:
        """The placeholder Pods of ``pool`` (None: of every pool), in the table's order."""
        if pool is None:
            return self.in_order(
                p for by_key in self.placeholders.values() for p in by_key.values()
            )
        return self.in_order(self.placeholders.get(pool, {}).values())

    def in_order(self, pods: Iterable[Pod]) -> list[Pod]:
        """``pods`` (of this table) in the order iterating the table would meet them."""
        return sorted(pods, key=lambda pod: self._position[pod.key])

    def hosts_below(self, priority: int) -> Iterable[Node]:
        """Launched nodes hosting at least one Pod of a priority below ``priority``."""
        names: set[str] = set()
        for level, hosts in self._hosts.items():
            if level < priority:
                names.update(hosts)
        return [self._nodes[n] for n in names if n in self._nodes]


class ClaimTable(dict[str, Claim]):
    """The cluster's NodeClaims by name, indexed by pool and by whether they are launching."""

    def __init__(self) -> None:
        super().__init__()
        self.of_pool: dict[str, dict[str, Claim]] = {}
        """The claims of each pool (a pool with none is absent)."""
        self.launching: dict[str, dict[str, Claim]] = {}
        """Per pool, its claims still launching: not Ready and not being deleted."""

    def __setitem__(self, name: str, claim: Claim) -> None:
        old = self.get(name)
        if old is not None:
            self._unfile(old, old.pool)
        super().__setitem__(name, claim)
        self._file(claim)

    def __delitem__(self, name: str) -> None:
        claim = self[name]
        super().__delitem__(name)
        self._unfile(claim, claim.pool)

    def changed(self, claim: Claim, name: str, old: Any) -> None:
        """``Revisions.on_claim``: the claim's attribute ``name`` changed from ``old``."""
        if self.get(claim.name) is not claim:
            return  # removed (an archived claim may still be written)
        self._unfile(claim, old if name == "pool" else claim.pool)
        self._file(claim)

    def launching_in(self, pool: str) -> list[Claim]:
        """The pool's claims still launching, by name (a handful: sorting only those)."""
        return sorted(self.launching.get(pool, {}).values(), key=_name)

    def count_in(self, pool: str) -> int:
        """How many claims ``pool`` has."""
        return len(self.of_pool.get(pool, ()))

    def _file(self, claim: Claim) -> None:
        self.of_pool.setdefault(claim.pool, {})[claim.name] = claim
        if not claim.ready and claim.deleting_at is None:
            self.launching.setdefault(claim.pool, {})[claim.name] = claim

    def _unfile(self, claim: Claim, pool: str) -> None:
        _discard(self.of_pool, pool, claim.name)
        _discard(self.launching, pool, claim.name)


def _name(claim: Claim) -> str:
    return claim.name


def _filing(pod: Pod) -> Filing:
    return (pod.node_name, pod.priority, pod.pool, pod.nominated_claim, pod.owner_kind)


def _discard(index: dict[Any, dict[Any, Any]], group: Any, key: Any) -> None:
    """Drop ``key`` from ``index[group]``, and the group once it is empty (an index then holds
    exactly what a walk of the records would find)."""
    members = index.get(group)
    if members is not None and members.pop(key, None) is not None and not members:
        del index[group]
