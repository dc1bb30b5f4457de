"""The census the shell carries from pass to pass: each claim classified once per change.

A controller that looks at a 1,000-claim pool every few seconds would otherwise classify every
claim on every pass, though almost none changed. A :class:`PoolCensus` remembers, per claim, the
observed value it classified (an observation value is rebuilt only when its object changed, so
identity is its version), the bucket it fell in, and the next instant at which time alone can
move it (its age threshold, its backoff end); a queue of those instants brings a claim back for
reclassification exactly then. It is the one answer a pass has to every question about the
pool's claims (``Pass.census``): a step given none starts an empty one, which classifies every
claim of its first observation, so a census carried across passes answers exactly what one
built afresh from the same observation answers. It holds nothing the cluster does not show, so
a restarted controller simply starts with an empty one.

It is a value passed along, not an object the step keeps: ``advanced`` returns the census
brought up to an observation, and the machine's ``step`` hands that one back in
``Step.census`` for the shell to carry to the next pass. Its tables move to the successor
rather than being copied (a copy of every table per pass would cost more than the pass's
incremental work), so the census it was advanced from is spent: asking it anything again
raises, rather than answering from tables that have moved on.

Two inputs are not the claim's own value, Karpenter's disruption taint on the claim's Node and
an active ``karpenter.sh/do-not-disrupt`` on a Pod bound there: ``census_members`` follows them.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from operator import attrgetter

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.census_members import MemberMarks, member_diff
from fleetgate.domain.rotation.cluster import (
    MemberChanges,
    NodeClaimView,
    NodeView,
    PoolObservation,
)
from fleetgate.domain.rotation.reference import REFERENCE_CLAIM_STATE, REFERENCE_IN_FLIGHT_STATES
from fleetgate.domain.rotation.selection import (
    Bucket,
    Census,
    ClaimView,
    DriftRule,
    SelectionRules,
    classify,
    drift_rule,
    eligibility_instant,
    is_short_lead,
    may_become_eligible,
    order_key,
    trigger_instant,
)

__all__ = ["PoolCensus"]

_name = attrgetter("name")


def _reclassify_at(claim: ClaimView, bucket: Bucket, rules: SelectionRules) -> datetime | None:
    """When time alone can next move ``claim`` out of ``bucket`` (None: only a change can)."""
    if bucket is Bucket.NOT_TRIGGERED or bucket is Bucket.IN_BACKOFF:
        return eligibility_instant(claim, rules)
    if bucket is Bucket.DRIFTED:  # Karpenter's only until it falls due
        return trigger_instant(claim, rules)
    return None


@dataclass
class _Entry:
    view: NodeClaimView
    claim: ClaimView
    bucket: Bucket
    opted: bool
    retry: int
    token: int
    """Bumped per reclassification: queue items carrying an older token are stale."""


class _Tally:
    """The tables behind one pool's census under one set of selection rules (owned by exactly
    one live ``PoolCensus`` at a time; see the module docstring)."""

    def __init__(self, rules: SelectionRules, lead: timedelta) -> None:
        self.rules, self.lead = rules, lead
        self.now: datetime | None = None
        self.reclassified = 0
        self.marks = MemberMarks()
        self.claims: tuple[NodeClaimView, ...] | None = None
        self.entries: dict[str, _Entry] = {}
        self._position: dict[str, int] = {}
        self._positions_stale = False
        self.on_node: dict[str, str] = {}  # node name -> the claim bound to it
        self.counts: Counter[Bucket] = Counter()
        self.retries: Counter[int] = Counter()
        self.short: set[str] = set()
        self.drifted_due: set[str] = set()
        self.triggered: set[str] = set()
        # The nodes of the triggered claims, sorted (each once), and how many triggered claims
        # each hosts: every start's placeholder avoids them all, so a start reads them as they
        # are instead of looking up the node of every triggered claim and sorting the lot.
        self.due_hosts: list[str] = []
        self._due_count: dict[str, int] = {}
        # Claims carrying one of the reference controller's in-flight markers, and claims not
        # bound to a node yet: a pass asks for either without walking the pool.
        self.reference_claims: set[str] = set()
        self.unbound: set[str] = set()
        self._tokens = 0
        # Heaps with lazy deletion: (instant, name, token) and (order key, name, token).
        self._changes: list[tuple[datetime, str, int]] = []
        self.eligible: list[tuple[tuple[int, datetime, datetime, str], str, int]] = []
        self.arrivals: list[tuple[datetime, str, int]] = []
        self._triggers: list[tuple[datetime, str, int]] = []
        # The serial of the observation last taken in: an observation carrying the member
        # changes since that one is taken in from them alone.
        self._serial: int | None = None
        self.observed: PoolObservation | None = None

    def fits(self, rules: SelectionRules, lead: timedelta, now: datetime) -> bool:
        """Whether these tables can be brought to ``now`` under ``rules`` (not for other rules,
        and not backwards in time)."""
        return rules == self.rules and lead == self.lead and (self.now is None or now >= self.now)

    # --- keeping up with the pool ------------------------------------------------------------

    def refresh(self, obs: PoolObservation, now: datetime) -> None:
        """Bring the tables to ``obs`` at ``now``: reclassify what changed or fell due."""
        self.now = now
        changes = obs.changes
        fresh = self._serial is not None and changes is not None and changes.since == self._serial
        known = changes if fresh else None
        self._serial, self.observed = obs.serial, obs
        marks_changed: set[str] = set()
        if obs.nodes is not self.marks.nodes:
            marks_changed = self.marks.refresh_nodes(obs.nodes, known)
        if obs.claims is not self.claims:
            self._refresh_claims(obs.claims, known)
        for node in marks_changed:
            self._remark(node)
        for name in self.marks.refresh_karpenter(obs, now, known, self.on_node):
            entry = self.entries.get(name)
            if entry is not None:
                self._classify(entry.view, self.marks.opted(entry.view))
        self._take_due(now)

    def _take_due(self, now: datetime) -> None:
        """Reclassify the claims whose bucket time alone moves by ``now``."""
        triggers = self._triggers
        while triggers and triggers[0][0] <= now:
            item = heapq.heappop(triggers)
            if self.live(item):
                self._trigger(item[1])
        due = self._changes
        while due and due[0][0] <= now:
            _, name, token = heapq.heappop(due)
            entry = self.entries.get(name)
            if entry is not None and entry.token == token:
                self._classify(entry.view, entry.opted)

    def _remark(self, node: str) -> None:
        """Reclassify the claim on ``node``, whose opt-out mark changed."""
        name = self.on_node.get(node)
        entry = self.entries.get(name) if name is not None else None
        if entry is not None and entry.view.node_name == node:
            self._classify(entry.view, self.marks.opted(entry.view))

    def _refresh_claims(
        self, claims: tuple[NodeClaimView, ...], known: MemberChanges | None
    ) -> None:
        previous, self.claims = self.claims, claims
        if known is not None:
            # Handed over by the gateway: a claim joining or leaving is the only move, and the
            # positions are rebuilt when next asked for.
            added, gone = list(known.claims_added), list(known.claims_gone)
            if {c.name for c in added} != {c.name for c in gone}:
                self._positions_stale = True
        else:
            # Values are rebuilt only for claims that changed: compare by identity, in C.
            added, gone, moved = member_diff(previous, claims)
            if moved:
                self._positions()
        entries = self.entries
        for view in gone:
            entry = entries.get(view.name)
            if entry is not None and entry.view is view:
                self._drop(entries.pop(view.name))
        for view in added:
            self._classify(view, self.marks.opted(view))

    def _positions(self) -> dict[str, int]:
        """Each observed claim's place in observation order (rebuilt after a move)."""
        claims = self.claims or ()
        names = list(map(_name, claims))
        self._position = dict(zip(names, range(len(names)), strict=True))
        self._positions_stale = False
        if len(self._position) != len(claims):
            raise ValueError("claims: two observed NodeClaims share a name")
        return self._position

    def ordered(self, names: set[str]) -> list[str]:
        """``names`` in observation order."""
        if not names:
            return []
        position = self._positions() if self._positions_stale else self._position
        return sorted(names, key=position.__getitem__)

    def _drop(self, entry: _Entry) -> None:
        name, node = entry.view.name, entry.view.node_name
        if node is not None and self.on_node.get(node) == name:
            del self.on_node[node]
        self.counts[entry.bucket] -= 1
        self.retries[entry.retry] -= 1
        for names in (self.short, self.drifted_due):
            names.discard(name)
        if name in self.triggered:
            self.triggered.remove(name)
            if node:
                self._host_leaves(node)
        self.reference_claims.discard(name)
        self.unbound.discard(name)

    def _classify(self, view: NodeClaimView, opted: bool) -> None:
        old = self.entries.get(view.name)
        if old is not None:
            self._drop(old)
        rules, now = self.rules, self.now
        assert now is not None  # set by ``refresh`` before any claim is classified
        claim = view.selection_view
        if view.name in self.marks.disrupted:  # its Node carries Karpenter's disruption taint
            claim = replace(claim, node_disrupted=True)
        bucket = classify(claim, now, rules, frozenset((claim.name,)) if opted else frozenset())
        self._tokens += 1
        retry = (
            ann.parse_retry_count(view.annotations[ann.RETRY_COUNT])
            if ann.RETRY_COUNT in view.annotations
            else 0
        )
        entry = _Entry(view, claim, bucket, opted, retry, self._tokens)
        self.entries[view.name] = entry
        self.reclassified += 1
        self.counts[bucket] += 1
        self.retries[retry] += 1
        self._index(entry)
        self._schedule(entry, now)

    def _index(self, entry: _Entry) -> None:
        """File a freshly classified claim in the sets a pass asks of."""
        view, claim, name = entry.view, entry.claim, entry.view.name
        if view.node_name is not None:
            self.on_node[view.node_name] = name
        else:
            self.unbound.add(name)
        if is_short_lead(claim, self.lead):
            self.short.add(name)
        if claim.drifted and drift_rule(claim, entry.bucket, self.rules) is DriftRule.DUE:
            self.drifted_due.add(name)
        if view.annotations.get(REFERENCE_CLAIM_STATE) in REFERENCE_IN_FLIGHT_STATES:
            self.reference_claims.add(name)

    def _schedule(self, entry: _Entry, now: datetime) -> None:
        """Queue the instants at which time alone changes what the census says of ``entry``."""
        claim, rules, name, token = entry.claim, self.rules, entry.view.name, entry.token
        at = _reclassify_at(claim, entry.bucket, rules)
        if at is not None:
            heapq.heappush(self._changes, (at, name, token))
        if entry.bucket is Bucket.ELIGIBLE:
            heapq.heappush(self.eligible, (order_key(claim, rules), name, token))
        if may_become_eligible(claim, entry.opted):
            eligible_at = eligibility_instant(claim, rules)
            if eligible_at is not None and eligible_at > now:
                heapq.heappush(self.arrivals, (eligible_at, name, token))
        triggered_at = trigger_instant(claim, rules)
        if triggered_at is not None:
            if triggered_at <= now:
                self._trigger(name)
            else:
                heapq.heappush(self._triggers, (triggered_at, name, token))

    def _trigger(self, name: str) -> None:
        """File ``name`` (classified already) as triggered, its node among the due hosts."""
        if name in self.triggered:
            return
        self.triggered.add(name)
        host = self.entries[name].view.node_name
        if host:
            count = self._due_count.get(host, 0)
            self._due_count[host] = count + 1
            if not count:
                bisect.insort(self.due_hosts, host)

    def _host_leaves(self, host: str) -> None:
        """A triggered claim on ``host`` left the triggered ones (dropped or reclassified)."""
        count = self._due_count[host] - 1
        if count:
            self._due_count[host] = count
            return
        del self._due_count[host]
        del self.due_hosts[bisect.bisect_left(self.due_hosts, host)]

    def live(self, item: tuple[object, str, int]) -> bool:
        """Whether a queue item still speaks for its claim's current classification."""
        entry = self.entries.get(item[1])
        return entry is not None and entry.token == item[2]


class PoolCensus:
    """One pool's census, carried from pass to pass (see the module docstring)."""

    __slots__ = ("_tally",)

    def __init__(self) -> None:
        """An empty census: the first ``advanced`` classifies every observed claim."""
        self._tally: _Tally | None = None

    @classmethod
    def _holding(cls, tally: _Tally) -> PoolCensus:
        census = cls()
        census._tally = tally
        return census

    def advanced(
        self, obs: PoolObservation, rules: SelectionRules, lead_time_base: timedelta, now: datetime
    ) -> PoolCensus:
        """This census brought up to ``obs`` at ``now`` under ``rules``; this one is spent.

        Other rules, or a ``now`` before the last one, start the tables afresh."""
        tally, self._tally = self._tally, None
        if tally is None or not tally.fits(rules, lead_time_base, now):
            tally = _Tally(rules, lead_time_base)
        tally.refresh(obs, now)
        return PoolCensus._holding(tally)

    @property
    def _t(self) -> _Tally:
        if self._tally is None:
            raise ValueError(
                "census: this one is empty or was advanced already; ask the census that "
                "advanced (or the step) returned"
            )
        return self._tally

    # --- what a pass asks --------------------------------------------------------------------

    @property
    def reclassified(self) -> int:
        """How many claim classifications the census has made (for tests and benchmarks)."""
        return self._t.reclassified

    @property
    def headcount(self) -> Census:
        """How many claims fall in each bucket now (as ``take_census``)."""
        t = self._t
        return Census(+t.counts, len(t.drifted_due))

    @property
    def not_ready_nodes(self) -> int:
        """How many of the observed Nodes are not Ready (the disruption-budget gate's bound), kept
        from the nodes that joined, left or changed."""
        return self._t.marks.not_ready

    def candidate(self) -> ClaimView | None:
        """The claim ``pick`` would choose now: the first eligible one in selection order."""
        t = self._t
        heap, entries = t.eligible, t.entries
        while heap and not (t.live(heap[0]) and entries[heap[0][1]].bucket is Bucket.ELIGIBLE):
            heapq.heappop(heap)
        return entries[heap[0][1]].claim if heap else None

    def eligible(self) -> list[ClaimView]:
        """Every eligible claim, in selection order (``order``): the candidate first."""
        t = self._t
        live = [i for i in t.eligible if t.live(i) and t.entries[i[1]].bucket is Bucket.ELIGIBLE]
        return [t.entries[name].claim for _, name, _ in sorted(live)]

    def short_lead(self) -> tuple[str, ...]:
        """The claims whose whole life is within their lead time, in observation order."""
        t = self._t
        return tuple(t.ordered(t.short))

    def due_hosts(self) -> list[str]:
        """The nodes of the claims old enough to rotate (``is_triggered``), each once, sorted
        by name: kept as the claims fall due, change or leave, not gathered per start (at
        10,000 nodes a start would look up some 1,600 of them)."""
        return list(self._t.due_hosts)

    @property
    def reference_marked(self) -> bool:
        """Whether some claim or node carries a reference controller's in-flight marker."""
        t = self._t
        return bool(t.reference_claims or t.marks.reference_nodes)

    def unbound_claims(self) -> list[NodeClaimView]:
        """The claims bound to no node yet (in no particular order)."""
        t = self._t
        return [t.entries[name].view for name in t.unbound]

    def surge_hosts(self, claim: str, obs: PoolObservation) -> list[NodeView]:
        """The nodes of ``obs`` serving the rotation of ``claim`` (``surge-for``), in
        observation order."""
        t = self._t
        if obs is t.observed:
            names = t.marks.surge_nodes(claim)
            if not names:
                return []
            node = obs.node(next(iter(names))) if len(names) == 1 else None
            if node is not None:
                return [node]
        # Only a walk tells: ``obs`` is a pool predicted from the observed one (the census knows
        # the marks of the observed one), or several nodes serve it, in the observation's order.
        return [n for n in obs.nodes if n.annotations.get(ann.SURGE_FOR) == claim]

    def retry_count(self) -> int:
        """The highest retry count of any claim (0 when none has one)."""
        return max((n for n, k in self._t.retries.items() if k > 0), default=0)

    def opt_out_expiry(self, now: datetime) -> datetime | None:
        """``opt_out_expiry`` over the observed Pods at ``now`` (only annotated ones count)."""
        return self._t.marks.opt_out_expiry(now)

    def next_eligibility(self, now: datetime) -> datetime | None:
        """The first instant after ``now`` at which some claim could become eligible by time."""
        t = self._t
        heap = t.arrivals
        while heap and (heap[0][0] <= now or not t.live(heap[0])):
            heapq.heappop(heap)
        return heap[0][0] if heap else None
