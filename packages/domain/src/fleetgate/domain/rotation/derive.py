"""The schedule derivation (spec §4): can these windows rotate the pool before forced expiry?

Two halves that must never leak into each other (ADR-0002/0003, "containment"):

* the **deadline** side — ``t_rot = readyTimeout + tGP + Buffer``, the lead time ``K·P + t_rot``,
  the age threshold A and the guaranteed chances G — uses only upper bounds, so a node is never
  scheduled too late; its fatal findings stop new rotations;
* the **forecast** side — ``t_rot_est = provisioningEstimate + drainEstimate`` and the per-window
  capacity ``C = m·ceil(D / (t_rot_est + cooldownAfter))`` — uses expected durations and can only
  warn.

Everything is exact ``timedelta`` arithmetic except the one comparison the reference makes in
float64 (``ThroughputBelowArrival``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.rotation.constants import (
    BUFFER,
    DRAIN_ESTIMATE_DEFAULT,
    HARD_CAP,
    PROVISIONING_ESTIMATE_DEFAULT,
)
from fleetgate.domain.rotation.findings import Finding, FindingCode, finding

__all__ = [
    "Derivation",
    "DeriveInputs",
    "derive",
    "resolve_drain_estimate",
    "resolve_provisioning_estimate",
]

_ZERO = timedelta(0)


@dataclass(frozen=True)
class DeriveInputs:
    """Everything the derivation reads (spec §4 "Inputs")."""

    expire_after: timedelta | None
    """E, the NodePool template's expireAfter; None means ``Never`` (nothing to derive)."""
    tgp: timedelta
    """The template's terminationGracePeriod, or the 1h fallback when it is unset."""
    tgp_was_unset: bool
    period: timedelta
    """P, the worst-case window period."""
    window_len: timedelta
    """D, the shortest window occurrence."""
    idle_gap: timedelta | None
    """The shortest closed gap between occurrences; None when undefined."""
    ready_timeout: timedelta
    cooldown: timedelta
    retry_backoff: timedelta
    k: int
    max_unavailable: int = 1
    node_count: int = 0
    override: timedelta | None = None
    """An explicit ageThreshold; None means ``auto``."""
    drain_estimate: timedelta | None = None
    provisioning_estimate: timedelta | None = None


@dataclass(frozen=True)
class Derivation:
    """What the derivation concluded; ``findings`` are in the reference's order."""

    inputs: DeriveInputs
    t_rot: timedelta
    """Deadline bound of one rotation: readyTimeout + tGP + Buffer."""
    t_rot_est: timedelta
    """Forecast of one rotation: provisioningEstimate + drainEstimate."""
    drain_estimate: timedelta
    provisioning_estimate: timedelta
    lead_time: timedelta
    """K·P + t_rot: how long before its deadline a node becomes due (auto mode)."""
    age_threshold: timedelta
    """A: the age at which a node becomes due for rotation."""
    guaranteed_chances: int
    """G: window occurrences a due node is guaranteed before its forced expiry."""
    capacity: int
    """C: rotations that can start in the shortest occurrence."""
    findings: tuple[Finding, ...]

    @property
    def fatal(self) -> bool:
        """Whether any finding is fatal (no new rotation may start in the pool)."""
        return any(f.fatal for f in self.findings)

    @property
    def codes(self) -> tuple[FindingCode, ...]:
        """The finding codes, in order."""
        return tuple(f.code for f in self.findings)


def resolve_drain_estimate(
    explicit: timedelta | None, tgp: timedelta, tgp_was_unset: bool
) -> tuple[timedelta, Finding | None]:
    """The drain estimate the forecast uses, and the warning when an explicit one is clamped."""
    if explicit is None:
        return min(tgp, DRAIN_ESTIMATE_DEFAULT), None
    if not tgp_was_unset and explicit > tgp:
        return tgp, finding(
            FindingCode.DRAIN_ESTIMATE_ABOVE_TGP,
            f"drainEstimate {fmt(explicit)} is longer than the terminationGracePeriod "
            f"{fmt(tgp)}: Karpenter force-completes every drain at tGP, so the forecast uses "
            f"{fmt(tgp)}. Set drainEstimate to at most {fmt(tgp)}.",
        )
    return explicit, None


def resolve_provisioning_estimate(
    explicit: timedelta | None, ready_timeout: timedelta
) -> tuple[timedelta, Finding | None]:
    """The provisioning estimate the forecast uses, and the warning when it is clamped."""
    if explicit is None:
        return min(ready_timeout, PROVISIONING_ESTIMATE_DEFAULT), None
    if explicit > ready_timeout:
        return ready_timeout, finding(
            FindingCode.PROVISIONING_ESTIMATE_ABOVE_READY_TIMEOUT,
            f"provisioningEstimate {fmt(explicit)} is longer than readyTimeout "
            f"{fmt(ready_timeout)}: a surge node slower than readyTimeout is abandoned, so the "
            f"forecast uses {fmt(ready_timeout)}. Lower provisioningEstimate or raise "
            "readyTimeout.",
        )
    return explicit, None


def derive(inputs: DeriveInputs) -> Derivation:
    """Derive t_rot, t_rot_est, A, G, C and every finding (spec §4). Never raises."""
    if inputs.expire_after is None:
        # expireAfter: Never has no deadline to derive against; only an override still selects.
        return Derivation(
            inputs, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO, inputs.override or _ZERO, 0, 0, ()
        )
    t_rot = inputs.ready_timeout + inputs.tgp + BUFFER
    drain, drain_warn = resolve_drain_estimate(
        inputs.drain_estimate, inputs.tgp, inputs.tgp_was_unset
    )
    prov, prov_warn = resolve_provisioning_estimate(
        inputs.provisioning_estimate, inputs.ready_timeout
    )
    t_rot_est = prov + drain
    findings = [w for w in (drain_warn, prov_warn) if w is not None]
    lead_time = inputs.k * inputs.period + t_rot
    if inputs.period <= _ZERO:
        message = (
            "the maintenance windows have no occurrence, so no rotation can ever start and every "
            "node will reach its forced expiry. Add at least one maintenanceWindows entry."
        )
        findings.append(finding(FindingCode.NO_WINDOWS, message))
        return Derivation(
            inputs, t_rot, t_rot_est, drain, prov, lead_time, _ZERO, 0, 0, tuple(findings)
        )

    if inputs.override is not None:
        age_threshold = inputs.override
        chances = (inputs.expire_after - t_rot - age_threshold) // inputs.period
    else:
        age_threshold = inputs.expire_after - lead_time
        chances = inputs.k
    denominator = t_rot_est + inputs.cooldown
    capacity = 0
    if denominator > _ZERO and inputs.window_len > _ZERO:
        # ceil: every start at k·denominator < D is legal, so a non-empty occurrence fits one.
        capacity = max(inputs.max_unavailable, 1) * -(-inputs.window_len // denominator)

    result = Derivation(
        inputs, t_rot, t_rot_est, drain, prov, lead_time, age_threshold, chances, capacity, ()
    )
    findings += _deadline_findings(result)
    if inputs.window_len > _ZERO and capacity >= 1:
        findings += _forecast_findings(result)
    return replace(result, findings=tuple(findings))


def _deadline_findings(r: Derivation) -> list[Finding]:
    """Layer 1: can each node get its K chances before its deadline (spec §4.1)?"""
    i = r.inputs
    assert i.expire_after is not None
    e, a, p, k, g = i.expire_after, r.age_threshold, i.period, i.k, r.guaranteed_chances
    out: list[Finding] = []
    if k < 1:
        message = (
            f"minRotationChances is {k}; it must be at least 1, and 2 or more lets a missed "
            "window be made up before the forced expiry."
        )
        out.append(finding(FindingCode.K_BELOW_ONE, message))
    elif k == 1:
        message = (
            "minRotationChances is 1: a single missed window (a failed surge, a freeze, a busy "
            "pool) leaves a node no second chance before its forced expiry. Use 2 or more."
        )
        out.append(finding(FindingCode.K_BELOW_TWO, message))
    if i.override is not None:
        room = e - r.t_rot
        if a <= _ZERO:
            message = (
                f"ageThreshold {fmt(a)} is not positive: every node would be due the moment it "
                'is created. Set a positive ageThreshold, or "auto".'
            )
            out.append(finding(FindingCode.OVERRIDE_NON_POSITIVE, message))
        elif g < 1:
            message = (
                f"with ageThreshold {fmt(a)} a due node is guaranteed G = floor((E - t_rot - A) / "
                f"P) = floor(({fmt(e)} - {fmt(r.t_rot)} - {fmt(a)}) / {fmt(p)}) = {g} window "
                "occurrences before its forced expiry, so it can expire before any window opens. "
                f'Lower ageThreshold to at most {fmt(room - p)}, or use "auto".'
            )
            out.append(finding(FindingCode.OVERRIDE_G_BELOW_ONE, message))
        elif g < k:
            message = (
                f"with ageThreshold {fmt(a)} a due node is guaranteed G = {g} window "
                f"occurrence(s) before its forced expiry, fewer than minRotationChances {k}. "
                f"Lower ageThreshold to at most {fmt(room - k * p)} to keep {k} chances."
            )
            out.append(finding(FindingCode.OVERRIDE_G_BELOW_K, message))
        if _ZERO < a < p:
            out.append(_very_aggressive(r, f"ageThreshold {fmt(a)}"))
    elif a <= _ZERO:
        message = (
            f"A = E - (K·P + t_rot) = {fmt(e)} - ({k}·{fmt(p)} + {fmt(r.t_rot)}) = {fmt(a)}: a "
            f"node is already inside its last {k} window periods when it is created, so the "
            "windows cannot give it its chances. Use a longer expireAfter, more frequent window "
            "occurrences (a smaller P) or a smaller minRotationChances."
        )
        out.append(finding(FindingCode.A_NON_POSITIVE, message))
    elif a < p:
        out.append(_very_aggressive(r, f"A = {fmt(a)}"))
    if i.tgp_was_unset:
        message = (
            "the NodePool sets no terminationGracePeriod, so a drain has no Karpenter deadline; "
            f"fleetgate assumes {fmt(i.tgp)} (t_rot = {fmt(r.t_rot)}). Set "
            "terminationGracePeriod on the NodePool template."
        )
        out.append(finding(FindingCode.TGP_UNSET, message))
    if e + i.tgp > HARD_CAP:
        message = (
            f"expireAfter + terminationGracePeriod = {fmt(e)} + {fmt(i.tgp)} = "
            f"{fmt(e + i.tgp)} is above {fmt(HARD_CAP)} (21d), the limit EKS Auto Mode "
            "enforces. Harmless elsewhere; on Auto Mode shorten one of them."
        )
        out.append(finding(FindingCode.HARD_CAP_EXCEEDED, message))
    if i.retry_backoff < i.ready_timeout:
        message = (
            f"retryBackoff {fmt(i.retry_backoff)} is shorter than readyTimeout "
            f"{fmt(i.ready_timeout)}: a node whose surge just failed comes back before another "
            "surge could even time out. Set retryBackoff to at least readyTimeout."
        )
        out.append(finding(FindingCode.RETRY_BACKOFF_SHORT, message))
    return out


def _very_aggressive(r: Derivation, what: str) -> Finding:
    """AVeryAggressive: nodes fall due within one window period of being created."""
    message = (
        f"{what} is shorter than the window period P = {fmt(r.inputs.period)}: nodes fall due "
        "within one window period of being created, so the pool rotates almost continuously. "
        "Use a longer expireAfter or fewer minRotationChances if that is not intended."
    )
    return finding(FindingCode.A_VERY_AGGRESSIVE, message)


def _forecast_findings(r: Derivation) -> list[Finding]:
    """Layer 2: can the windows keep up with the pool (spec §4.1)? Warnings only."""
    i = r.inputs
    c, a, p, n, k = r.capacity, r.age_threshold, i.period, i.node_count, i.k
    out: list[Finding] = []
    # The reference compares in float64; kept so both agree at the boundary.
    if n > 0 and a > _ZERO and c * a.total_seconds() < n * p.total_seconds():
        message = (
            f"in A = {fmt(a)} (the age at which a node falls due) the windows offer about "
            f"C·A/P = {c}·{fmt(a)}/{fmt(p)} = {c * (a / p):.1f} rotation starts, fewer than the "
            f"N = {n} nodes in the pool, so nodes queue up towards their forced expiry. Widen or "
            "add windows, lower cooldownAfter, or split the pool."
        )
        out.append(finding(FindingCode.THROUGHPUT_BELOW_ARRIVAL, message))
    if n > 0 and k > 0 and n > k * c:
        message = (
            f"N = {n} nodes exceed K·C = {k}·{c} = {k * c} starts in a node's {k} guaranteed "
            "window occurrences: if many nodes fall due together (a pool created at once) some "
            "get fewer than K chances. Widen or add windows, or lower cooldownAfter."
        )
        out.append(finding(FindingCode.THROUGHPUT_BURST_SHORTFALL, message))
    busy = r.t_rot_est + i.cooldown
    if i.idle_gap is not None and busy > i.idle_gap:
        message = (
            f"one rotation plus its cooldown (t_rot_est + cooldownAfter = {fmt(busy)}) is longer "
            f"than the shortest closed gap between windows ({fmt(i.idle_gap)}), so a rotation "
            "started late in one occurrence runs into the next and takes some of its starts: "
            "read K·C as an upper bound."
        )
        out.append(finding(FindingCode.ROTATION_SPANS_NEXT_WINDOW, message))
    return out
