"""Allocation dimensions, Resources arithmetic and node limits from overcommit ratios."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.capacity.dimensions import (
    ALLOCATION,
    Capacity,
    Overcommit,
    Resources,
    node_limits,
)
from tests.strategies import small_resources


def test_the_three_dimensions_in_their_reporting_order() -> None:
    assert ALLOCATION == ("cpus", "memory_mb", "disk_gb")


def test_default_ratios_are_the_spec_defaults() -> None:
    assert Overcommit() == Overcommit(cpu=3.0, memory=1.0, disk=1.0)


def test_limits_are_capacity_times_ratio_rounded_down() -> None:
    # The spec's reconcile vector: 14 schedulable threads at 3.0 admit 42 vCPUs.
    assert node_limits(Capacity(14, 64243, 766), Overcommit()) == Resources(42, 64243, 766)
    assert node_limits(Capacity(3, 1001, 101), Overcommit(2.5, 1.25, 0.5)) == Resources(7, 1251, 50)


@given(st.integers(0, 512), st.floats(0.01, 32.0))
def test_a_limit_never_exceeds_the_exact_product(threads: int, ratio: float) -> None:
    limit = node_limits(Capacity(threads, 0, 0), Overcommit(cpu=ratio)).cpus
    assert limit <= threads * ratio < limit + 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpus": -1}, "cpus: must not be negative"),
        ({"memory_mb": 1.5}, "memory_mb: must be an integer"),
        ({"disk_gb": True}, "disk_gb: must be an integer"),
    ],
)
def test_bad_amounts_are_refused_naming_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Resources(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "3"])
def test_ratios_must_be_positive_numbers(bad: object) -> None:
    with pytest.raises(ValueError, match="cpu_overcommit"):
        Overcommit(cpu=bad)  # type: ignore[arg-type]


def test_capacity_refuses_negative_threads() -> None:
    with pytest.raises(ValueError, match="threads"):
        Capacity(-2, 1, 1)


@given(small_resources(), small_resources())
def test_minus_floored_never_goes_negative_and_undoes_plus(a: Resources, b: Resources) -> None:
    diff = a.minus_floored(b)
    assert all(diff.get(d) >= 0 for d in ALLOCATION)
    assert a.plus(b).minus_floored(b) == a


def test_get_refuses_an_unknown_dimension() -> None:
    with pytest.raises(ValueError, match="dimension: unknown"):
        Resources().get("gpus")
