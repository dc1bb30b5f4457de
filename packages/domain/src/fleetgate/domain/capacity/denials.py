"""Why a stage refused: the per-dimension triple, the demand pseudo-dimension, ``demand_only``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from fleetgate.domain.capacity.guards import (
    DEMAND,
    Guard,
    Measure,
    Params,
    Row,
    evaluate,
    truth_of,
    value_of,
)


class Stage(StrEnum):
    """Where in the admission transaction a refusal happened."""

    CLUSTER = "cluster"
    CLAIM = "claim"
    NODE = "node"


@dataclass(frozen=True)
class DimensionDetail:
    """One dimension of a refusal: ``limit``, ``used``, ``requested`` and whether it ``exceeded``.

    For the allocation dimensions ``exceeded = used + requested > limit``. For the demand
    pseudo-dimension ``exceeded = used > limit``: its clause tests the node's existing state, so
    the request's charge is reported for diagnosis but not added (``parts`` then splits ``used``
    into ``cpu_load_1`` and ``expected_demand``, to tell measured load from estimator residue).
    """

    dimension: str
    limit: float
    used: float
    requested: float
    exceeded: bool
    parts: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The wire form: the triple, ``exceeded``, and any parts."""
        out: dict[str, Any] = {
            "dimension": self.dimension,
            "limit": self.limit,
            "used": self.used,
            "requested": self.requested,
            "exceeded": self.exceeded,
        }
        out.update(self.parts)
        return out


@dataclass(frozen=True)
class Denial:
    """A refusal at one stage, with every dimension that stage checks.

    ``cordoned`` is set when the node refused because it is not schedulable, whatever its room.
    """

    stage: Stage
    dimensions: tuple[DimensionDetail, ...]
    cordoned: bool = False

    @cached_property
    def exceeded(self) -> frozenset[str]:
        """The names of the dimensions that exceeded.

        Kept once computed (the value is frozen): a full fleet's refusals are the same remembered
        denials on every request, and the walk, the events and the answer each ask for it.
        """
        return frozenset(d.dimension for d in self.dimensions if d.exceeded)

    @property
    def demand_only(self) -> bool:
        """True when only the demand clause refused: the one refusal the waiver pass may retry.

        An empty exceeded set is never demand-only: it would mean the detail disagrees with the
        guard, which the ledger rules out by reading the detail under the row lock.
        """
        return self.stage is Stage.NODE and not self.cordoned and self.exceeded == {DEMAND}

    def describe(self) -> str:
        """``node refused: cpus (limit 12, used 8, requested 8)``: the exceeded dimensions."""
        shown = [d for d in self.dimensions if d.exceeded]
        if not shown and not self.cordoned:
            shown = list(self.dimensions)
        parts = [
            f"{d.dimension} (limit {d.limit:g}, used {d.used:g}, requested {d.requested:g})"
            for d in shown
        ]
        prefix = f"{self.stage.value} refused"
        if self.cordoned:
            parts.insert(0, "node is cordoned")
        return f"{prefix}: " + ", ".join(parts) if parts else prefix

    def as_dict(self) -> dict[str, Any]:
        """The wire form used in events and API bodies."""
        return {
            "failing_stage": self.stage.value,
            "dimensions": [d.as_dict() for d in self.dimensions],
            "demand_only": self.demand_only,
            "cordoned": self.cordoned,
        }


def _number(expr_value: float | int | None) -> float:
    return 0.0 if expr_value is None else float(expr_value)


def detail(measure: Measure, row: Row, params: Params) -> DimensionDetail | None:
    """The triple for one measure, or ``None`` when the measure does not apply (NULL ``unless``)."""
    if measure.unless_null is not None and value_of(measure.unless_null, row, params) is None:
        return None
    exceeded = truth_of(measure.test(), row, params) is not True
    return DimensionDetail(
        dimension=measure.dimension,
        limit=_number(value_of(measure.limit, row, params)),
        used=_number(value_of(measure.used, row, params)),
        requested=_number(value_of(measure.requested, row, params)),
        exceeded=exceeded,
        parts={name: _number(value_of(e, row, params)) for name, e in measure.parts},
    )


def dimensions_of(guard: Guard, row: Row, params: Params) -> tuple[DimensionDetail, ...]:
    """Every applicable dimension of ``guard`` for this row and request."""
    found = (detail(m, row, params) for m in guard.measures)
    return tuple(d for d in found if d is not None)


def deny(guard: Guard, row: Row, params: Params) -> Denial | None:
    """The denial ``guard`` makes for this row and request, or ``None`` if it admits.

    ``exceeded`` comes from the same predicates the guard is made of, so a refusal always names
    the dimension that refused it.
    """
    verdict = evaluate(guard, row, params)
    if verdict.passed:
        return None
    flags = {f.name for f in guard.flags}
    return Denial(
        stage=Stage(guard.stage),
        dimensions=dimensions_of(guard, row, params),
        cordoned=bool(flags & set(verdict.failed)),
    )


def over_limit(guard: Guard, row_before: Row, params: Params) -> tuple[DimensionDetail, ...]:
    """The dimensions an advisory charge took over its limit (the claim's "over claim" report)."""
    return tuple(d for d in dimensions_of(guard, row_before, params) if d.exceeded)
