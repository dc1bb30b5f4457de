"""Kubernetes quantities <-> milli-units."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetgate.adapters.karpenter.quantity import format_quantity, parse_quantity, parse_resources


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("2", 2000),
        ("1.5", 1500),
        ("0.1", 100),
        (".5", 500),
        ("1Ki", 1024 * 1000),
        ("1Gi", 2**30 * 1000),
        ("14Gi", 14 * 2**30 * 1000),
        ("1k", 1_000_000),
        ("1M", 10**9),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("-1", -1000),
        ("1n", 1),  # MilliValue rounds a finer value up
        ("1500u", 2),
    ],
)
def test_parses_every_suffix_exactly(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


def test_integers_are_whole_units() -> None:
    assert parse_quantity(3) == 3000


@pytest.mark.parametrize("bad", ["", "abc", "1Qi", "1.2.3", "Gi", "1 Gi"])
def test_rejects_what_is_not_a_quantity(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(bad)


@given(st.integers(min_value=0, max_value=10**15))
def test_formatting_round_trips(milli: int) -> None:
    assert parse_quantity(format_quantity(milli)) == milli


def test_whole_units_format_without_suffix() -> None:
    assert format_quantity(2000) == "2"
    assert format_quantity(2500) == "2500m"


def test_resource_maps_name_the_bad_field() -> None:
    assert parse_resources({"cpu": "1", "memory": "1Ki"}, "x") == {"cpu": 1000, "memory": 1024000}
    with pytest.raises(ValueError, match=r"nodepool a: spec.limits.cpu: invalid quantity"):
        parse_resources({"cpu": "lots"}, "nodepool a: spec.limits")
