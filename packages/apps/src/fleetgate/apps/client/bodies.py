"""The API's answers as the typed client reads them: plain frozen dataclasses of the wire format.

The server's pydantic bodies (``fleetgate.apps.api.schemas``) are the definition of each shape;
these are the client's reading of them, so ``fleetgate nodes`` & co. import neither pydantic nor
the schemas (docs/performance.md, CLI start-up). ``tests/apps/client/test_bodies.py`` checks every
class here against the served OpenAPI document (each field, its type, whether it may be null), so
the two cannot drift apart. Each body keeps the JSON object it was read from (:attr:`Wire.wire`):
``-o json`` and ``-o yaml`` print the API's own answer, field for field.

A date-time reads as pydantic reads it: aware, its zone named ``UTC`` or ``+01:00``.
"""

from __future__ import annotations

import sys
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta, timezone
from functools import cache
from types import NoneType, UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

W = TypeVar("W", bound="Wire")


class WireError(ValueError):
    """An answer that does not have the shape this client knows (an API of another version)."""


@dataclass(frozen=True)
class Wire:
    """A body of the API; ``wire`` is the JSON object it was read from."""

    wire: dict[str, Any] = field(repr=False, compare=False, kw_only=True)

    @classmethod
    def from_wire(cls: type[W], data: Any) -> W:
        """Read ``data`` (decoded JSON) as this body; WireError names what does not fit."""
        return _read(cls, data, cls.__name__)

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]:
        """The API's JSON object (the name pydantic bodies use, so either prints alike)."""
        return self.wire


@dataclass(frozen=True)
class Amounts(Wire):
    cpus: int
    memory_mb: int
    disk_gb: int


@dataclass(frozen=True)
class DimensionBody(Wire):
    dimension: str
    limit: float
    used: float
    requested: float
    exceeded: bool


@dataclass(frozen=True)
class CandidateBody(Wire):
    node: str
    stage: str
    demand_only: bool
    cordoned: bool
    dimensions: list[DimensionBody]


@dataclass(frozen=True)
class NodeBody(Wire):
    name: str
    pool: str
    labels: dict[str, str]
    threads: int
    memory_mb: int
    disk_gb: int
    limits: Amounts
    used: Amounts
    expected_demand: float
    cpu_load_1: float | None
    cpu_schedulable: int | None
    schedulable: bool
    updated_at: datetime
    metrics_at: datetime | None


@dataclass(frozen=True)
class PlacementSummary(Wire):
    id: str
    namespace: str
    node: str
    cpus: int
    memory_mb: int
    disk_gb: int
    request_id: str | None
    claim_id: str | None
    admitted_at: datetime


@dataclass(frozen=True)
class PlacementBody(PlacementSummary):
    demand_waived: bool
    over_claim: bool
    over_claim_dimensions: list[DimensionBody] = field(default_factory=list)


@dataclass(frozen=True)
class DryRunBody(Wire):
    namespace: str
    node: str
    cpus: int
    memory_mb: int
    disk_gb: int
    demand_waived: bool
    over_claim: bool
    dry_run: bool = True
    over_claim_dimensions: list[DimensionBody] = field(default_factory=list)
    replayed: bool = False
    refused: list[CandidateBody] = field(default_factory=list)


@dataclass(frozen=True)
class ClaimBody(Wire):
    id: str
    namespace: str
    cpus: int
    memory_mb: int
    disk_gb: int
    used: Amounts
    overage: Amounts
    state: Literal["active", "expired"]
    expires_at: datetime
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class TokenBody(Wire):
    id: str
    namespace: str
    created_at: datetime
    revoked_at: datetime | None
    active: bool


@dataclass(frozen=True)
class NewTokenBody(TokenBody):
    secret: str


@dataclass(frozen=True)
class EventBody(Wire):
    id: int
    at: datetime
    kind: str
    subject: str
    namespace: str | None
    level: str
    data: dict[str, Any]


@dataclass(frozen=True)
class ClusterResources(Wire):
    total: Amounts
    claimed: Amounts
    unclaimed_used: Amounts
    unclaimed: list[DimensionBody]
    updated_at: datetime


@dataclass(frozen=True)
class NodeResources(Wire):
    name: str
    pool: str
    schedulable: bool
    limits: Amounts
    used: Amounts
    expected_demand: float
    cpu_load_1: float | None
    cpu_schedulable: int | None
    dimensions: list[DimensionBody]


@dataclass(frozen=True)
class ResourcesBody(Wire):
    cluster: ClusterResources
    nodes: list[NodeResources]


@dataclass(frozen=True)
class PoolRotationBody(Wire):
    pool: str
    nodes: int
    governance: str
    policy: str | None
    window_open: bool
    next_window_start: datetime | None
    next_window_end: datetime | None
    age_threshold: str | None
    age_threshold_seconds: float | None
    guaranteed_chances: int | None
    throughput_capacity: int | None
    rotating: str | None
    reason: str | None
    gate_until: datetime | None
    findings: list[str]
    ledger_hold: dict[str, Any] | None = None
    """Gate 9 (ledgerCapacity): the held node, its placements, the shortfall."""


#: Every body of this module, by name (the drift test walks them).
BODIES: tuple[type[Wire], ...] = (
    Amounts, DimensionBody, CandidateBody, NodeBody, PlacementSummary, PlacementBody, DryRunBody,
    ClaimBody, TokenBody, NewTokenBody, EventBody, ClusterResources, NodeResources,
    ResourcesBody, PoolRotationBody,
)  # fmt: skip


_HINTS: dict[type[Wire], dict[str, Any]] = {}


def hints(cls: type[Wire]) -> dict[str, Any]:
    """The wire fields of ``cls`` and their types (``wire`` itself left out)."""
    if cls not in _HINTS:
        found = get_type_hints(cls, vars(sys.modules[__name__]))
        _HINTS[cls] = {f.name: found[f.name] for f in fields(cls) if f.name != "wire"}
    return _HINTS[cls]


def _read(cls: type[W], data: Any, where: str) -> W:
    if not isinstance(data, dict):
        raise WireError(f"{where}: expected an object, got {type(data).__name__}")
    values: dict[str, Any] = {}
    for name, hint in hints(cls).items():
        if name in data:
            values[name] = _value(hint, data[name], f"{where}.{name}")
        elif name not in _defaulted(cls):
            raise WireError(f"{where}.{name}: missing")
    return cls(**values, wire=data)


def _defaulted(cls: type[Wire]) -> set[str]:
    return {f.name for f in fields(cls) if (f.default, f.default_factory) != (MISSING, MISSING)}


def _value(hint: Any, value: Any, where: str) -> Any:
    origin = get_origin(hint)
    if origin is UnionType or origin is Union:  # X | None
        if value is None:
            return None
        (inner,) = (a for a in get_args(hint) if a is not NoneType)
        return _value(inner, value, where)
    if origin is list:
        (item,) = get_args(hint)
        return [_value(item, v, f"{where}[{i}]") for i, v in enumerate(_typed(list, value, where))]
    if origin is dict:
        return _typed(dict, value, where)
    if origin is Literal:
        if value not in get_args(hint):
            raise WireError(f"{where}: {value!r} is not one of {get_args(hint)}")
        return value
    if isinstance(hint, type) and issubclass(hint, Wire):
        return _read(hint, value, where)
    if hint is datetime:
        return read_datetime(_typed(str, value, where), where)
    if hint is float:
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return _typed(float, value, where)
    if hint is int and isinstance(value, bool):
        raise WireError(f"{where}: expected int, got bool")
    return _typed(hint, value, where)


def _typed(kind: type, value: Any, where: str) -> Any:
    if not isinstance(value, kind):
        raise WireError(f"{where}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def read_datetime(text: str, where: str = "date-time") -> datetime:
    """An RFC 3339 instant as pydantic reads it: ``Z`` or ``+00:00`` is the zone ``UTC``, any
    other offset a zone named by it (``+01:00``), so ``%Z`` prints what it printed before."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise WireError(f"{where}: {text!r} is not a date-time") from None
    offset = at.utcoffset()
    if offset is None:
        return at
    return at.replace(tzinfo=_zone(offset))


@cache
def _zone(offset: timedelta) -> timezone:
    if not offset:
        return timezone(offset, "UTC")
    sign, rest = ("-", -offset) if offset < timedelta(0) else ("+", offset)
    hours, seconds = divmod(int(rest.total_seconds()), 3600)
    minutes, seconds = divmod(seconds, 60)
    name = f"{sign}{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")
    return timezone(offset, name)
