"""What every part of one machine step shares: the pass's inputs and the small common moves."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property

from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import Action, DeletePlaceholder
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.cluster import NodeClaimView, NodeView, PoolObservation
from fleetgate.domain.rotation.disruption import node_disrupted, pod_opted_out_claims
from fleetgate.domain.rotation.markers import unfreeze
from fleetgate.domain.rotation.placeholder import placeholder_name
from fleetgate.domain.rotation.policy import ResolvedPolicy
from fleetgate.domain.rotation.selection import (
    Bucket,
    Census,
    ClaimView,
    DriftRule,
    classify,
    drift_rule,
    is_short_lead,
    is_triggered,
    opted_out_claims,
    order,
)

CLEAR_ANCHOR: dict[str, str | None] = {
    ann.ACTIVE_ROTATION: None,
    ann.ACTIVE_ROTATION_STATE: None,
    ann.DRAINING_AT: None,
    ann.SURGE_WAIT: None,
    ann.ROTATION_MODE: None,
}
"""The one pool write that ends a rotation (spec §7.1 "Clear anchor")."""


@dataclass(frozen=True)
class MachineConfig:
    """The controller's own settings the machine needs."""

    namespace: str = "fleetgate-system"
    reference_gone: bool = False
    """The operator says the reference controller is uninstalled: release its markers."""


@dataclass(frozen=True)
class Pass:
    """One pass over one pool: the observation, the governing policy resolved for it, now."""

    obs: PoolObservation
    policy: ResolvedPolicy
    now: datetime
    config: MachineConfig
    cache: PoolCensus | None = field(default=None, compare=False)
    """The census carried across passes, already advanced to ``obs`` at ``now`` (None: compute
    everything from the observation)."""

    # Each is computed once per pass and shared by the report, the pick and the quiet instant:
    # over a 10,000-claim pool, a second walk over the claims is a large part of a pass.
    @cached_property
    def views(self) -> list[ClaimView]:
        """The selection module's view of every observed claim, in observation order; a claim
        whose node Karpenter has tainted for disruption says so (the node is not the claim's)."""
        tainted = {n.name for n in self.obs.nodes if node_disrupted(n)}
        views = [c.selection_view for c in self.obs.claims]
        if not tainted:
            return views  # the usual case: the claims' cached views, untouched
        return [replace(v, node_disrupted=True) if v.node_name in tainted else v for v in views]

    @cached_property
    def opted(self) -> frozenset[str]:
        """The claims whose node carries the operator's own ``do-not-disrupt``, or holds a Pod
        whose ``do-not-disrupt`` is active now (Karpenter honours both; deleting the claim
        would bypass them)."""
        nodes = opted_out_claims(self.views, {n.name: n.annotations for n in self.obs.nodes})
        return nodes | pod_opted_out_claims(self.views, self.obs.pods, self.now)

    @cached_property
    def buckets(self) -> list[Bucket]:
        """Each claim's census bucket now, in observation order."""
        rules, now, opted = self.policy.selection, self.now, self.opted
        return [classify(v, now, rules, opted) for v in self.views]

    @property
    def census(self) -> Census:
        """How many claims fell in each bucket (``take_census`` over ``views``)."""
        if self.cache is not None:
            return self.cache.census
        rules = self.policy.selection
        due = sum(
            drift_rule(v, b, rules) is DriftRule.DUE
            for v, b in zip(self.views, self.buckets, strict=True)
            if v.drifted
        )
        return Census(Counter(self.buckets), due)

    @cached_property
    def candidate(self) -> ClaimView | None:
        """The eligible claim selection puts first (``pick``), or None."""
        if self.cache is not None:
            return self.cache.candidate()
        eligible = [
            v for v, b in zip(self.views, self.buckets, strict=True) if b is Bucket.ELIGIBLE
        ]
        ordered = order(eligible, self.policy.selection)
        return ordered[0] if ordered else None

    @cached_property
    def short_lead(self) -> tuple[str, ...]:
        """The claims whose whole life is within their lead time, in observation order."""
        if self.cache is not None:
            return self.cache.short_lead()
        base = self.policy.lead_time_base
        return tuple(v.name for v in self.views if is_short_lead(v, base))

    @property
    def due_hosts(self) -> list[str]:
        """The nodes of the claims old enough to rotate (in observation order here; the
        census gives them in no particular order: the placeholder sorts them)."""
        if self.cache is not None:
            return self.cache.due_hosts()
        rules = self.policy.selection
        return [
            c.node_name
            for c in self.obs.claims
            if c.node_name and is_triggered(c.selection_view, self.now, rules)
        ]

    @property
    def retry_count(self) -> int:
        """The highest retry count of any claim (an absent one counts as 0)."""
        if self.cache is not None:
            return self.cache.retry_count()
        claims = self.obs.claims
        counts = [
            ann.parse_retry_count(c.annotations[ann.RETRY_COUNT])
            for c in claims
            if ann.RETRY_COUNT in c.annotations
        ]
        if len(counts) < len(claims):
            counts.append(0)
        return max(counts, default=0)

    @property
    def unbound_claims(self) -> list[NodeClaimView]:
        """The claims bound to no node yet (in no particular order). The census answers for a
        pool predicted from its own (``settled_anchored``) too: a write changes no claim's
        name, creation or binding."""
        if self.cache is not None:
            return self.cache.unbound_claims()
        return [c for c in self.obs.claims if c.node_name is None]

    def surge_hosts(self, name: str) -> list[NodeView]:
        """The nodes serving the rotation of ``name`` (``surge-for``), in observation order."""
        if self.cache is not None:
            found = self.cache.surge_hosts(name, self.obs)
            if found is not None:
                return found
        return [n for n in self.obs.nodes if n.annotations.get(ann.SURGE_FOR) == name]

    @property
    def stamp(self) -> str:
        """``now`` as an annotation value."""
        return ann.format_timestamp(self.now)

    def release(self, name: str) -> list[Action]:
        """Delete the placeholder(s) of the rotation of ``name`` and unfreeze its nodes."""
        actions: list[Action] = []
        names = {placeholder_name(name)}
        for pod in self.obs.placeholders:
            if pod.labels.get(ann.SURGE_FOR) == name:
                names.add(pod.name)
        present = {p.name for p in self.obs.placeholders}
        for pod_name in sorted(names & present):
            actions.append(DeletePlaceholder(self.config.namespace, pod_name))
        for node in self.surge_hosts(name):
            actions.extend(unfreeze(node))
        return actions


def claim_view(claim: NodeClaimView) -> ClaimView:
    """The selection module's view of an observed claim."""
    return claim.selection_view


def opted_out(obs: PoolObservation) -> frozenset[str]:
    """Claims whose node carries the operator's own ``do-not-disrupt`` (spec §6 opt-out set)."""
    views = [claim_view(c) for c in obs.claims]
    return opted_out_claims(views, {n.name: n.annotations for n in obs.nodes})
