"""The schedule derivation (spec §4, §5): reference vectors, schedule_test.go pins, boundaries."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.rotation.derive import (
    DeriveInputs,
    derive,
    resolve_drain_estimate,
    resolve_provisioning_estimate,
)
from fleetgate.domain.rotation.findings import (
    BUDGET_CODES,
    CLASSIFICATION,
    POOL_STATE_CODES,
    Severity,
    Side,
)
from fleetgate.domain.rotation.findings import FindingCode as F
from tests.strategies import derive_inputs, minutes

S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)
D = timedelta(days=1)

# schedule_test.go's fixtures.
BASE_AUTO = DeriveInputs(
    expire_after=336 * H,
    tgp=1 * H,
    tgp_was_unset=False,
    period=96 * H,
    window_len=4 * H,
    idle_gap=68 * H,
    ready_timeout=15 * M,
    cooldown=10 * M,
    retry_backoff=30 * M,
    k=2,
    max_unavailable=1,
    node_count=0,
)
PINNED = replace(BASE_AUTO, tgp=75 * M, provisioning_estimate=15 * M, drain_estimate=75 * M)
LAYER_ONE = {
    F.K_BELOW_ONE,
    F.K_BELOW_TWO,
    F.A_NON_POSITIVE,
    F.A_VERY_AGGRESSIVE,
    F.OVERRIDE_NON_POSITIVE,
    F.OVERRIDE_G_BELOW_ONE,
    F.OVERRIDE_G_BELOW_K,
    F.TGP_UNSET,
    F.HARD_CAP_EXCEEDED,
    F.RETRY_BACKOFF_SHORT,
    F.NO_WINDOWS,
}


def codes(inputs: DeriveInputs) -> set[F]:
    """The finding codes the derivation reports."""
    return set(derive(inputs).codes)


def deadline_side(inputs: DeriveInputs) -> dict[F, Severity]:
    """The deadline-side findings as code -> severity."""
    return {f.code: f.severity for f in derive(inputs).findings if f.side is Side.DEADLINE}


# --- reference vectors (spec §5) --------------------------------------------------------------


def test_v1_worked_example() -> None:
    r = derive(replace(BASE_AUTO, expire_after=14 * D))
    assert r.t_rot == H + 17 * M
    assert r.lead_time == 193 * H + 17 * M
    assert r.age_threshold == 142 * H + 43 * M
    assert r.guaranteed_chances == 2
    assert (r.provisioning_estimate, r.drain_estimate, r.t_rot_est) == (5 * M, 10 * M, 15 * M)
    assert r.capacity == 10
    assert r.findings == ()


def test_v2_stock_auto_mode() -> None:
    r = derive(replace(BASE_AUTO, expire_after=14 * D, tgp=24 * H))
    assert (r.t_rot, r.age_threshold, r.guaranteed_chances) == (
        24 * H + 17 * M,
        119 * H + 43 * M,
        2,
    )
    assert (r.t_rot_est, r.capacity, r.findings) == (15 * M, 10, ())


@pytest.mark.parametrize(
    ("override", "chances", "expected"),
    [
        (50 * H, 2, {F.A_VERY_AGGRESSIVE}),
        (200 * H, 1, {F.OVERRIDE_G_BELOW_K}),
        (300 * H, 0, {F.OVERRIDE_G_BELOW_ONE}),
        (400 * H, -1, {F.OVERRIDE_G_BELOW_ONE}),  # true floor, not truncation
    ],
)
def test_v4_overrides(override: timedelta, chances: int, expected: set[F]) -> None:
    r = derive(replace(BASE_AUTO, override=override))
    assert BASE_AUTO.expire_after - r.t_rot == 334 * H + 43 * M
    assert (r.age_threshold, r.guaranteed_chances, set(r.codes)) == (override, chances, expected)


def test_v4_negative_override_reports_only_override_non_positive() -> None:
    assert derive(replace(BASE_AUTO, override=-H)).codes == (F.OVERRIDE_NON_POSITIVE,)


V10 = replace(BASE_AUTO, expire_after=14 * D, tgp=24 * H, node_count=3, retry_backoff=10 * M)


@pytest.mark.parametrize(
    ("estimate", "t_rot_est", "capacity", "warned"),
    [
        (None, 15 * M, 10, False),
        (M, 6 * M, 15, False),
        (10 * M, 15 * M, 10, False),
        (H, 65 * M, 4, False),
        (25 * H, 24 * H + 5 * M, 1, True),
    ],
)
def test_v10_drain_estimate_containment(
    estimate: timedelta | None, t_rot_est: timedelta, capacity: int, warned: bool
) -> None:
    r = derive(replace(V10, drain_estimate=estimate))
    assert (r.t_rot_est, r.capacity) == (t_rot_est, capacity)
    assert (F.DRAIN_ESTIMATE_ABOVE_TGP in r.codes) is warned
    assert (r.t_rot, r.age_threshold, r.guaranteed_chances) == (
        24 * H + 17 * M,
        119 * H + 43 * M,
        2,
    )
    assert deadline_side(replace(V10, drain_estimate=estimate)) == {
        F.RETRY_BACKOFF_SHORT: Severity.WARN
    }


@pytest.mark.parametrize(
    ("estimate", "resolved", "capacity", "warned"),
    [
        (None, 5 * M, 10, False),
        (M, M, 12, False),
        (5 * M, 5 * M, 10, False),
        (15 * M, 15 * M, 7, False),
        (20 * M, 15 * M, 7, True),
    ],
)
def test_provisioning_estimate_containment(
    estimate: timedelta | None, resolved: timedelta, capacity: int, warned: bool
) -> None:
    base = replace(BASE_AUTO, tgp=24 * H, node_count=3, retry_backoff=10 * M)
    r = derive(replace(base, provisioning_estimate=estimate))
    assert (r.provisioning_estimate, r.t_rot_est, r.capacity) == (
        resolved,
        resolved + 10 * M,
        capacity,
    )
    assert (F.PROVISIONING_ESTIMATE_ABOVE_READY_TIMEOUT in r.codes) is warned
    assert (r.t_rot, r.age_threshold, r.guaranteed_chances) == (
        24 * H + 17 * M,
        119 * H + 43 * M,
        2,
    )
    assert deadline_side(replace(base, provisioning_estimate=estimate)) == {
        F.RETRY_BACKOFF_SHORT: Severity.WARN
    }


def test_containment_with_tgp_unset_keeps_an_explicit_estimate() -> None:
    base = replace(BASE_AUTO, tgp_was_unset=True)
    unset, explicit = derive(base), derive(replace(base, drain_estimate=25 * H))
    assert (unset.drain_estimate, explicit.drain_estimate) == (10 * M, 25 * H)
    assert F.DRAIN_ESTIMATE_ABOVE_TGP not in explicit.codes
    assert (explicit.t_rot, explicit.age_threshold) == (unset.t_rot, unset.age_threshold)
    assert deadline_side(base) == deadline_side(replace(base, drain_estimate=25 * H))


# --- schedule_test.go pins (spec §4.3) --------------------------------------------------------


def test_weekly_only_schedule_is_fatal() -> None:
    r = derive(replace(BASE_AUTO, period=168 * H, idle_gap=164 * H))
    assert r.age_threshold < timedelta(0) and F.A_NON_POSITIVE in r.codes and r.fatal


def test_a_exactly_zero_is_fatal_and_not_aggressive() -> None:
    r = derive(replace(BASE_AUTO, expire_after=193 * H + 17 * M))
    assert r.age_threshold == timedelta(0)
    assert F.A_NON_POSITIVE in r.codes and F.A_VERY_AGGRESSIVE not in r.codes


def test_k_floor() -> None:
    assert F.K_BELOW_ONE in codes(replace(BASE_AUTO, k=0))
    k_one = codes(replace(BASE_AUTO, k=1))
    assert F.K_BELOW_TWO in k_one and F.A_NON_POSITIVE not in k_one


def test_aggressive_warn() -> None:
    r = derive(replace(BASE_AUTO, expire_after=240 * H))
    assert r.age_threshold == 46 * H + 43 * M and r.codes == (F.A_VERY_AGGRESSIVE,)


def test_tgp_unset_warn() -> None:
    r = derive(replace(BASE_AUTO, tgp_was_unset=True))
    assert r.t_rot == 77 * M and r.codes == (F.TGP_UNSET,)


def test_hard_cap() -> None:
    over = derive(replace(BASE_AUTO, expire_after=20 * D, tgp=2 * D))
    assert F.HARD_CAP_EXCEEDED in over.codes and over.age_threshold == 239 * H + 43 * M
    assert F.HARD_CAP_EXCEEDED not in codes(replace(BASE_AUTO, expire_after=20 * D, tgp=D))
    assert F.HARD_CAP_EXCEEDED not in codes(BASE_AUTO)


@pytest.mark.parametrize(
    ("inputs", "capacity"),
    [
        (replace(PINNED, window_len=200 * M), 2),
        (replace(PINNED, window_len=201 * M), 3),
        (replace(PINNED, window_len=M), 1),
        (replace(BASE_AUTO, idle_gap=None, window_len=25 * M), 1),
        (replace(BASE_AUTO, idle_gap=None, window_len=26 * M), 2),
        (replace(PINNED, max_unavailable=2), 6),
        (replace(PINNED, max_unavailable=0), 3),
    ],
)
def test_ceil_counts_the_near_edge_start(inputs: DeriveInputs, capacity: int) -> None:
    assert derive(inputs).capacity == capacity


def test_pinned_estimate_fixture() -> None:
    r = derive(PINNED)
    assert (r.t_rot, r.t_rot_est, r.age_threshold, r.capacity) == (
        92 * M,
        90 * M,
        142 * H + 28 * M,
        3,
    )


def test_degenerate_window_len_skips_layer_two() -> None:
    r = derive(replace(BASE_AUTO, window_len=timedelta(0), node_count=100))
    assert r.capacity == 0 and not {f for f in r.findings if f.side is Side.FORECAST}


def test_retry_backoff_short_warn() -> None:
    assert codes(replace(BASE_AUTO, retry_backoff=10 * M)) == {F.RETRY_BACKOFF_SHORT}


def test_carry_over() -> None:
    assert F.ROTATION_SPANS_NEXT_WINDOW in codes(replace(PINNED, idle_gap=99 * M))
    assert F.ROTATION_SPANS_NEXT_WINDOW not in codes(replace(PINNED, idle_gap=100 * M))
    counts_cooldown = replace(PINNED, cooldown=30 * M, retry_backoff=30 * M, idle_gap=100 * M)
    assert F.ROTATION_SPANS_NEXT_WINDOW in codes(counts_cooldown)
    assert F.ROTATION_SPANS_NEXT_WINDOW not in codes(replace(BASE_AUTO, idle_gap=None, tgp=30 * D))
    no_burst = codes(replace(PINNED, idle_gap=M, node_count=6))
    assert F.ROTATION_SPANS_NEXT_WINDOW in no_burst and F.THROUGHPUT_BURST_SHORTFALL not in no_burst


def test_carry_over_uses_the_estimate_not_tgp() -> None:
    day_tgp = replace(BASE_AUTO, tgp=24 * H, idle_gap=12 * H)
    assert F.ROTATION_SPANS_NEXT_WINDOW not in codes(day_tgp)
    assert F.ROTATION_SPANS_NEXT_WINDOW in codes(replace(day_tgp, drain_estimate=24 * H))


def test_no_windows_is_fatal_and_still_populates_the_forecast() -> None:
    r = derive(replace(BASE_AUTO, period=timedelta(0), tgp_was_unset=True, node_count=10))
    assert r.codes == (F.NO_WINDOWS,) and r.fatal
    assert (r.t_rot, r.t_rot_est, r.capacity) == (77 * M, 15 * M, 0)
    assert (r.age_threshold, r.guaranteed_chances) == (timedelta(0), 0)


def test_estimate_warnings_come_first() -> None:
    r = derive(replace(BASE_AUTO, period=timedelta(0), drain_estimate=2 * H))
    assert r.codes == (F.DRAIN_ESTIMATE_ABOVE_TGP, F.NO_WINDOWS)


def test_never_expiring_template_derives_nothing() -> None:
    assert derive(replace(BASE_AUTO, expire_after=None)).findings == ()
    never = derive(replace(BASE_AUTO, expire_after=None, override=50 * H))
    assert (never.age_threshold, never.t_rot, never.capacity) == (50 * H, timedelta(0), 0)


@pytest.mark.parametrize(
    ("tgp", "unset", "explicit", "expected", "warned"),
    [
        (24 * H, False, None, 10 * M, False),
        (5 * M, False, None, 5 * M, False),
        (24 * H, False, 2 * H, 2 * H, False),
        (H, False, H, H, False),
        (H, False, 25 * H, H, True),
        (H, True, None, 10 * M, False),
        (H, True, 25 * H, 25 * H, False),
    ],
)
def test_resolve_drain_estimate(tgp, unset, explicit, expected, warned) -> None:
    value, warning = resolve_drain_estimate(explicit, tgp, unset)
    assert (value, warning is not None) == (expected, warned)


@pytest.mark.parametrize(
    ("ready", "explicit", "expected", "warned"),
    [
        (15 * M, None, 5 * M, False),
        (3 * M, None, 3 * M, False),
        (15 * M, 2 * M, 2 * M, False),
        (15 * M, 15 * M, 15 * M, False),
        (15 * M, 20 * M, 15 * M, True),
    ],
)
def test_resolve_provisioning_estimate(ready, explicit, expected, warned) -> None:
    value, warning = resolve_provisioning_estimate(explicit, ready)
    assert (value, warning is not None) == (expected, warned)


# --- one test per finding code, at both sides of its boundary ---------------------------------


def boundary(code: F, fires: DeriveInputs, quiet: DeriveInputs) -> None:
    """``code`` is reported for ``fires`` and not for ``quiet``."""
    assert code in codes(fires), derive(fires).findings
    assert code not in codes(quiet), derive(quiet).findings


def test_boundary_drain_estimate_above_tgp() -> None:
    boundary(
        F.DRAIN_ESTIMATE_ABOVE_TGP,
        replace(BASE_AUTO, drain_estimate=H + S),
        replace(BASE_AUTO, drain_estimate=H),
    )


def test_boundary_provisioning_estimate_above_ready_timeout() -> None:
    boundary(
        F.PROVISIONING_ESTIMATE_ABOVE_READY_TIMEOUT,
        replace(BASE_AUTO, provisioning_estimate=15 * M + S),
        replace(BASE_AUTO, provisioning_estimate=15 * M),
    )


def test_boundary_no_windows() -> None:
    boundary(F.NO_WINDOWS, replace(BASE_AUTO, period=timedelta(0)), replace(BASE_AUTO, period=M))


def test_boundary_k_below_one() -> None:
    boundary(F.K_BELOW_ONE, replace(BASE_AUTO, k=0), replace(BASE_AUTO, k=1))


def test_boundary_k_below_two() -> None:
    boundary(F.K_BELOW_TWO, replace(BASE_AUTO, k=1), replace(BASE_AUTO, k=2))


def test_boundary_override_non_positive() -> None:
    boundary(
        F.OVERRIDE_NON_POSITIVE,
        replace(BASE_AUTO, override=timedelta(0)),
        replace(BASE_AUTO, override=S),
    )


def test_boundary_override_g_below_one() -> None:
    # G = floor((E - t_rot - A) / P) is 1 exactly when E - t_rot - A == P.
    at_one = 334 * H + 43 * M - 96 * H
    boundary(
        F.OVERRIDE_G_BELOW_ONE,
        replace(BASE_AUTO, override=at_one + S),
        replace(BASE_AUTO, override=at_one),
    )


def test_boundary_override_g_below_k() -> None:
    at_two = 334 * H + 43 * M - 2 * 96 * H
    boundary(
        F.OVERRIDE_G_BELOW_K,
        replace(BASE_AUTO, override=at_two + S),
        replace(BASE_AUTO, override=at_two),
    )


def test_boundary_a_non_positive() -> None:
    boundary(
        F.A_NON_POSITIVE,
        replace(BASE_AUTO, expire_after=193 * H + 17 * M),
        replace(BASE_AUTO, expire_after=193 * H + 17 * M + S),
    )


def test_boundary_a_very_aggressive_auto() -> None:
    at_p = 193 * H + 17 * M + 96 * H  # A == P
    boundary(
        F.A_VERY_AGGRESSIVE,
        replace(BASE_AUTO, expire_after=at_p - S),
        replace(BASE_AUTO, expire_after=at_p),
    )


def test_boundary_a_very_aggressive_override_is_independent_of_g() -> None:
    boundary(
        F.A_VERY_AGGRESSIVE,
        replace(BASE_AUTO, override=96 * H - S),
        replace(BASE_AUTO, override=96 * H),
    )
    # G < 1 and aggressive together: a short E with a short override.
    both = codes(replace(BASE_AUTO, expire_after=100 * H, override=50 * H))
    assert {F.OVERRIDE_G_BELOW_ONE, F.A_VERY_AGGRESSIVE} <= both


def test_boundary_tgp_unset() -> None:
    boundary(F.TGP_UNSET, replace(BASE_AUTO, tgp_was_unset=True), BASE_AUTO)


def test_boundary_hard_cap_exceeded() -> None:
    boundary(
        F.HARD_CAP_EXCEEDED,
        replace(BASE_AUTO, expire_after=20 * D, tgp=D + S),
        replace(BASE_AUTO, expire_after=20 * D, tgp=D),
    )


def test_boundary_retry_backoff_short() -> None:
    boundary(
        F.RETRY_BACKOFF_SHORT,
        replace(BASE_AUTO, retry_backoff=15 * M - S),
        replace(BASE_AUTO, retry_backoff=15 * M),
    )


def test_boundary_throughput_below_arrival() -> None:
    # C·A == N·P is not "below": override A = 48h, P = 96h, C = 10 => equality at N = 5.
    base = replace(BASE_AUTO, override=48 * H)
    assert derive(base).capacity == 10
    boundary(F.THROUGHPUT_BELOW_ARRIVAL, replace(base, node_count=6), replace(base, node_count=5))


def test_boundary_throughput_burst_shortfall() -> None:
    # V1: K·C = 20.
    boundary(
        F.THROUGHPUT_BURST_SHORTFALL,
        replace(BASE_AUTO, node_count=21),
        replace(BASE_AUTO, node_count=20),
    )


def test_boundary_rotation_spans_next_window() -> None:
    busy = 25 * M  # t_rot_est 15m + cooldown 10m
    boundary(
        F.ROTATION_SPANS_NEXT_WINDOW,
        replace(BASE_AUTO, idle_gap=busy - S),
        replace(BASE_AUTO, idle_gap=busy),
    )


def test_messages_carry_the_numbers() -> None:
    (a_non_positive,) = derive(replace(BASE_AUTO, expire_after=100 * H)).findings
    assert "100h - (2·96h + 1h17m) = -93h17m" in a_non_positive.message
    assert "longer expireAfter" in a_non_positive.message


# --- properties -------------------------------------------------------------------------------


def test_layer_one_codes_are_the_deadline_side() -> None:
    every = {f.code: f.side for inputs in _sweep() for f in derive(inputs).findings}
    assert {code for code, side in every.items() if side is Side.DEADLINE} <= LAYER_ONE
    assert not {code for code, side in every.items() if side is Side.FORECAST} & LAYER_ONE


def _sweep() -> list[DeriveInputs]:
    """A handful of inputs that together raise every finding code."""
    return [
        replace(
            BASE_AUTO,
            k=0,
            retry_backoff=M,
            tgp_was_unset=True,
            provisioning_estimate=H,
            node_count=500,
            idle_gap=M,
        ),
        replace(BASE_AUTO, drain_estimate=2 * H, node_count=500),
        replace(BASE_AUTO, k=1, expire_after=20 * D, tgp=2 * D),
        replace(BASE_AUTO, override=timedelta(0)),
        replace(BASE_AUTO, override=300 * H),
        replace(BASE_AUTO, override=200 * H),
        replace(BASE_AUTO, expire_after=240 * H),
        replace(BASE_AUTO, expire_after=H),
        replace(BASE_AUTO, period=timedelta(0)),
    ]


def test_sweep_raises_every_code() -> None:
    assert {code for inputs in _sweep() for code in derive(inputs).codes} == (
        set(F) - POOL_STATE_CODES - BUDGET_CODES
    )


@given(derive_inputs(), st.none() | minutes(1, 3000), st.none() | minutes(1, 300))
def test_estimates_never_move_the_deadline_side(inputs, drain, provisioning) -> None:
    before = derive(inputs)
    after = derive(replace(inputs, drain_estimate=drain, provisioning_estimate=provisioning))
    assert (after.t_rot, after.age_threshold, after.guaranteed_chances, after.lead_time) == (
        before.t_rot,
        before.age_threshold,
        before.guaranteed_chances,
        before.lead_time,
    )
    assert deadline_side(inputs) == deadline_side(
        replace(inputs, drain_estimate=drain, provisioning_estimate=provisioning)
    )


@given(derive_inputs())
def test_every_non_empty_occurrence_fits_a_start(inputs) -> None:
    r = derive(inputs)
    if inputs.window_len > timedelta(0) and inputs.period > timedelta(0):
        assert r.capacity >= 1


@given(derive_inputs(), st.integers(1, 5), minutes(1, 60 * 24))
def test_a_decreases_as_k_or_p_grows(inputs, more_k, more_p) -> None:
    auto = replace(inputs, override=None, k=max(inputs.k, 1), period=max(inputs.period, M))
    grown_k = replace(auto, k=auto.k + more_k)
    grown_p = replace(auto, period=auto.period + more_p)
    assert derive(grown_k).age_threshold < derive(auto).age_threshold
    assert derive(grown_p).age_threshold < derive(auto).age_threshold


@given(derive_inputs())
def test_severity_and_side_follow_the_code(inputs) -> None:
    for f in derive(inputs).findings:
        assert (f.severity, f.side) == CLASSIFICATION[f.code]
        assert f.message
