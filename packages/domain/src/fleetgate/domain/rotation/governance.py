"""Which RotationPolicy governs a NodePool (spec §7.9 "Resolution").

Every policy whose selector matches the pool's labels is a candidate; the most specific one
(``#matchLabels + #matchExpressions``) wins. A tie at the top is a *conflict* (nobody rotates
the pool: two operators' intents disagree), and so is a winner that does not validate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from functools import lru_cache

from fleetgate.domain.rotation.policy import PolicyError, ResolvedPolicy, RotationPolicy


class Status(StrEnum):
    """How a pool is governed."""

    GOVERNED = "governed"
    UNGOVERNED = "ungoverned"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Governance:
    """The outcome of resolution: the resolved winner, or why there is none."""

    status: Status
    resolved: ResolvedPolicy | None = None
    winner: str = ""
    detail: str = ""
    tied: tuple[str, ...] = ()
    """The sorted names of the policies tied at the top (a conflict of equal specificity)."""

    @property
    def governed(self) -> bool:
        """True when exactly one valid policy governs the pool."""
        return self.status is Status.GOVERNED


def matching(labels: Mapping[str, str], policies: Sequence[RotationPolicy]) -> list[RotationPolicy]:
    """The policies whose selector selects a pool with ``labels`` (no selector selects nothing)."""
    return [
        p
        for p in policies
        if p.node_pool_selector is not None and p.node_pool_selector.matches(labels)
    ]


def govern(
    labels: Mapping[str, str],
    policies: Sequence[RotationPolicy],
    template_tgp: timedelta | None,
) -> Governance:
    """Resolve the policy of a pool with ``labels`` and template tGP ``template_tgp``."""
    candidates = matching(labels, policies)
    if not candidates:
        return Governance(Status.UNGOVERNED, detail="no RotationPolicy selects this NodePool")

    def specificity(policy: RotationPolicy) -> int:
        assert policy.node_pool_selector is not None  # matching() kept only selectors
        return policy.node_pool_selector.specificity

    top = max(specificity(p) for p in candidates)
    tied = sorted(p.name for p in candidates if specificity(p) == top)
    if len(tied) > 1:
        return Governance(
            Status.CONFLICT,
            detail=f"RotationPolicies {tied} select this NodePool with equal specificity {top}",
            tied=tuple(tied),
        )
    winner = next(p for p in candidates if specificity(p) == top)
    try:
        resolved = _resolve(winner, template_tgp)
    except PolicyError as exc:
        return Governance(
            Status.CONFLICT,
            winner=winner.name,
            detail=f"RotationPolicy {winner.name!r} is invalid: {exc}",
        )
    return Governance(Status.GOVERNED, resolved=resolved, winner=winner.name)


@lru_cache(maxsize=256)
def _resolve(policy: RotationPolicy, template_tgp: timedelta | None) -> ResolvedPolicy:
    """``policy.resolve`` memoised: both are immutable values, and every pass asks again."""
    return policy.resolve(template_tgp)
