"""Estimates checked against observed rotations (issue 7 item 3)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetgate.domain.rotation.estimates import (
    KEEP,
    OBSERVED_DRAIN,
    append_sample,
    check_estimate,
    moving_estimate,
    read_samples,
)

M = timedelta(minutes=1)


def test_samples_round_trip_and_keep_only_the_last_few() -> None:
    value = ""
    for i in range(1, KEEP + 3):
        value = append_sample({OBSERVED_DRAIN: value}, OBSERVED_DRAIN, i * M)
    assert read_samples({OBSERVED_DRAIN: value}, OBSERVED_DRAIN) == [
        i * M for i in range(3, KEEP + 3)
    ]


def test_garbage_samples_are_skipped() -> None:
    assert read_samples({OBSERVED_DRAIN: "5m,bogus,,7m"}, OBSERVED_DRAIN) == [5 * M, 7 * M]


def test_the_moving_estimate_is_the_median_of_the_recent_window() -> None:
    assert moving_estimate([]) is None
    assert moving_estimate([100 * M, 1 * M, 2 * M, 3 * M, 4 * M, 50 * M]) == 3 * M


def test_no_verdict_before_enough_rotations() -> None:
    assert check_estimate("drain", 10 * M, False, [60 * M, 60 * M]) is None


def test_an_estimate_far_below_reality_is_flagged_naming_the_observed_value() -> None:
    check = check_estimate("drain", 10 * M, True, [40 * M, 45 * M, 50 * M])
    assert check is not None and check.disagrees and check.observed == 45 * M
    text = check.message()
    assert "45m" in text and "surge.drainEstimate" in text
    assert "lower" not in text  # a deadline is never suggested to be lowered


def test_an_estimate_far_above_reality_is_flagged_too() -> None:
    check = check_estimate("provisioning", 5 * M, False, [1 * M, 2 * M, 2 * M])
    assert check is not None and check.disagrees
    assert "surge.provisioningEstimate" in check.message() and "defaulted" in check.message()


def test_within_a_factor_of_two_is_agreement() -> None:
    check = check_estimate("drain", 10 * M, True, [19 * M, 6 * M, 12 * M])
    assert check is not None and not check.disagrees


def test_an_unknown_kind_is_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="kind"):
        check_estimate("tgp", M, True, [M, M, M])
