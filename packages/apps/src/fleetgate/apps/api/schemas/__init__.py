"""The API's request and response bodies (pydantic), one module per resource.

Every bound that makes bad input a 422 lives in ``common``; this package re-exports every body so
routes import from ``fleetgate.apps.api.schemas``. Nothing here imports FastAPI (the typed
client reads these bodies); the paging plumbing the routes share is ``fleetgate.apps.api.paging``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from fleetgate.apps.api.schemas.admin import (
    ClaimDriftBody,
    ClusterDriftBody,
    ClusterResources,
    EventBody,
    NewTokenBody,
    NodeDriftBody,
    NodeResources,
    ReconcileBody,
    ResourcesBody,
    SummaryBody,
    TokenBody,
)
from fleetgate.apps.api.schemas.claims import (
    ClaimBody,
    ClaimCreate,
    ClaimPatch,
    ClaimSeconds,
    seconds_until,
)
from fleetgate.apps.api.schemas.common import (
    MAX_CLAIM_SECONDS,
    MAX_EVENTS,
    MAX_LABELS,
    MAX_LOAD,
    UNSUPPORTED_MEDIA_TYPE,
    WHOLE_NUMBER,
    Amount,
    Amounts,
    CandidateBody,
    CapacityRefusal,
    Cpus,
    DimensionBody,
    DimensionsRefusal,
    ErrorBody,
    EventKind,
    HealthBody,
    LabelKey,
    LabelValue,
    NamespaceName,
    NodeName,
    ObjectId,
    PoolName,
    RequestBody,
    RequestId,
    Threads,
)
from fleetgate.apps.api.schemas.nodes import (
    MetricsPut,
    NodeBody,
    NodePut,
)
from fleetgate.apps.api.schemas.placements import (
    DryRunBody,
    PlacementBody,
    PlacementCreate,
    PlacementSummary,
)
from fleetgate.apps.api.schemas.status import PoolRotationBody
from fleetgate.domain.capacity.dimensions import MAX_AMOUNT, MAX_CPUS, MAX_THREADS

if TYPE_CHECKING:
    from fleetgate.apps.api.schemas.rotation import (
        MAX_POLICY_TEXT,
        FindingBody,
        RotationCheckBody,
        RotationCheckRequest,
        RotationSimulateRequest,
    )

#: Bodies loaded on first use: the policy and fleet models cost more to build than all the
#: others, and the typed client (``fleetgate nodes`` & co.) never uses them.
_LAZY = {
    name: "rotation"
    for name in (
        "MAX_POLICY_TEXT",
        "FindingBody",
        "RotationCheckBody",
        "RotationCheckRequest",
        "RotationSimulateRequest",
    )
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "MAX_AMOUNT",
    "MAX_CLAIM_SECONDS",
    "MAX_CPUS",
    "MAX_EVENTS",
    "MAX_LABELS",
    "MAX_LOAD",
    "MAX_POLICY_TEXT",
    "MAX_THREADS",
    "UNSUPPORTED_MEDIA_TYPE",
    "WHOLE_NUMBER",
    "Amount",
    "Amounts",
    "CandidateBody",
    "CapacityRefusal",
    "ClaimBody",
    "ClaimCreate",
    "ClaimDriftBody",
    "ClaimPatch",
    "ClaimSeconds",
    "ClusterDriftBody",
    "ClusterResources",
    "Cpus",
    "DimensionBody",
    "DimensionsRefusal",
    "DryRunBody",
    "ErrorBody",
    "EventBody",
    "EventKind",
    "FindingBody",
    "HealthBody",
    "LabelKey",
    "LabelValue",
    "MetricsPut",
    "NamespaceName",
    "NewTokenBody",
    "NodeBody",
    "NodeDriftBody",
    "NodeName",
    "NodePut",
    "NodeResources",
    "ObjectId",
    "PlacementBody",
    "PlacementCreate",
    "PlacementSummary",
    "PoolName",
    "PoolRotationBody",
    "ReconcileBody",
    "RequestBody",
    "RequestId",
    "ResourcesBody",
    "RotationCheckBody",
    "RotationCheckRequest",
    "RotationSimulateRequest",
    "SummaryBody",
    "Threads",
    "TokenBody",
    "seconds_until",
]
