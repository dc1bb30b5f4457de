"""The demand charge, its linear decay and the policy's validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.capacity.demand import (
    DemandPolicy,
    age_seconds,
    charge,
    decayed_total,
    remaining,
)


def test_defaults_are_the_spec_constants() -> None:
    assert DemandPolicy() == DemandPolicy(0.75, 0.6, 600.0)
    assert DemandPolicy().enabled and not DemandPolicy(target_load=0).enabled


def test_the_charge_is_cpus_times_demand_per_vcpu() -> None:
    assert charge(4, 0.6) == pytest.approx(2.4)
    assert charge(0, 0.6) == 0.0
    with pytest.raises(ValueError, match="cpus"):
        charge(-1, 0.6)


def test_the_charge_decays_linearly_to_zero() -> None:
    assert remaining(2.4, 0, 600) == 2.4
    assert remaining(2.4, 300, 600) == pytest.approx(1.2)
    assert remaining(2.4, 600, 600) == 0.0
    assert remaining(2.4, 6000, 600) == 0.0


def test_a_negative_age_counts_as_new_and_zero_decay_disables() -> None:
    assert remaining(2.4, -30, 600) == 2.4
    assert remaining(2.4, 0, 0) == 0.0


@given(st.floats(0, 100), st.floats(0, 10_000), st.floats(0, 10_000), st.floats(1, 3600))
def test_remaining_is_bounded_and_never_grows_with_age(
    initial: float, a: float, b: float, decay: float
) -> None:
    early, late = sorted((a, b))
    assert 0.0 <= remaining(initial, late, decay) <= remaining(initial, early, decay) <= initial


def test_decayed_total_sums_each_placement() -> None:
    assert decayed_total([(2.4, 300), (1.2, 0), (6.0, 900)], 600) == pytest.approx(2.4)


def test_age_is_signed_seconds() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    assert age_seconds(t0, t0 + timedelta(minutes=2)) == 120.0
    assert age_seconds(t0 + timedelta(seconds=5), t0) == -5.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"demand_per_vcpu": -0.1}, "demand_per_vcpu"),
        ({"demand_per_vcpu": 1e-300}, "demand_per_vcpu"),
        ({"decay_seconds": -1}, "decay_seconds"),
        ({"target_load": float("nan")}, "target_load"),
        ({"target_load": "0.75"}, "target_load"),
    ],
)
def test_a_bad_policy_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DemandPolicy(**kwargs)  # type: ignore[arg-type]
