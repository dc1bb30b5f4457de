"""The census kept across passes: each claim classified once per change, not once per pass.

A controller that looks at a 1,000-claim pool every few seconds would otherwise classify every
claim on every pass, though almost none changed. ``CensusCache`` remembers, per claim, the
observed value it classified (an observation value is rebuilt only when its object changed, so
identity is its version), the bucket it fell in, and the next instant at which time alone can
move it (its age threshold, its backoff end); a queue of those instants brings a claim back for
reclassification exactly then. Everything it answers is what a from-scratch pass computes from
the same observation (``Pass`` without a cache); it holds nothing the cluster does not show, so
a restarted controller simply starts with an empty one and rebuilds it from its first
observation.

Two inputs are not the claim's own value: Karpenter's disruption taint on the claim's Node, and
an active ``karpenter.sh/do-not-disrupt`` on a Pod bound there (which can run out by time alone).
Both are recomputed only when the nodes or the Pods were observed anew, or an opt-out's end came
due, and a claim whose standing in either changed is reclassified.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import compress
from operator import attrgetter, is_not, not_
from typing import Any

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
    REFERENCE_CLAIM_STATE,
    REFERENCE_CORDONED,
    REFERENCE_DO_NOT_DISRUPT_OWNED,
    REFERENCE_IN_FLIGHT_STATES,
    REFERENCE_SURGE_FOR,
)
from fleetgate.domain.rotation.selection import (
    Bucket,
    Census,
    ClaimView,
    DriftRule,
    SelectionRules,
    classify,
    drift_rule,
    is_opted_out,
    is_short_lead,
    lead_time_for,
    order_key,
    retry_backoff,
)

_TICK = timedelta(microseconds=1)  # "strictly after": the first instant a strict test flips
_REFERENCE_NODE_KEYS = (REFERENCE_DO_NOT_DISRUPT_OWNED, REFERENCE_CORDONED, REFERENCE_SURGE_FOR)


def trigger_instant(claim: ClaimView, rules: SelectionRules) -> datetime | None:
    """The first instant at which ``is_triggered`` holds for ``claim`` (None: never)."""
    if rules.override is not None:
        return claim.created_at + rules.override + _TICK
    if claim.expire_after is None:
        return None
    lead = lead_time_for(rules.lead_time_base, claim.tgp)
    return claim.created_at + claim.expire_after - lead + _TICK


def eligibility_instant(claim: ClaimView, rules: SelectionRules) -> datetime | None:
    """The instant from which ``claim`` is eligible by time alone (age threshold passed and any
    retry backoff over), ignoring readiness, state and opt-out; None when age never triggers."""
    trigger = trigger_instant(claim, rules)
    if trigger is None:
        return None
    if claim.state == ann.ClaimState.FAILED:
        failed_at = ann.read_timestamp(claim.annotations, ann.FAILED_AT)
        count = ann.parse_retry_count(claim.annotations.get(ann.RETRY_COUNT))
        if failed_at is not None:
            trigger = max(trigger, failed_at + retry_backoff(rules.retry_backoff, count))
    return trigger


def may_become_eligible(claim: ClaimView, opted: bool) -> bool:
    """Whether only time stands between ``claim`` and eligibility (its state lets it rotate)."""
    if claim.deleting or not claim.ready or opted:
        return False
    return claim.state in ("", ann.ClaimState.FAILED)


def _reclassify_at(claim: ClaimView, bucket: Bucket, rules: SelectionRules) -> datetime | None:
    """When time alone can next move ``claim`` out of ``bucket`` (None: only a change can)."""
    if bucket is Bucket.NOT_TRIGGERED or bucket is Bucket.IN_BACKOFF:
        return eligibility_instant(claim, rules)
    if bucket is Bucket.DRIFTED:  # Karpenter's only until it falls due
        return trigger_instant(claim, rules)
    return None


def _diff(
    previous: Sequence[Any] | None, current: Sequence[Any]
) -> tuple[list[Any], list[Any], bool]:
    """The values of ``current`` that are new since ``previous`` and those that left, compared
    by identity in C, and whether any object joined, left or moved (not only rebuilt)."""
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


_name = attrgetter("name")
_FEW = 16


@dataclass
class _Entry:
    view: NodeClaimView
    claim: ClaimView
    bucket: Bucket
    opted: bool
    short: bool
    retry: int
    eligible_at: datetime | None
    """``eligibility_instant`` when ``may_become_eligible``, else None."""
    token: int
    """Bumped per reclassification: queue items carrying an older token are stale."""


class CensusCache:
    """One pool's census across passes (see the module docstring). Not thread-safe."""

    def __init__(self) -> None:
        self._rules: tuple[SelectionRules, timedelta] | None = None
        self._now: datetime | None = None
        self._claims: tuple[NodeClaimView, ...] | None = None
        self._nodes: tuple[NodeView, ...] | None = None
        self._entries: dict[str, _Entry] = {}
        self._position: dict[str, int] = {}
        self._node_marks: dict[str, bool] = {}
        self._on_node: dict[str, str] = {}  # node name -> the claim bound to it
        self._counts: Counter[Bucket] = Counter()
        self._retries: Counter[int] = Counter()
        self._short: set[str] = set()
        self._drifted_due: set[str] = set()
        self._tokens = 0
        # Heaps with lazy deletion: (instant, name, token) and (order key, name, token).
        self._changes: list[tuple[datetime, str, int]] = []
        self._eligible: list[tuple[tuple[int, datetime, datetime, str], str, int]] = []
        self._arrivals: list[tuple[datetime, str, int]] = []
        self._triggers: list[tuple[datetime, str, int]] = []
        self._triggered: set[str] = set()
        # Karpenter's marks: claims on tainted nodes, claims under an active Pod opt-out. The
        # tainted nodes and the Pods carrying the annotation are kept from the changed objects
        # alone: a walk over every node or Pod per pass is most of a pass in a large pool.
        self._taint_nodes: tuple[NodeView, ...] | None = None
        self._tainted: set[str] = set()
        self._opt_pods: tuple[PodView, ...] | None = None
        # The serial of the observation last taken in: an observation carrying the member
        # changes since that one is taken in from them alone.
        self._serial: int | None = None
        # Claims and nodes carrying one of the reference controller's in-flight markers: the
        # start gate walks the pool for them only when some exist.
        self._reference_claims: set[str] = set()
        self._reference_nodes: set[str] = set()
        # Claims not bound to a node yet, and the nodes serving a rotation (surge-for value ->
        # node names), so a pass finds the surge's claim and nodes without walking the pool.
        self._unbound: set[str] = set()
        self._node_surge: dict[str, str] = {}
        self._surge_nodes: dict[str, set[str]] = {}
        self._observed: PoolObservation | None = None
        self._known: MemberChanges | None = None
        self._positions_stale = False
        self._annotated: dict[int, PodView] = {}
        self._opt_until: datetime | None = None
        self._disrupted: frozenset[str] = frozenset()
        self._pod_opted: frozenset[str] = frozenset()
        self.reclassified = 0
        """How many claim classifications the cache has made (for tests and benchmarks)."""

    # --- keeping up with the pool ------------------------------------------------------------

    def refresh(
        self, obs: PoolObservation, rules: SelectionRules, lead_time_base: timedelta, now: datetime
    ) -> None:
        """Bring the census to ``obs`` at ``now``: reclassify what changed or fell due."""
        key = (rules, lead_time_base)
        if key != self._rules or (self._now is not None and now < self._now):
            self._reset(key)
        self._now = now
        changes = obs.changes
        known = self._serial is not None and changes is not None and changes.since == self._serial
        self._known = changes if known else None
        self._serial = obs.serial
        self._observed = obs
        marks_changed: set[str] = set()
        if obs.nodes is not self._nodes:
            marks_changed = self._refresh_nodes(obs.nodes)
        if obs.claims is not self._claims:
            self._refresh_claims(obs.claims, rules, lead_time_base, now, marks_changed)
        else:
            for node in marks_changed:
                self._remark(node, rules, lead_time_base, now)
        self._refresh_marks(obs, rules, lead_time_base, now)
        triggers = self._triggers
        while triggers and triggers[0][0] <= now:
            item = heapq.heappop(triggers)
            if self._live(item):
                self._triggered.add(item[1])
        due = self._changes
        while due and due[0][0] <= now:
            _, name, token = heapq.heappop(due)
            entry = self._entries.get(name)
            if entry is not None and entry.token == token:
                self._classify(entry.view, entry.opted, rules, lead_time_base, now)

    def _refresh_marks(
        self, obs: PoolObservation, rules: SelectionRules, lead: timedelta, now: datetime
    ) -> None:
        """Bring Karpenter's disruption taints and the Pods' opt-outs up to ``obs`` at ``now``."""
        disrupted, pod_opted = self._disrupted, self._pod_opted
        if obs.nodes is not self._taint_nodes:
            known = self._known
            if known is not None:
                added, gone = list(known.nodes_added), list(known.nodes_gone)
            else:
                added, gone, _ = _diff(self._taint_nodes, obs.nodes)
            self._taint_nodes = obs.nodes
            tainted = self._tainted
            tainted.difference_update(n.name for n in gone)
            tainted.update(n.name for n in added if node_disrupted(n))
            on_node = self._on_node
            disrupted = frozenset(on_node[n] for n in tainted if n in on_node)
        if obs.pods is not self._opt_pods or (
            self._opt_until is not None and now >= self._opt_until
        ):
            if obs.pods is not self._opt_pods:
                if self._known is not None:
                    added_pods, gone_pods = (
                        list(self._known.pods_added),
                        list(self._known.pods_gone),
                    )
                else:
                    added_pods, gone_pods, _ = _diff(self._opt_pods, obs.pods)
                self._opt_pods = obs.pods
                annotated = self._annotated
                for pod in gone_pods:
                    annotated.pop(id(pod), None)
                for pod in added_pods:
                    if ann.KARPENTER_DO_NOT_DISRUPT in pod.annotations:
                        annotated[id(pod)] = pod
            pods = self._annotated.values()
            self._opt_until = opt_out_expiry(pods, now)
            blocked = {p.node_name for p in pods if p.node_name and pod_opt_out_active(p, now)}
            pod_opted = frozenset(self._on_node[n] for n in blocked if n in self._on_node)
        changed = (disrupted ^ self._disrupted) | (pod_opted ^ self._pod_opted)
        self._disrupted, self._pod_opted = disrupted, pod_opted
        for name in changed:
            entry = self._entries.get(name)
            if entry is not None:
                self._classify(entry.view, self._opted(entry.view), rules, lead, now)

    def _reset(self, key: tuple[SelectionRules, timedelta]) -> None:
        self.__init__()  # type: ignore[misc]
        self._rules = key

    def _refresh_nodes(self, nodes: tuple[NodeView, ...]) -> set[str]:
        """Track each node's opt-out mark; return the nodes whose mark changed."""
        previous, self._nodes = self._nodes, nodes
        known = self._known
        if known is not None:
            added, gone = list(known.nodes_added), list(known.nodes_gone)
        else:
            added, gone, _ = _diff(previous, nodes)
        marks = self._node_marks
        changed: set[str] = set()
        present = {n.name for n in added}
        referenced = self._reference_nodes
        for node in gone:
            referenced.discard(node.name)
            self._serving(node.name, None)
            if node.name not in present and marks.pop(node.name, False):
                changed.add(node.name)
        for node in added:
            self._serving(node.name, node.annotations.get(ann.SURGE_FOR))
            if any(key in node.annotations for key in _REFERENCE_NODE_KEYS):
                referenced.add(node.name)
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

    def _remark(self, node: str, rules: SelectionRules, lead: timedelta, now: datetime) -> None:
        """Reclassify the claim on ``node``, whose opt-out mark changed."""
        name = self._on_node.get(node)
        entry = self._entries.get(name) if name is not None else None
        if entry is not None and entry.view.node_name == node:
            self._classify(entry.view, self._opted(entry.view), rules, lead, now)

    def _opted(self, view: NodeClaimView) -> bool:
        if view.name in self._pod_opted:
            return True
        return view.node_name is not None and self._node_marks.get(view.node_name, False)

    def _refresh_claims(
        self,
        claims: tuple[NodeClaimView, ...],
        rules: SelectionRules,
        lead: timedelta,
        now: datetime,
        marks_changed: set[str],
    ) -> None:
        entries = self._entries
        previous, self._claims = self._claims, claims
        known = self._known
        if known is not None:
            # Handed over by the gateway: a claim joining or leaving is the only move, and the
            # positions are rebuilt when next asked for.
            added, gone = list(known.claims_added), list(known.claims_gone)
            if {c.name for c in added} != {c.name for c in gone}:
                self._positions_stale = True
        else:
            # Values are rebuilt only for claims that changed: compare by identity, in C.
            added, gone, moved = _diff(previous, claims)
            if moved:
                self._positions()
        for view in gone:
            entry = entries.get(view.name)
            if entry is not None and entry.view is view:
                self._drop(entries.pop(view.name))
        for view in added:
            self._classify(view, self._opted(view), rules, lead, now)
        for node in marks_changed:
            self._remark(node, rules, lead, now)

    def _positions(self) -> dict[str, int]:
        """Each observed claim's place in observation order (rebuilt after a move)."""
        claims = self._claims or ()
        names = list(map(_name, claims))
        self._position = dict(zip(names, range(len(names)), strict=True))
        self._positions_stale = False
        if len(self._position) != len(claims):
            raise ValueError("claims: two observed NodeClaims share a name")
        return self._position

    def _ordered(self, names: set[str]) -> list[str]:
        if not names:
            return []
        position = self._positions() if self._positions_stale else self._position
        return sorted(names, key=position.__getitem__)

    def _drop(self, entry: _Entry) -> None:
        node = entry.view.node_name
        if node is not None and self._on_node.get(node) == entry.view.name:
            del self._on_node[node]
        self._counts[entry.bucket] -= 1
        self._retries[entry.retry] -= 1
        self._short.discard(entry.view.name)
        self._drifted_due.discard(entry.view.name)
        self._triggered.discard(entry.view.name)
        self._reference_claims.discard(entry.view.name)
        self._unbound.discard(entry.view.name)

    def _classify(
        self,
        view: NodeClaimView,
        opted: bool,
        rules: SelectionRules,
        lead: timedelta,
        now: datetime,
    ) -> None:
        old = self._entries.get(view.name)
        if old is not None:
            self._drop(old)
        claim = view.selection_view
        if view.name in self._disrupted:  # its Node carries Karpenter's disruption taint
            claim = replace(claim, node_disrupted=True)
        bucket = classify(claim, now, rules, frozenset((claim.name,)) if opted else frozenset())
        self._tokens += 1
        token = self._tokens
        retry = (
            ann.parse_retry_count(view.annotations[ann.RETRY_COUNT])
            if ann.RETRY_COUNT in view.annotations
            else 0
        )
        eligible_at = (
            eligibility_instant(claim, rules) if may_become_eligible(claim, opted) else None
        )
        entry = _Entry(
            view, claim, bucket, opted, is_short_lead(claim, lead), retry, eligible_at, token
        )
        self._entries[view.name] = entry
        if view.node_name is not None:
            self._on_node[view.node_name] = view.name
        self.reclassified += 1
        self._counts[bucket] += 1
        self._retries[retry] += 1
        if entry.short:
            self._short.add(view.name)
        if claim.drifted and drift_rule(claim, bucket, rules) is DriftRule.DUE:
            self._drifted_due.add(view.name)
        if view.annotations.get(REFERENCE_CLAIM_STATE) in REFERENCE_IN_FLIGHT_STATES:
            self._reference_claims.add(view.name)
        if view.node_name is None:
            self._unbound.add(view.name)
        at = _reclassify_at(claim, bucket, rules)
        if at is not None:
            heapq.heappush(self._changes, (at, view.name, token))
        if bucket is Bucket.ELIGIBLE:
            heapq.heappush(self._eligible, (order_key(claim, rules), view.name, token))
        if eligible_at is not None and eligible_at > now:
            heapq.heappush(self._arrivals, (eligible_at, view.name, token))
        triggered_at = trigger_instant(claim, rules)
        if triggered_at is not None:
            if triggered_at <= now:
                self._triggered.add(view.name)
            else:
                heapq.heappush(self._triggers, (triggered_at, view.name, token))

    def _live(self, item: tuple[object, str, int]) -> bool:
        entry = self._entries.get(item[1])
        return entry is not None and entry.token == item[2]

    # --- what a pass asks --------------------------------------------------------------------

    @property
    def census(self) -> Census:
        """How many claims fall in each bucket now (as ``take_census``)."""
        return Census(+self._counts, len(self._drifted_due))

    @property
    def buckets(self) -> Mapping[str, Bucket]:
        """Each claim's bucket now, by name."""
        return {name: e.bucket for name, e in self._entries.items()}

    def candidate(self) -> ClaimView | None:
        """The claim ``pick`` would choose now: the first eligible one in selection order."""
        heap = self._eligible
        while heap and not (self._live(heap[0]) and self._entry(heap[0]).bucket is Bucket.ELIGIBLE):
            heapq.heappop(heap)
        return self._entry(heap[0]).claim if heap else None

    def _entry(self, item: tuple[object, str, int]) -> _Entry:
        return self._entries[item[1]]

    def short_lead(self) -> tuple[str, ...]:
        """The claims whose whole life is within their lead time, in observation order."""
        return tuple(self._ordered(self._short))

    def due_hosts(self) -> list[str]:
        """The nodes of the claims old enough to rotate (``is_triggered``), in no particular
        order: the placeholder keeps them as a set, and ordering them would cost the claims'
        places in the observation, rebuilt after every join or leave."""
        hosts = (self._entries[name].view.node_name for name in self._triggered)
        return [host for host in hosts if host]

    @property
    def reference_marked(self) -> bool:
        """Whether some claim or node carries a reference controller's in-flight marker."""
        return bool(self._reference_claims or self._reference_nodes)

    def unbound_claims(self) -> list[NodeClaimView]:
        """The claims bound to no node yet (in no particular order)."""
        return [self._entries[name].view for name in self._unbound]

    def surge_hosts(self, claim: str, obs: PoolObservation) -> list[NodeView] | None:
        """The nodes of ``obs`` serving the rotation of ``claim``, in observation order; None
        when only a walk can tell (``obs`` is not the one the census was brought to, or
        several nodes serve it and their order is the observation's)."""
        if obs is not self._observed:
            return None
        names = self._surge_nodes.get(claim)
        if not names:
            return []
        if len(names) > 1:
            return None
        node = obs.node(next(iter(names)))
        return [node] if node is not None else None

    def retry_count(self) -> int:
        """The highest retry count of any claim (0 when none has one)."""
        return max((n for n, k in self._retries.items() if k > 0), default=0)

    def opt_out_expiry(self, now: datetime) -> datetime | None:
        """``opt_out_expiry`` over the observed Pods at ``now`` (only annotated ones count)."""
        return opt_out_expiry(self._annotated.values(), now)

    def next_eligibility(self, now: datetime) -> datetime | None:
        """The first instant after ``now`` at which some claim could become eligible by time."""
        heap = self._arrivals
        while heap and (heap[0][0] <= now or not self._live(heap[0])):
            heapq.heappop(heap)
        return heap[0][0] if heap else None
