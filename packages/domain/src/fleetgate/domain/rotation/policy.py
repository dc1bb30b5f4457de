"""The RotationPolicy (spec §2): its fields and defaults, validation, and per-pool resolution.

A policy holds what the operator wrote, already typed (durations as ``timedelta``) but not yet
judged: explicit ``0m`` or ``-1m`` survive construction so that :meth:`RotationPolicy.validate`
can reject them by name (reference issue #30). :meth:`RotationPolicy.resolve` then fills in the
values that depend on the NodePool (its terminationGracePeriod) and on other fields
(``failurePause = max(10m, cooldownAfter)``), giving everything the derivation, selection and the
start gates read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from functools import cached_property, lru_cache

from fleetgate.domain.rotation.constants import BUFFER, DRAIN_FALLBACK, FAILURE_PAUSE_FLOOR
from fleetgate.domain.rotation.derive import (
    Derivation,
    DeriveInputs,
    derive,
    resolve_drain_estimate,
    resolve_provisioning_estimate,
)
from fleetgate.domain.rotation.fields import (
    MAX_ROTATION_CHANCES,
    MAX_UNAVAILABLE,
    MIN_ROTATION_CHANCES,
)
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.selection import SelectionRules, lead_time_for
from fleetgate.domain.rotation.windows import (
    Exclusion,
    MaintenanceWindow,
    Schedule,
    WindowShape,
    exclusion_errors,
    window_errors,
)

__all__ = [
    "API_VERSIONS",
    "DEFAULT_REQUIRED_KEYS",
    "FLEETGATE_API_VERSION",
    "KIND",
    "REFERENCE_API_VERSION",
    "ForcefulFallback",
    "MatchNodeRequirements",
    "PolicyError",
    "PrePull",
    "ResolvedPolicy",
    "RotationPolicy",
    "Surge",
]

FLEETGATE_API_VERSION = "fleetgate.io/v1alpha1"
REFERENCE_API_VERSION = "noderotation.io/v1alpha1"
API_VERSIONS = (FLEETGATE_API_VERSION, REFERENCE_API_VERSION)
KIND = "RotationPolicy"
DEFAULT_REQUIRED_KEYS = (
    "topology.kubernetes.io/zone",
    "kubernetes.io/arch",
    "karpenter.sh/capacity-type",
)
_ZERO = timedelta(0)


class PolicyError(ValueError):
    """A policy that cannot be used; ``errors`` lists every problem as ``field.path: reason``."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = tuple(errors)
        super().__init__("; ".join(self.errors))


@dataclass(frozen=True)
class MatchNodeRequirements:
    """Node label keys the surge node must (``required``) or should (``preferred``) share."""

    required: tuple[str, ...] = DEFAULT_REQUIRED_KEYS
    preferred: tuple[str, ...] = ()


@dataclass(frozen=True)
class ForcefulFallback:
    """ADR-0001: rotate without a surge when the deadline is too close for one (opt-in)."""

    enabled: bool = False


@dataclass(frozen=True)
class Surge:
    """``spec.surge``: how one make-before-break rotation runs."""

    max_unavailable: int = 1
    ready_timeout: timedelta = timedelta(minutes=15)
    cooldown_after: timedelta = timedelta(minutes=10)
    failure_pause: timedelta | None = None
    """None resolves to max(10m, cooldownAfter)."""
    retry_backoff: timedelta = timedelta(minutes=30)
    drain_estimate: timedelta | None = None
    """None: the derivation uses min(tGP, 10m)."""
    provisioning_estimate: timedelta | None = None
    """None: the derivation uses min(readyTimeout, 5m)."""
    match_node_requirements: MatchNodeRequirements = MatchNodeRequirements()
    forceful_fallback: ForcefulFallback = ForcefulFallback()


@dataclass(frozen=True)
class PrePull:
    """``spec.prePull``: reserved; must stay disabled in v1."""

    enabled: bool = False


@dataclass(frozen=True)
class RotationPolicy:
    """A RotationPolicy as written (typed, defaulted, not yet validated)."""

    name: str = ""
    node_pool_selector: LabelSelector | None = field(default_factory=LabelSelector)
    """None only when a manifest omitted it (a validation error)."""
    age_threshold: timedelta | None = None
    """An explicit age threshold; None means ``auto``."""
    min_rotation_chances: int = 2
    maintenance_windows: tuple[MaintenanceWindow, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    surge: Surge = Surge()
    pre_pull: PrePull = PrePull()
    rotate_drifted: bool = False
    """``spec.rotateDrifted.enabled``: rotate claims Karpenter reports ``Drifted`` (by default
    they are left to Karpenter, which replaces them itself)."""
    ignore_disruption_budgets: bool = False
    """``spec.ignoreDisruptionBudgets.enabled``: start rotations even while the NodePool's
    disruption budgets that apply to every reason allow none (by default they are honoured)."""
    api_version: str = FLEETGATE_API_VERSION
    generation: int | None = field(default=None, compare=False)
    """``metadata.generation`` of a policy read from the cluster (None from a file). Left out
    of equality and hashing: it is bookkeeping for the status, not part of what the policy says."""

    def __hash__(self) -> int:
        # A policy keys the caches every pass consults (its resolution, its schedule): hashing
        # each nested field on every look-up was a visible part of a pass, and a frozen value's
        # hash never changes. Over the compared fields, as the generated hash would be.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            self.__dict__["_hash"] = cached
        return cached

    def validate(self) -> list[str]:
        """Every problem with the policy, each as ``spec.field.path: reason`` (empty if valid)."""
        errors: list[str] = []
        if self.node_pool_selector is None:
            errors.append("spec.nodePoolSelector: is required ({} selects every NodePool)")
        else:
            errors += self.node_pool_selector.errors("spec.nodePoolSelector")
        if self.age_threshold is not None and self.age_threshold <= _ZERO:
            errors.append('spec.ageThreshold: must be greater than 0 (or "auto")')
        if self.min_rotation_chances < MIN_ROTATION_CHANCES:
            errors.append(f"spec.minRotationChances: must be at least {MIN_ROTATION_CHANCES}")
        elif self.min_rotation_chances > MAX_ROTATION_CHANCES:
            # K times the window period must stay a duration (999999999 overflowed one).
            errors.append(f"spec.minRotationChances: must be at most {MAX_ROTATION_CHANCES}")
        if not self.maintenance_windows:
            errors.append("spec.maintenanceWindows: must have at least one entry")
        for index, window in enumerate(self.maintenance_windows):
            errors += window_errors(window, f"spec.maintenanceWindows[{index}]")
        for index, exclusion in enumerate(self.exclusions):
            errors += exclusion_errors(exclusion, f"spec.exclusions[{index}]")
        errors += _surge_errors(self.surge)
        if self.pre_pull.enabled:
            errors.append("spec.prePull.enabled: must be false in v1alpha1")
        return errors

    def schedule(self) -> Schedule:
        """The compiled windows and exclusions; raises :class:`PolicyError` when invalid."""
        try:
            return Schedule.compile(self.maintenance_windows, self.exclusions)
        except ValueError as exc:
            raise PolicyError(getattr(exc, "errors", (str(exc),))) from exc

    def resolve(self, template_tgp: timedelta | None = None) -> ResolvedPolicy:
        """Runtime values for one NodePool (spec §2.2); raises :class:`PolicyError` if invalid.

        ``template_tgp`` is the NodePool template's terminationGracePeriod (None when unset).
        """
        errors = self.validate()
        if errors:
            raise PolicyError(errors)
        schedule = self.schedule()
        shape = schedule.shape()
        surge = self.surge
        tgp_unset = template_tgp is None
        tgp = DRAIN_FALLBACK if template_tgp is None else template_tgp
        failure_pause = surge.failure_pause
        if failure_pause is None:
            failure_pause = max(FAILURE_PAUSE_FLOOR, surge.cooldown_after)
        return ResolvedPolicy(
            written=self,
            schedule=schedule,
            shape=shape,
            tgp=tgp,
            tgp_was_unset=tgp_unset,
            # Spec §12.1: the reference drops the buffer when tGP is unset (1h, not 1h2m) at
            # runtime only. We keep it, so the runtime bound is the one Derive promised; the
            # surge-less race then starts 2m earlier, the side that avoids a forced expiry.
            drain_bound=tgp + BUFFER,
            failure_pause=failure_pause,
            lead_time_base=self.min_rotation_chances * shape.period + surge.ready_timeout + BUFFER,
        )


def _surge_errors(surge: Surge) -> list[str]:
    """Every problem in ``spec.surge``."""
    errors: list[str] = []
    path = "spec.surge"
    if surge.max_unavailable != MAX_UNAVAILABLE:
        errors.append(
            f"{path}.maxUnavailable: must be {MAX_UNAVAILABLE} (rotation is serial per NodePool)"
        )
    positive = {
        "readyTimeout": surge.ready_timeout,
        "failurePause": surge.failure_pause,
        "retryBackoff": surge.retry_backoff,
        "drainEstimate": surge.drain_estimate,
        "provisioningEstimate": surge.provisioning_estimate,
    }
    for name, value in positive.items():
        if value is not None and value <= _ZERO:
            errors.append(f"{path}.{name}: must be greater than 0")
    if surge.cooldown_after < _ZERO:
        errors.append(f"{path}.cooldownAfter: must not be negative (0 is allowed)")
    return errors


@dataclass(frozen=True)
class ResolvedPolicy:
    """A valid policy resolved for one NodePool: everything the rotation rules read."""

    written: RotationPolicy
    """The policy as written (the manifest's values, defaulted), before resolution."""
    schedule: Schedule
    shape: WindowShape
    tgp: timedelta
    """The pool template's terminationGracePeriod, or the 1h fallback."""
    tgp_was_unset: bool
    drain_bound: timedelta
    """tGP (or the 1h fallback) + Buffer: the longest a drain may take (stuck drain, race)."""
    failure_pause: timedelta
    lead_time_base: timedelta
    """K·P + readyTimeout + Buffer (tGP is added per claim by :meth:`lead_time_for`)."""

    # --- the policy's own values, for readers that only hold the resolved view ---------------

    @property
    def k(self) -> int:
        """minRotationChances."""
        return self.written.min_rotation_chances

    @property
    def override(self) -> timedelta | None:
        """The explicit ageThreshold, or None for ``auto``."""
        return self.written.age_threshold

    @property
    def ready_timeout(self) -> timedelta:
        """surge.readyTimeout."""
        return self.written.surge.ready_timeout

    @property
    def cooldown_after(self) -> timedelta:
        """surge.cooldownAfter."""
        return self.written.surge.cooldown_after

    @property
    def retry_backoff(self) -> timedelta:
        """surge.retryBackoff (the base of the per-claim backoff)."""
        return self.written.surge.retry_backoff

    @property
    def max_unavailable(self) -> int:
        """surge.maxUnavailable (always 1 once valid)."""
        return self.written.surge.max_unavailable

    @property
    def forceful_fallback(self) -> bool:
        """surge.forcefulFallback.enabled."""
        return self.written.surge.forceful_fallback.enabled

    @property
    def required_keys(self) -> tuple[str, ...]:
        """surge.matchNodeRequirements.required (the default keys when empty)."""
        return self.written.surge.match_node_requirements.required or DEFAULT_REQUIRED_KEYS

    @property
    def preferred_keys(self) -> tuple[str, ...]:
        """surge.matchNodeRequirements.preferred."""
        return self.written.surge.match_node_requirements.preferred

    @property
    def drain_estimate(self) -> timedelta:
        """The drain estimate the forecast uses: explicit (clamped to tGP) or min(tGP, 10m)."""
        explicit = self.written.surge.drain_estimate
        return resolve_drain_estimate(explicit, self.tgp, self.tgp_was_unset)[0]

    @property
    def provisioning_estimate(self) -> timedelta:
        """The provisioning estimate used: explicit (clamped) or min(readyTimeout, 5m)."""
        explicit = self.written.surge.provisioning_estimate
        return resolve_provisioning_estimate(explicit, self.ready_timeout)[0]

    # --- derived ----------------------------------------------------------------------------

    def lead_time_for(self, claim_tgp: timedelta | None) -> timedelta:
        """Lead time of a claim with its own tGP: base + (claim tGP, or the 1h fallback)."""
        return lead_time_for(self.lead_time_base, claim_tgp)

    @cached_property
    def selection(self) -> SelectionRules:
        """The values candidate selection reads (one value per resolved policy, so a census
        keyed on it compares by identity)."""
        return SelectionRules(
            lead_time_base=self.lead_time_base,
            retry_backoff=self.retry_backoff,
            override=self.override,
            rotate_drifted=self.written.rotate_drifted,
        )

    def derive_inputs(self, expire_after: timedelta | None, node_count: int = 0) -> DeriveInputs:
        """The derivation's inputs for a pool with template ``expire_after`` (None = Never)."""
        surge = self.written.surge
        return DeriveInputs(
            expire_after=expire_after,
            tgp=self.tgp,
            tgp_was_unset=self.tgp_was_unset,
            period=self.shape.period,
            window_len=self.shape.shortest,
            idle_gap=self.shape.gap,
            ready_timeout=surge.ready_timeout,
            cooldown=surge.cooldown_after,
            retry_backoff=surge.retry_backoff,
            k=self.k,
            max_unavailable=surge.max_unavailable,
            node_count=node_count,
            override=self.override,
            drain_estimate=surge.drain_estimate,
            provisioning_estimate=surge.provisioning_estimate,
        )

    def derive(self, expire_after: timedelta | None, node_count: int = 0) -> Derivation:
        """Derive for a pool with template ``expire_after`` and ``node_count`` claims."""
        # Asked every pass: remembered here by the two inputs that vary, so a pass builds and
        # hashes no DeriveInputs (the shared cache serves resolutions of equal policies).
        memo: dict[tuple[timedelta | None, int], Derivation] = self.__dict__.setdefault(
            "_derivations", {}
        )
        key = (expire_after, node_count)
        found = memo.get(key)
        if found is None:
            if len(memo) >= _DERIVATIONS_KEPT:
                memo.clear()
            found = memo[key] = _derived(self.derive_inputs(expire_after, node_count))
        return found


_DERIVATIONS_KEPT = 64
# Every pass derives for its pool, and the inputs change only with the policy, the template or
# the claim count: the same immutable Derivation serves them all.
_derived = lru_cache(maxsize=256)(derive)
