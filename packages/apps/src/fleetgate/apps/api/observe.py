"""Counting and timing admissions from the route, so the placement service stays unaware of them."""

from __future__ import annotations

import time
from collections.abc import Awaitable

from fleetgate.apps.api.metrics import (
    ADMITTED,
    ERROR,
    NO_STAGE,
    OVER_CLAIM,
    REFUSED,
    WAIVED,
    ApiMetrics,
    refusal_stage,
)
from fleetgate.apps.services.placement import PlaceOutcome
from fleetgate.domain.capacity.errors import LedgerUnavailable


def admission_labels(outcome: PlaceOutcome) -> tuple[str, str]:
    """The ``(stage, outcome)`` labels of a decided admission (a replay counts as admitted)."""
    if outcome.placement is None:
        return refusal_stage(d.stage.value for d in outcome.denials.values()), REFUSED
    if outcome.replayed:  # it carries the first admission's facts, but nothing was waived now
        return NO_STAGE, ADMITTED
    if outcome.claim_over_limit:
        return NO_STAGE, OVER_CLAIM
    if outcome.waived:
        return NO_STAGE, WAIVED
    return NO_STAGE, ADMITTED


async def observed_admission(
    metrics: ApiMetrics, admission: Awaitable[PlaceOutcome], namespace: str
) -> PlaceOutcome:
    """Await ``admission``, counting its outcome (or ``error``) and its latency."""
    start = time.perf_counter()
    try:
        outcome = await admission
    except Exception as exc:
        # The database failing is the error operators page on; a bad forced node is the caller's.
        stage = "ledger" if isinstance(exc, LedgerUnavailable) else "request"
        metrics.count_admission(namespace, stage, ERROR, time.perf_counter() - start)
        raise
    stage, label = admission_labels(outcome)
    metrics.count_admission(namespace, stage, label, time.perf_counter() - start)
    return outcome
