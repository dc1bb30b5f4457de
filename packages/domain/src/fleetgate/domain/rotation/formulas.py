"""How the derivation describes itself: its inputs as one record, its default rules as text.

``fleetgate check`` (and the API's rotation check) and the simulator both report the inputs the
derivation read and the rules that filled in what a policy left unset. Both read them here, so
the keys are the same everywhere (the simulator result's ``inputs``, rotation spec §9) and the
text always states the constants the derivation really uses.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.rotation.constants import (
    BUFFER,
    DRAIN_ESTIMATE_DEFAULT,
    FAILURE_PAUSE_FLOOR,
    PROVISIONING_ESTIMATE_DEFAULT,
)
from fleetgate.domain.rotation.derive import DeriveInputs

__all__ = [
    "DRAIN_ESTIMATE_RULE",
    "FAILURE_PAUSE_RULE",
    "PROVISIONING_ESTIMATE_RULE",
    "T_ROT_RULE",
    "drain_estimate_rule",
    "failure_pause_rule",
    "input_record",
    "provisioning_estimate_rule",
]

#: What an unset ``surge.failurePause`` resolves to.
FAILURE_PAUSE_RULE = f"max({fmt(FAILURE_PAUSE_FLOOR)}, cooldownAfter)"
#: The drain estimate when ``surge.drainEstimate`` is unset.
DRAIN_ESTIMATE_RULE = f"min(tGP, {fmt(DRAIN_ESTIMATE_DEFAULT)})"
#: The provisioning estimate when ``surge.provisioningEstimate`` is unset.
PROVISIONING_ESTIMATE_RULE = f"min(readyTimeout, {fmt(PROVISIONING_ESTIMATE_DEFAULT)})"
#: The deadline bound of one rotation.
T_ROT_RULE = "readyTimeout + tGP + Buffer"


def failure_pause_rule(cooldown: timedelta) -> str:
    """``max(10m, cooldownAfter) = max(10m, <cooldown>)``."""
    return f"{FAILURE_PAUSE_RULE} = max({fmt(FAILURE_PAUSE_FLOOR)}, {fmt(cooldown)})"


def drain_estimate_rule(tgp: timedelta) -> str:
    """``min(tGP, 10m) = min(<tGP>, 10m)``."""
    return f"{DRAIN_ESTIMATE_RULE} = min({fmt(tgp)}, {fmt(DRAIN_ESTIMATE_DEFAULT)})"


def provisioning_estimate_rule(ready_timeout: timedelta) -> str:
    """``min(readyTimeout, 5m) = min(<readyTimeout>, 5m)``."""
    return (
        f"{PROVISIONING_ESTIMATE_RULE} = "
        f"min({fmt(ready_timeout)}, {fmt(PROVISIONING_ESTIMATE_DEFAULT)})"
    )


def input_record(
    inputs: DeriveInputs,
    failure_pause: timedelta,
    duration: Callable[[timedelta], object],
    never: object = None,
) -> dict[str, object]:
    """The inputs under their one set of keys, each duration written by ``duration``.

    ``never`` stands for an ``expireAfter`` of Never; an undefined gap or an ``auto`` age
    threshold is ``None``.
    """
    i = inputs

    def maybe(value: timedelta | None) -> object:
        return None if value is None else duration(value)

    return {
        "e": never if i.expire_after is None else duration(i.expire_after),
        "tgp": duration(i.tgp),
        "tgpFallback": i.tgp_was_unset,
        "p": duration(i.period),
        "windowLen": duration(i.window_len),
        "idleGap": maybe(i.idle_gap),
        "buffer": duration(BUFFER),
        "readyTimeout": duration(i.ready_timeout),
        "cooldownAfter": duration(i.cooldown),
        "failurePause": duration(failure_pause),
        "retryBackoff": duration(i.retry_backoff),
        "k": i.k,
        "m": i.max_unavailable,
        "n": i.node_count,
        "ageThresholdOverride": maybe(i.override),
    }
