"""PodDisruptionBudgets and the Eviction API, as a draining Karpenter meets them.

Karpenter drains a deleted NodeClaim's Node by evicting each Pod through the Eviction API
(``pods/eviction``), never by deleting it: the API server refuses an eviction with 429 while the
Pod's PodDisruptionBudget allows no disruption, and Karpenter retries with a per-Pod exponential
backoff (100 ms doubling to 10 s). Once the claim's ``terminationGracePeriod`` has run out it
deletes what is left, PDB or not. Facts followed: Kubernetes ``pkg/registry/core/pod/storage/
eviction.go`` and the disruption controller (``status.disruptionsAllowed``), Karpenter
``pkg/controllers/node/termination/terminator/eviction.go`` (v1.14).

``allowed_disruptions`` is the one computation of a budget: the fake cluster uses it for its own
drains and the tests' recording API server for its ``pods/eviction`` answers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: Karpenter's eviction queue backoff: the first retry after 100 ms, doubling to at most 10 s.
EVICTION_BASE_DELAY = timedelta(milliseconds=100)
EVICTION_MAX_DELAY = timedelta(seconds=10)

IF_HEALTHY_BUDGET = "IfHealthyBudget"
ALWAYS_ALLOW = "AlwaysAllow"


def scaled(value: int | str, total: int) -> int:
    """An int-or-percent against ``total``; a PDB rounds a percentage up, as the controller does."""
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        return int(text)
    return math.ceil(int(text[:-1]) * total / 100)


def desired_healthy(
    expected: int, min_available: int | str | None, max_unavailable: int | str | None
) -> int:
    """``status.desiredHealthy``: how many matching Pods must stay healthy."""
    if min_available is not None:
        return scaled(min_available, expected)
    if max_unavailable is not None:
        return max(0, expected - scaled(max_unavailable, expected))
    return 0  # a budget naming neither is refused by the API server; guard nothing here


def allowed_disruptions(
    expected: int,
    healthy: int,
    min_available: int | str | None,
    max_unavailable: int | str | None,
) -> int:
    """``status.disruptionsAllowed``: healthy Pods beyond the desired, never below 0."""
    return max(0, healthy - desired_healthy(expected, min_available, max_unavailable))


def may_evict(
    *,
    pod_healthy: bool,
    expected: int,
    healthy: int,
    min_available: int | str | None,
    max_unavailable: int | str | None,
    unhealthy_policy: str = IF_HEALTHY_BUDGET,
) -> bool:
    """Whether the Eviction API lets one Pod guarded by this budget go (else it answers 429).

    As ``EvictionREST.Create`` decides (kubernetes ``pkg/registry/core/pod/storage/eviction.go``):
    an unhealthy (not Ready) Pod goes without spending a disruption under ``AlwaysAllow``, and
    under ``IfHealthyBudget`` (the default) when the application already has its desired
    healthy Pods *and* desires at least one (``DesiredHealthy > 0``). Every other Pod, healthy
    or not, needs a disruption to spare (``checkAndDecrement``: ``DisruptionsAllowed > 0``), so
    an unhealthy Pod under ``maxUnavailable: 100%`` (nothing desired) goes only while some
    other Pod of the budget is healthy.
    """
    if not pod_healthy:
        if unhealthy_policy == ALWAYS_ALLOW:
            return True
        desired = desired_healthy(expected, min_available, max_unavailable)
        if desired > 0 and healthy >= desired:
            return True
    return allowed_disruptions(expected, healthy, min_available, max_unavailable) > 0


def next_retry(first_refusal: datetime, now: datetime) -> datetime:
    """The first of Karpenter's eviction retries (100 ms after the first refusal, each delay
    doubling to at most 10 s) that falls at or after ``now``.

    The fake cluster asks this only once a retry could succeed, instead of waking every 10 s of
    virtual time for a retry that is bound to be refused: the outcome is the same.
    """
    at, delay = first_refusal + EVICTION_BASE_DELAY, EVICTION_BASE_DELAY
    while at < now and delay < EVICTION_MAX_DELAY:
        delay = min(delay * 2, EVICTION_MAX_DELAY)
        at += delay
    if at < now:  # the delay is capped now: the retries fall on a 10 s grid from ``at``
        at += EVICTION_MAX_DELAY * -((at - now) // EVICTION_MAX_DELAY)
    return at


@dataclass(frozen=True)
class DisruptionBudget:
    """A PodDisruptionBudget: the Pods of ``namespace`` whose labels hold ``match_labels``."""

    namespace: str
    name: str
    match_labels: Mapping[str, str] = field(default_factory=dict)
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_policy: str = IF_HEALTHY_BUDGET

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a Pod with these labels in ``namespace`` is guarded by this budget."""
        return namespace == self.namespace and all(
            labels.get(k) == v for k, v in self.match_labels.items()
        )

    def lets_go(self, pod_healthy: bool, guarded: Iterable[bool]) -> bool:
        """Whether one Pod may be evicted, given the health of every Pod the budget guards."""
        states = list(guarded)
        return may_evict(
            pod_healthy=pod_healthy,
            expected=len(states),
            healthy=sum(states),
            min_available=self.min_available,
            max_unavailable=self.max_unavailable,
            unhealthy_policy=self.unhealthy_policy,
        )
