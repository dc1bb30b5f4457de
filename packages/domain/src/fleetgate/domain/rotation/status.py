"""What a RotationPolicy's ``status`` should say (spec §8.3), and whether it needs writing.

The status is derived, never read back by the controller: ``matchedNodePoolNames`` are the pools
the policy wins under governance (even when it is invalid, because it still blocks those pools),
``rotatingNodePoolNames`` those of them with an active rotation (an anchor), ``matchedNodePools``
and ``rotatingNodePools`` their counts (integers, as the reference controller writes them), and one
``Ready``
condition whose reason follows a fixed precedence: ``Invalid`` (the validation message) over
``Conflict`` (a tie at the top for some pool) over ``Accepted``.

The caller keeps the status last written per policy; :func:`needs_write` says whether the
desired one differs in anything but ``lastTransitionTime``, and :func:`stamped` carries the
previous ``lastTransitionTime`` over unless the condition's status flipped, so an unchanged
policy costs no API write and its transition time stays the instant it last changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from fleetgate.domain.durations import format_duration
from fleetgate.domain.rotation.annotations import format_timestamp, parse_timestamp
from fleetgate.domain.rotation.governance import Governance, Status
from fleetgate.domain.rotation.policy import PolicyError, RotationPolicy
from fleetgate.domain.rotation.windows import Schedule

__all__ = [
    "READY",
    "PolicyStatus",
    "PoolGovernance",
    "ReadyCondition",
    "desired_statuses",
    "needs_write",
    "stamped",
    "validation_errors",
    "window_state",
]

READY = "Ready"
INVALID = "Invalid"
CONFLICT = "Conflict"
ACCEPTED = "Accepted"


@dataclass(frozen=True)
class ReadyCondition:
    """The ``Ready`` condition: ``status`` True/False, a reason, and a human message."""

    status: bool
    reason: str
    message: str
    last_transition_time: datetime | None = None


@dataclass(frozen=True)
class PolicyStatus:
    """One policy's ``status`` subresource as the controller writes it."""

    observed_generation: int | None
    matched_node_pools: tuple[str, ...]
    rotating_node_pools: tuple[str, ...]
    ready: ReadyCondition
    # What ``kubectl get fgrotpol`` shows at a glance (None for an invalid policy: no schedule).
    window_open: bool | None = None
    next_window: datetime | None = None
    age_threshold: str | None = None

    def as_manifest(self) -> dict[str, Any]:
        """The JSON ``status`` object (Kubernetes condition conventions)."""
        condition: dict[str, Any] = {
            "type": READY,
            "status": "True" if self.ready.status else "False",
            "reason": self.ready.reason,
            "message": self.ready.message,
        }
        if self.ready.last_transition_time is not None:
            condition["lastTransitionTime"] = format_timestamp(self.ready.last_transition_time)
        status: dict[str, Any] = {
            # Counts, as node-rotation-controller writes them, so its tools read ours; the
            # names are kept beside them (a reference CRD's schema prunes these two away).
            "matchedNodePools": len(self.matched_node_pools),
            "rotatingNodePools": len(self.rotating_node_pools),
            "matchedNodePoolNames": list(self.matched_node_pools),
            "rotatingNodePoolNames": list(self.rotating_node_pools),
            "conditions": [condition],
        }
        # Written as null when unknown, never left out: the status is merge-patched, and a
        # missing key would leave a value that stopped being true (a policy turned invalid).
        status["windowOpen"] = self.window_open
        status["nextWindow"] = (
            None if self.next_window is None else format_timestamp(self.next_window)
        )
        status["ageThreshold"] = self.age_threshold
        if self.observed_generation is not None:
            status["observedGeneration"] = self.observed_generation
            condition["observedGeneration"] = self.observed_generation
        return status

    @classmethod
    def from_manifest(cls, status: Any) -> PolicyStatus | None:
        """Read a ``status`` object back (what a cluster already carries); None if it has no
        ``Ready`` condition, so anything unreadable is simply rewritten."""
        if not isinstance(status, Mapping):
            return None
        conditions = status.get("conditions")
        ready = (
            next(
                (c for c in conditions or () if isinstance(c, Mapping) and c.get("type") == READY),
                None,
            )
            if isinstance(conditions, list)
            else None
        )
        if ready is None:
            return None
        generation = status.get("observedGeneration")
        window_open = status.get("windowOpen")
        age = status.get("ageThreshold")
        return cls(
            observed_generation=generation if type(generation) is int else None,
            matched_node_pools=_names(_listed(status, "matchedNodePool")),
            rotating_node_pools=_names(_listed(status, "rotatingNodePool")),
            ready=ReadyCondition(
                status=ready.get("status") == "True",
                reason=str(ready.get("reason") or ""),
                message=str(ready.get("message") or ""),
                last_transition_time=parse_timestamp(_text(ready.get("lastTransitionTime"))),
            ),
            window_open=window_open if isinstance(window_open, bool) else None,
            next_window=parse_timestamp(_text(status.get("nextWindow"))),
            age_threshold=age if isinstance(age, str) else None,
        )


@dataclass(frozen=True)
class PoolGovernance:
    """What one pool's last pass decided about policies: who won it, who tied, is it rotating."""

    pool: str
    winner: str = ""
    tied: tuple[str, ...] = ()
    anchored: bool = False
    age_threshold: timedelta | None = None  # A as the pass derived it for this pool

    @classmethod
    def of(
        cls,
        pool: str,
        gov: Governance,
        anchor: str | None,
        age_threshold: timedelta | None = None,
    ) -> PoolGovernance:
        """From a pass's governance and the pool's anchor (an invalid winner still wins)."""
        winner = gov.winner if gov.status is not Status.UNGOVERNED else ""
        return cls(pool, winner, gov.tied, anchor is not None, age_threshold)


def window_state(policy: RotationPolicy, now: datetime) -> tuple[bool, datetime | None] | None:
    """Whether ``policy``'s windows are open at ``now`` and when the next one opens after it
    (the one after the current when open; None if none ever does); None when it is invalid.

    Both change only at a window transition, so a status carrying them is rewritten there and
    nowhere else.
    """
    schedule = _schedule(policy)
    if schedule is None:
        return None
    is_open = schedule.is_open(now)
    after = schedule.next_transition(now) if is_open else now
    return is_open, None if after is None else schedule.next_transition(after)


@lru_cache(maxsize=256)
def _schedule(policy: RotationPolicy) -> Schedule | None:
    try:
        return None if _validation_errors(policy) else policy.schedule()
    except PolicyError:
        return None


def validation_errors(policy: RotationPolicy) -> tuple[str, ...]:
    """Why ``policy`` cannot govern (empty when valid): exactly what governance rejects."""
    return _validation_errors(policy)


@lru_cache(maxsize=256)
def _validation_errors(policy: RotationPolicy) -> tuple[str, ...]:
    # Memoised like governance's resolve: policies are immutable values asked about every pass.
    errors = policy.validate()
    if not errors:
        try:
            policy.schedule()
        except PolicyError as exc:
            errors = list(exc.errors)
    return tuple(errors)


def desired_statuses(
    policies: Sequence[RotationPolicy],
    errors: Mapping[str, Sequence[str]],
    pools: Iterable[PoolGovernance],
    now: datetime | None = None,
) -> dict[str, PolicyStatus]:
    """The status every policy should carry (no ``lastTransitionTime``; see :func:`stamped`).

    ``errors`` are the validation results by policy name (missing: valid), ``pools`` the
    governance of every known pool. With ``now``, a valid policy's status also says whether its
    window is open and when the next opens; A is the one its pools derived (each distinct value
    once, as pools with different ``expireAfter`` derive different ones), else its
    ``ageThreshold`` override. One walk over each: O(policies + pools).
    """
    ages: dict[str, set[timedelta]] = {}
    matched: dict[str, list[str]] = {}
    rotating: dict[str, list[str]] = {}
    ties: dict[str, tuple[set[str], list[str]]] = {}
    for pg in pools:
        if pg.winner:
            matched.setdefault(pg.winner, []).append(pg.pool)
            if pg.age_threshold is not None:
                ages.setdefault(pg.winner, set()).add(pg.age_threshold)
            if pg.anchored:
                rotating.setdefault(pg.winner, []).append(pg.pool)
        for name in pg.tied:
            others, tied_pools = ties.setdefault(name, (set(), []))
            others.update(n for n in pg.tied if n != name)
            tied_pools.append(pg.pool)
    out: dict[str, PolicyStatus] = {}
    for policy in policies:
        name = policy.name
        won = tuple(sorted(matched.get(name, ())))
        problems = errors.get(name, ())
        if problems:
            ready = ReadyCondition(False, INVALID, "; ".join(problems))
        elif name in ties:
            others, tied_pools = ties[name]
            message = f"ties with [{' '.join(sorted(others))}] for NodePool(s) " + (
                f"[{' '.join(sorted(tied_pools))}]"
            )
            ready = ReadyCondition(False, CONFLICT, message)
        else:
            ready = ReadyCondition(True, ACCEPTED, f"valid and governs {len(won)} NodePool(s)")
        window = None if problems or now is None else window_state(policy, now)
        derived = sorted(ages.get(name, ()))
        if not derived and policy.age_threshold is not None:
            derived = [policy.age_threshold]
        out[name] = PolicyStatus(
            observed_generation=policy.generation,
            matched_node_pools=won,
            rotating_node_pools=tuple(sorted(rotating.get(name, ()))),
            ready=ready,
            window_open=None if window is None else window[0],
            next_window=None if window is None else window[1],
            age_threshold=", ".join(format_duration(a) for a in derived) or None,
        )
    return out


def needs_write(current: PolicyStatus | None, desired: PolicyStatus) -> bool:
    """True when ``desired`` differs from ``current`` in anything but ``lastTransitionTime``."""
    if current is None:
        return True
    return _untimed(current) != _untimed(desired)


def stamped(desired: PolicyStatus, current: PolicyStatus | None, now: datetime) -> PolicyStatus:
    """``desired`` with ``lastTransitionTime``: the current one unless the condition's status
    changed (or none was known), else ``now``."""
    if (
        current is not None
        and current.ready.status == desired.ready.status
        and current.ready.last_transition_time is not None
    ):
        at = current.ready.last_transition_time
    else:
        at = now
    return replace(desired, ready=replace(desired.ready, last_transition_time=at))


def _untimed(status: PolicyStatus) -> PolicyStatus:
    return replace(status, ready=replace(status.ready, last_transition_time=None))


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _listed(status: Mapping[str, Any], field: str) -> Any:
    """The names under ``<field>Names``, or under ``<field>s`` as written before it was a count."""
    names = status.get(field + "Names")
    return names if names is not None else status.get(field + "s")
