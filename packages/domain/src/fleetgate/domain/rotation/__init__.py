"""Maintenance-window node rotation: policy, windows, derivation, selection, gates, the machine.

The public names of the rule modules are re-exported here; each module documents its part:
``policy`` (fields, validation, resolve), ``manifest`` (policy from a parsed manifest),
``windows`` (membership, P/D/gap, concrete intervals), ``derive`` + ``findings`` (t_rot, A, G, C
and the finding codes), ``selection`` (eligibility, census, order), ``gates`` (start gates),
``annotations`` (every key rotation state lives in) and ``constants``.
"""

from fleetgate.domain.rotation.derive import Derivation, DeriveInputs, derive
from fleetgate.domain.rotation.findings import Finding, FindingCode, Severity, Side
from fleetgate.domain.rotation.gates import (
    NO_ELIGIBLE_CLAIM,
    Blocked,
    GateReason,
    PoolMarks,
    check_gates,
    start_gate,
)
from fleetgate.domain.rotation.manifest import policy_from_manifest
from fleetgate.domain.rotation.policy import (
    ForcefulFallback,
    MatchNodeRequirements,
    PolicyError,
    PrePull,
    ResolvedPolicy,
    RotationPolicy,
    Surge,
)
from fleetgate.domain.rotation.selection import (
    Bucket,
    Census,
    ClaimView,
    SelectionRules,
    classify,
    deadline,
    is_opted_out,
    is_short_lead,
    is_triggered,
    opted_out_claims,
    order,
    pick,
    retry_backoff,
    take_census,
)
from fleetgate.domain.rotation.selector import LabelSelector, SelectorRequirement
from fleetgate.domain.rotation.windows import (
    Exclusion,
    Interval,
    MaintenanceWindow,
    Schedule,
    WindowError,
    WindowShape,
)

__all__ = [
    "NO_ELIGIBLE_CLAIM",
    "Blocked",
    "Bucket",
    "Census",
    "ClaimView",
    "Derivation",
    "DeriveInputs",
    "Exclusion",
    "Finding",
    "FindingCode",
    "ForcefulFallback",
    "GateReason",
    "Interval",
    "LabelSelector",
    "MaintenanceWindow",
    "MatchNodeRequirements",
    "PolicyError",
    "PoolMarks",
    "PrePull",
    "ResolvedPolicy",
    "RotationPolicy",
    "Schedule",
    "SelectionRules",
    "SelectorRequirement",
    "Severity",
    "Side",
    "Surge",
    "WindowError",
    "WindowShape",
    "check_gates",
    "classify",
    "deadline",
    "derive",
    "is_opted_out",
    "is_short_lead",
    "is_triggered",
    "opted_out_claims",
    "order",
    "pick",
    "policy_from_manifest",
    "retry_backoff",
    "start_gate",
    "take_census",
]
