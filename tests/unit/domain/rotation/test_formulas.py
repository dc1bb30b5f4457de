"""The derivation describes itself: one input record, and rule text built from its constants."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.rotation.constants import (
    BUFFER,
    DRAIN_ESTIMATE_DEFAULT,
    FAILURE_PAUSE_FLOOR,
    PROVISIONING_ESTIMATE_DEFAULT,
)
from fleetgate.domain.rotation.derive import DeriveInputs
from fleetgate.domain.rotation.formulas import (
    drain_estimate_rule,
    failure_pause_rule,
    input_record,
    provisioning_estimate_rule,
)

M = timedelta(minutes=1)
#: The simulator result's ``inputs`` (rotation spec §9), plus failurePause, n and retryBackoff.
KEYS = [
    "e", "tgp", "tgpFallback", "p", "windowLen", "idleGap", "buffer", "readyTimeout",
    "cooldownAfter", "failurePause", "retryBackoff", "k", "m", "n", "ageThresholdOverride",
]  # fmt: skip


def inputs(**changes: object) -> DeriveInputs:
    base: dict[str, object] = {
        "expire_after": 14 * 24 * 60 * M, "tgp": 60 * M, "tgp_was_unset": False,
        "period": 96 * 60 * M, "window_len": 240 * M, "idle_gap": None, "ready_timeout": 15 * M,
        "cooldown": 10 * M, "retry_backoff": 30 * M, "k": 2,
    }  # fmt: skip
    return DeriveInputs(**{**base, **changes})  # type: ignore[arg-type]


def test_the_record_has_one_key_set_and_writes_durations_as_asked() -> None:
    record = input_record(inputs(), 10 * M, fmt)
    assert list(record) == KEYS
    assert record["e"] == fmt(14 * 24 * 60 * M) and record["buffer"] == fmt(BUFFER)
    assert record["idleGap"] is None
    seconds = input_record(inputs(expire_after=None), 10 * M, lambda d: d.total_seconds())
    assert seconds["e"] is None and seconds["tgp"] == 3600.0
    assert input_record(inputs(expire_after=None), 10 * M, fmt, never="Never")["e"] == "Never"


def test_the_rules_state_the_constants_the_derivation_uses() -> None:
    assert failure_pause_rule(5 * M) == (
        f"max({fmt(FAILURE_PAUSE_FLOOR)}, cooldownAfter) = max({fmt(FAILURE_PAUSE_FLOOR)}, 5m)"
    )
    assert drain_estimate_rule(60 * M).endswith(f"= min(1h, {fmt(DRAIN_ESTIMATE_DEFAULT)})")
    assert provisioning_estimate_rule(15 * M).endswith(
        f"= min(15m, {fmt(PROVISIONING_ESTIMATE_DEFAULT)})"
    )
