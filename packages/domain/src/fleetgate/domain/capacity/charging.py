"""What one guarded charge of an admission came to, as the stores report it to the domain.

A store (the SQL ledger's transaction, the in-memory fake's dicts) carries out each charge of
an admission under its guard and reports it in these terms; the admission's sequence
(``capacity.admission``) decides what follows from them. They hold no decision themselves,
except :func:`charged_claim`: what a claim charge did (its overrun, its overage), from the
claim's counters after it, which every store reports the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from fleetgate.domain.capacity.claims import ClaimCharge
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, over_limit
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.guards import CLAIM_GUARD
from fleetgate.domain.capacity.model import AdmitRequest
from fleetgate.domain.capacity.overage import overage_increase

_Row = TypeVar("_Row")


@dataclass(frozen=True)
class Charged(Generic[_Row]):
    """One guarded charge: refused (``denial``, nothing changed) or made.

    ``bypassed`` is the refusal an unenforced charge overrode; ``row`` the charged row after the
    charge where the store has it at hand (None: the store reads it when asked).
    """

    denial: Denial | None = None
    bypassed: Denial | None = None
    row: _Row | None = None


@dataclass(frozen=True)
class ClaimCounters:
    """A namespace's active claim after a charge: its id, its limit, its usage."""

    id: str
    limit: Resources
    used: Resources


@dataclass(frozen=True)
class ChargedClaim:
    """What charging the namespace's claim did."""

    claim_id: str
    over_limit: tuple[DimensionDetail, ...]
    overage: Resources
    bypassed: Denial | None


def charged_claim(
    after: ClaimCounters, request: AdmitRequest, rule: ClaimCharge, bypassed: Denial | None
) -> ChargedClaim:
    """What charging the claim did, from its counters after the charge (overrun, overage).

    The usage before is the usage after less the charge (floored), so a store need not keep
    the row from before the charge it has just made.
    """
    x = request.resources
    used_before = after.used.minus_floored(x)
    over: tuple[DimensionDetail, ...] = ()
    if rule.reports_over_limit:
        before: dict[str, object] = {f"limit_{d}": after.limit.get(d) for d in ALLOCATION}
        before.update({f"used_{d}": used_before.get(d) for d in ALLOCATION})
        over = over_limit(CLAIM_GUARD, before, request.guard_params())
    return ChargedClaim(
        claim_id=after.id,
        over_limit=over,
        overage=overage_increase(after.limit, used_before, x),
        bypassed=bypassed,
    )


__all__ = ["Charged", "ChargedClaim", "ClaimCounters", "charged_claim"]
