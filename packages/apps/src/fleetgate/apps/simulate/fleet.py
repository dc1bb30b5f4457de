"""The simulator's fleet file: the pool's template and its nodes, listed or generated.

```yaml
fleet:
  pool: workers                 # optional, default "default"
  labels: {team: web}           # the NodePool's labels (the policy's selector must match them)
  expireAfter: 14d              # template expireAfter (required, > 0)
  terminationGracePeriod: 1h    # template tGP (optional: unset)
  nodes:                        # either list the nodes ...
    - {name: a, createdAt: "2024-01-01T00:00:00Z", expireAfter: 14d, terminationGracePeriod: 1h}
  generate: {count: 12, spread: 14d}   # ... or generate them, ages spread evenly over `spread`
  replicas: 3                   # Karpenter's own states (optional): spec.replicas (a static pool),
  ready: false                  # the NodePool's Ready condition, and spec.limits (nodes only)
  limits: {nodes: 12}
  budgets:                      # spec.disruption.budgets (optional; absent: the CRD's 10%)
    - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h}   # no disruption in office hours
    - {nodes: "0", reasons: [Drifted]}                           # Karpenter never acts on drift
  # and per listed node: drifted: true, disruptedAt: <instant> (Karpenter replaces it itself
  # then), doNotDisrupt: "true" or a duration (a Pod on it opts out, started at the start)
  podDisruptionBudget:          # a PDB over the workload (one Pod a node; optional):
    maxUnavailable: 0           # minAvailable or maxUnavailable, a count or "N%", and
    unhealthyPodEvictionPolicy: IfHealthyBudget   # or AlwaysAllow (the default: IfHealthyBudget)
env:                            # how long things really take (default: the policy's estimates)
  provisioning: 3m
  drain: 10m
```
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fleetgate.apps.ledgerfile import FleetLedger, LedgerFileError, fleet_ledger_of
from fleetgate.domain.durations import parse_duration
from fleetgate.domain.rotation.annotations import parse_timestamp
from fleetgate.domain.rotation.budgets import (
    DEFAULT_BUDGETS,
    Budget,
    BudgetError,
    budgets_from_spec,
)
from fleetgate.domain.rotation.labelselector import LabelSelector


class FleetError(ValueError):
    """The fleet file is invalid; the message names the field and the reason."""


@dataclass(frozen=True)
class FleetNode:
    """One node of the fleet. None for ``expire_after`` / ``tgp`` means "the template's"."""

    name: str
    created_at: datetime
    expire_after: timedelta | None = None
    tgp: timedelta | None = None
    drifted: bool = False
    disrupted_at: datetime | None = None
    """When Karpenter starts replacing the node itself (None: never)."""
    do_not_disrupt: str | None = None
    """``karpenter.sh/do-not-disrupt`` of a Pod on the node: "true" or a duration."""


@dataclass(frozen=True)
class FleetBudget:
    """A PodDisruptionBudget over the fleet's workload: exactly one of the two bounds."""

    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_policy: str = "IfHealthyBudget"


@dataclass(frozen=True)
class Fleet:
    """A pool template and its initial nodes, plus the environment's real durations."""

    expire_after: timedelta
    tgp: timedelta | None = None
    pool: str = "default"
    labels: Mapping[str, str] = field(default_factory=dict)
    nodes: tuple[FleetNode, ...] = ()
    env_provisioning: timedelta | None = None
    env_drain: timedelta | None = None
    replicas: int | None = None
    """``spec.replicas``: set, the pool is static."""
    ready: bool = True
    """The NodePool's Ready condition."""
    node_limit: int | None = None
    """``spec.limits.nodes`` (a count of nodes; None: no limit)."""
    budgets: tuple[Budget, ...] = DEFAULT_BUDGETS
    """``spec.disruption.budgets`` (absent: the CRD's default, 10% for every reason)."""
    pod_budget: FleetBudget | None = None
    """A PodDisruptionBudget over the workload Pods (None: none guards them)."""
    ledger: FleetLedger | None = None
    """Placements per node and claims: a capacity-aware run (``simulate/capacity.py``)."""


def labels_for(selector: LabelSelector | None) -> dict[str, str]:
    """Labels a generated NodePool needs for ``selector`` to select it (``NotIn`` and
    ``DoesNotExist`` need none): ``fleetgate up``'s sample pools and the What-if page's fleet."""
    if selector is None:
        return {}
    labels = dict(selector.match_labels)
    for requirement in selector.match_expressions:
        if requirement.operator == "In" and requirement.values:
            labels.setdefault(requirement.key, requirement.values[0])
        elif requirement.operator == "Exists":
            labels.setdefault(requirement.key, "true")
    return labels


def _duration(value: Any, path: str, *, positive: bool = False) -> timedelta:
    if not isinstance(value, str):
        raise FleetError(f"{path}: must be a duration string such as 14d or 1h30m")
    try:
        parsed = parse_duration(value)
    except ValueError as exc:
        raise FleetError(f"{path}: {exc}") from exc
    if positive and parsed <= timedelta(0):
        raise FleetError(f"{path}: must be greater than 0")
    if parsed < timedelta(0):
        raise FleetError(f"{path}: must not be negative")
    return parsed


def _optional(data: Mapping[str, Any], key: str, path: str, **kw: bool) -> timedelta | None:
    value = data.get(key)
    return None if value is None else _duration(value, f"{path}.{key}", **kw)


def parse_instant(value: Any, path: str) -> datetime:
    """An RFC3339 instant (YAML may already have made it a datetime)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise FleetError(f"{path}: must carry a timezone (e.g. a trailing Z)")
        return value
    parsed = parse_timestamp(value) if isinstance(value, str) else None
    if parsed is None:
        raise FleetError(f"{path}: must be an RFC3339 instant such as 2024-01-01T00:00:00Z")
    return parsed


def load_fleet(document: Any, start: datetime) -> Fleet:
    """Read a fleet document; ``start`` is where generated node ages are measured from."""
    if not isinstance(document, Mapping):
        raise FleetError("fleet file: must hold a mapping")
    unknown = set(document) - {"fleet", "env"}
    if unknown:
        raise FleetError(f"fleet file: unknown keys {sorted(unknown)} (expected fleet, env)")
    spec = document.get("fleet")
    if not isinstance(spec, Mapping):
        raise FleetError("fleet: required, a mapping")
    allowed = {"pool", "labels", "expireAfter", "terminationGracePeriod", "nodes", "generate"}
    allowed |= {"replicas", "ready", "limits", "budgets", "podDisruptionBudget", "ledger"}
    unknown = set(spec) - allowed
    if unknown:
        raise FleetError(f"fleet: unknown keys {sorted(unknown)}")
    if "expireAfter" not in spec:
        raise FleetError("fleet.expireAfter: required (the NodePool template's expireAfter)")
    expire_after = _duration(spec["expireAfter"], "fleet.expireAfter", positive=True)
    tgp = _optional(spec, "terminationGracePeriod", "fleet", positive=True)
    labels = spec.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise FleetError("fleet.labels: must map strings to strings")
    pool = spec.get("pool", "default")
    if not isinstance(pool, str) or not pool:
        raise FleetError("fleet.pool: must be a non-empty string")
    if ("nodes" in spec) == ("generate" in spec):
        raise FleetError("fleet: give exactly one of nodes (a list) or generate (count, spread)")
    nodes = (
        _listed(spec["nodes"], start) if "nodes" in spec else _generated(spec["generate"], start)
    )
    env = document.get("env") or {}
    if not isinstance(env, Mapping) or set(env) - {"provisioning", "drain"}:
        raise FleetError("env: must be a mapping with only provisioning and drain")
    ready = spec.get("ready", True)
    if not isinstance(ready, bool):
        raise FleetError("fleet.ready: must be true or false")
    limits = spec.get("limits") or {}
    if not isinstance(limits, Mapping) or set(limits) - {"nodes"}:
        raise FleetError("fleet.limits: must be a mapping with only nodes")
    node_limit = _count(limits, "nodes", "fleet.limits")
    try:
        budgets = budgets_from_spec(spec.get("budgets"), "fleet.budgets")
    except BudgetError as exc:
        raise FleetError(str(exc)) from None
    return Fleet(
        budgets=budgets,
        replicas=_count(spec, "replicas", "fleet"),
        ready=ready,
        node_limit=node_limit,
        expire_after=expire_after,
        tgp=tgp,
        pool=pool,
        labels=dict(labels),
        nodes=nodes,
        env_provisioning=_optional(env, "provisioning", "env"),
        env_drain=_optional(env, "drain", "env"),
        pod_budget=_pod_budget(spec.get("podDisruptionBudget"), "fleet.podDisruptionBudget"),
        ledger=_ledger(spec.get("ledger"), nodes),
    )


def _ledger(spec: Any, nodes: tuple[FleetNode, ...]) -> FleetLedger | None:
    try:
        return fleet_ledger_of(spec, [n.name for n in nodes], parse_instant)
    except LedgerFileError as exc:
        raise FleetError(str(exc)) from None


_POLICIES = ("IfHealthyBudget", "AlwaysAllow")


def _pod_budget(value: Any, path: str) -> FleetBudget | None:
    """The workload's PodDisruptionBudget, as the API server admits one."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise FleetError(f"{path}: must be a mapping")
    unknown = set(value) - {"minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy"}
    if unknown:
        raise FleetError(f"{path}: unknown keys {sorted(unknown)}")
    if ("minAvailable" in value) == ("maxUnavailable" in value):
        raise FleetError(f"{path}: give exactly one of minAvailable or maxUnavailable")
    key = "minAvailable" if "minAvailable" in value else "maxUnavailable"
    bound = value[key]
    whole = isinstance(bound, int) and not isinstance(bound, bool) and 0 <= bound <= 10_000
    percent = isinstance(bound, str) and re.fullmatch(r"(100|[1-9]?[0-9])%", bound) is not None
    if not (whole or percent):
        raise FleetError(
            f'{path}.{key}: must be a count from 0 to 10000 or a percentage "0%"-"100%"'
        )
    policy = value.get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
    if policy not in _POLICIES:
        raise FleetError(
            f"{path}.unhealthyPodEvictionPolicy: must be one of {', '.join(_POLICIES)}"
        )
    return FleetBudget(
        min_available=bound if key == "minAvailable" else None,
        max_unavailable=bound if key == "maxUnavailable" else None,
        unhealthy_policy=policy,
    )


def _count(data: Mapping[str, Any], key: str, path: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10_000:
        raise FleetError(f"{path}.{key}: must be an integer from 0 to 10000")
    return value


def _karpenter_state(item: Mapping[str, Any], path: str, start: datetime) -> dict[str, Any]:
    """A listed node's Karpenter-side state: drifted, disruptedAt, doNotDisrupt."""
    drifted = item.get("drifted", False)
    if not isinstance(drifted, bool):
        raise FleetError(f"{path}.drifted: must be true or false")
    disrupted_at = None
    if item.get("disruptedAt") is not None:
        disrupted_at = parse_instant(item["disruptedAt"], f"{path}.disruptedAt")
        if disrupted_at < start:
            raise FleetError(f"{path}.disruptedAt: must not be before the simulation start")
    opt_out = item.get("doNotDisrupt")
    if opt_out is True or opt_out == "true":
        opt_out = "true"  # YAML's true: the annotation's string "true"
    elif opt_out is not None:
        if not isinstance(opt_out, str):
            raise FleetError(f'{path}.doNotDisrupt: must be true or a duration such as "2h"')
        _duration(opt_out, f"{path}.doNotDisrupt", positive=True)
    return {"drifted": drifted, "disrupted_at": disrupted_at, "do_not_disrupt": opt_out}


_NODE_KEYS = {"name", "createdAt", "expireAfter", "terminationGracePeriod"}
_NODE_KEYS |= {"drifted", "disruptedAt", "doNotDisrupt"}


def _listed(items: Any, start: datetime) -> tuple[FleetNode, ...]:
    if not isinstance(items, list) or not items:
        raise FleetError("fleet.nodes: must be a non-empty list")
    nodes, seen = [], set()
    for i, item in enumerate(items):
        path = f"fleet.nodes[{i}]"
        if not isinstance(item, Mapping):
            raise FleetError(f"{path}: must be a mapping")
        unknown = set(item) - _NODE_KEYS
        if unknown:
            raise FleetError(f"{path}: unknown keys {sorted(unknown)}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise FleetError(f"{path}.name: required, a non-empty string")
        if name in seen:
            raise FleetError(f"{path}.name: {name!r} appears twice")
        seen.add(name)
        if "createdAt" not in item:
            raise FleetError(f"{path}.createdAt: required")
        created = parse_instant(item["createdAt"], f"{path}.createdAt")
        if created > start:
            raise FleetError(f"{path}.createdAt: must not be after the simulation start")
        nodes.append(
            FleetNode(
                name=name,
                created_at=created,
                expire_after=_optional(item, "expireAfter", path, positive=True),
                tgp=_optional(item, "terminationGracePeriod", path, positive=True),
                **_karpenter_state(item, path, start),
            )
        )
    return tuple(nodes)


def _generated(spec: Any, start: datetime) -> tuple[FleetNode, ...]:
    if not isinstance(spec, Mapping) or set(spec) - {"count", "spread", "prefix"}:
        raise FleetError("fleet.generate: must be a mapping with count, spread and prefix")
    count = spec.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 10_000:
        raise FleetError("fleet.generate.count: must be an integer from 1 to 10000")
    spread = _duration(spec.get("spread", "0s"), "fleet.generate.spread")
    prefix = spec.get("prefix", "node")
    if not isinstance(prefix, str) or not prefix:
        raise FleetError("fleet.generate.prefix: must be a non-empty string")
    width = len(str(count))
    # Ages evenly spread over [0, spread): the first node is the oldest, the last is brand new.
    return tuple(
        FleetNode(
            name=f"{prefix}-{i + 1:0{width}d}", created_at=start - spread * (count - 1 - i) / count
        )
        for i in range(count)
    )
