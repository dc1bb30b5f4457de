"""Start gates (spec §7.2 step 4): order, boundaries, absent marks, ``until``, each asked
through the one list (``gating.start_gates``) over a pool with no claims."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.domain.rotation.annotations import (
    FREEZE,
    LAST_FAILURE_AT,
    LAST_ROTATION_AT,
    format_timestamp,
)
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.context import MachineConfig, Pass
from fleetgate.domain.rotation.gates import Blocked, GateReason, PoolMarks
from fleetgate.domain.rotation.gating import start_gates
from fleetgate.domain.rotation.policy import ResolvedPolicy, RotationPolicy, Surge
from fleetgate.domain.rotation.windows import Exclusion, MaintenanceWindow

M = timedelta(minutes=1)
DAILY = MaintenanceWindow(
    "UTC", ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), "02:00", "06:00"
)
HOLIDAY = Exclusion(datetime(2024, 12, 24, tzinfo=UTC), datetime(2024, 12, 27, tzinfo=UTC))
POLICY = RotationPolicy(
    maintenance_windows=(DAILY,),
    exclusions=(HOLIDAY,),
    surge=Surge(cooldown_after=10 * M, failure_pause=30 * M),
).resolve(timedelta(hours=1))
IN_WINDOW = datetime(2024, 6, 3, 3, tzinfo=UTC)


MARK_KEYS = {
    "freeze": FREEZE,
    "last_rotation_at": LAST_ROTATION_AT,
    "last_failure_at": LAST_FAILURE_AT,
}


def first_closed(
    now: datetime, annotations: dict[str, str], resolved: ResolvedPolicy = POLICY
) -> Blocked | None:
    """The first closed gate at ``now`` for a claimless pool carrying ``annotations``."""
    obs = PoolObservation(name="p", version="1", expire_after=None, annotations=annotations)
    return start_gates(Pass.begin(obs, resolved, now, MachineConfig())).blocked


def gate(now: datetime, **marks: datetime | None) -> Blocked | None:
    """The first closed gate under POLICY, the pool marked with ``marks``."""
    written = {MARK_KEYS[k]: format_timestamp(v) for k, v in marks.items() if v is not None}
    return first_closed(now, written)


def test_all_open() -> None:
    assert gate(IN_WINDOW) is None


def test_out_of_window_until_the_next_opening() -> None:
    assert gate(datetime(2024, 6, 3, 7, tzinfo=UTC)) == Blocked(
        GateReason.OUT_OF_WINDOW, datetime(2024, 6, 4, 2, tzinfo=UTC)
    )
    assert gate(datetime(2024, 6, 3, 6, tzinfo=UTC)).reason is GateReason.OUT_OF_WINDOW


def test_excluded_until_the_exclusion_ends() -> None:
    assert gate(datetime(2024, 12, 25, 3, tzinfo=UTC)) == Blocked(GateReason.EXCLUDED, HOLIDAY.end)


def test_excluded_is_reported_only_inside_a_window() -> None:
    blocked = gate(datetime(2024, 12, 25, 12, tzinfo=UTC))
    assert blocked is not None and blocked.reason is GateReason.OUT_OF_WINDOW


def test_frozen_is_strict() -> None:
    freeze = IN_WINDOW + 5 * M
    assert gate(IN_WINDOW, freeze=freeze) == Blocked(GateReason.FROZEN, freeze)
    assert gate(freeze, freeze=freeze) is None
    assert gate(IN_WINDOW, freeze=IN_WINDOW - M) is None


def test_cooldown_after_success() -> None:
    last = IN_WINDOW - 9 * M
    assert gate(IN_WINDOW, last_rotation_at=last) == Blocked(
        GateReason.COOLDOWN_AFTER_SUCCESS, last + 10 * M
    )
    assert gate(IN_WINDOW, last_rotation_at=IN_WINDOW - 10 * M) is None


def test_failure_pause() -> None:
    last = IN_WINDOW - 29 * M
    assert gate(IN_WINDOW, last_failure_at=last) == Blocked(GateReason.FAILURE_PAUSE, last + 30 * M)
    assert gate(IN_WINDOW, last_failure_at=IN_WINDOW - 30 * M) is None


def test_first_closed_gate_wins_in_order() -> None:
    marks = {
        "freeze": IN_WINDOW + M,
        "last_rotation_at": IN_WINDOW - M,
        "last_failure_at": IN_WINDOW - M,
    }
    assert gate(IN_WINDOW, **marks).reason is GateReason.FROZEN
    del marks["freeze"]
    assert gate(IN_WINDOW, **marks).reason is GateReason.COOLDOWN_AFTER_SUCCESS
    del marks["last_rotation_at"]
    assert gate(IN_WINDOW, **marks).reason is GateReason.FAILURE_PAUSE
    christmas = datetime(2024, 12, 25, 3, tzinfo=UTC)
    assert gate(christmas, freeze=christmas + M).reason is GateReason.EXCLUDED


def test_zero_cooldown_never_blocks() -> None:
    none = RotationPolicy(
        maintenance_windows=(DAILY,), surge=Surge(cooldown_after=timedelta(0), failure_pause=30 * M)
    ).resolve(timedelta(hours=1))
    marks = {LAST_ROTATION_AT: format_timestamp(IN_WINDOW)}
    assert first_closed(IN_WINDOW, marks, none) is None


def test_reason_codes_are_public_strings() -> None:
    assert [r.value for r in GateReason] == [
        "outOfWindow",
        "excluded",
        "frozen",
        "cooldownAfterSuccess",
        "failurePause",
        "staticNodePool",
        "nodePoolNotReady",
        "disruptionBudget",
        "referenceControllerActive",
        "ledgerCapacity",
    ]


@pytest.mark.parametrize("value", ["", "tomorrow", "2024-06-03", "2024-06-03T03:00:00"])
def test_absent_or_malformed_marks_never_block(value: str) -> None:
    annotations = {FREEZE: value, LAST_ROTATION_AT: value, LAST_FAILURE_AT: value}
    assert PoolMarks.from_annotations(annotations) == PoolMarks()
    assert first_closed(IN_WINDOW, annotations) is None


def test_marks_read_from_annotations() -> None:
    annotations = {
        FREEZE: "2024-06-03T04:00:00Z",
        LAST_ROTATION_AT: "2024-06-03T02:55:00+00:00",
        LAST_FAILURE_AT: "2024-06-03T11:50:00+09:00",
    }
    marks = PoolMarks.from_annotations(annotations)
    assert marks == PoolMarks(
        freeze=datetime(2024, 6, 3, 4, tzinfo=UTC),
        last_rotation_at=datetime(2024, 6, 3, 2, 55, tzinfo=UTC),
        last_failure_at=datetime(2024, 6, 3, 2, 50, tzinfo=UTC),
    )
    blocked = first_closed(IN_WINDOW, annotations)
    assert blocked is not None and blocked.reason is GateReason.FROZEN
