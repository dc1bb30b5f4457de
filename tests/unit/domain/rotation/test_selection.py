"""Candidate selection (spec §6): eligibility order, census, trigger, order, backoff, short lead."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain.rotation.annotations import (
    CLAIM_STATE,
    DO_NOT_DISRUPT_OWNED,
    FAILED_AT,
    KARPENTER_DO_NOT_DISRUPT,
    RETRY_COUNT,
    format_timestamp,
)
from fleetgate.domain.rotation.selection import (
    DRIFTED_DUE,
    Bucket,
    ClaimView,
    DriftRule,
    SelectionRules,
    classify,
    deadline,
    drift_rule,
    is_opted_out,
    is_short_lead,
    is_triggered,
    lead_time_for,
    opted_out_claims,
    order,
    pick,
    retry_backoff,
    take_census,
)

M = timedelta(minutes=1)
H = timedelta(hours=1)
NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
E = 336 * H
BASE = 2 * 96 * H + 15 * M + 2 * M  # K·P + readyTimeout + Buffer (V1)
AUTO = SelectionRules(lead_time_base=BASE, retry_backoff=30 * M)
LEAD = BASE + H  # claim tGP 1h: 193h17m


def claim(name: str = "c", age: timedelta = E, **fields: object) -> ClaimView:
    """A ready claim of the given age with expireAfter 336h and tGP 1h unless overridden."""
    values: dict[str, object] = {"expire_after": E, "tgp": H}
    values.update(fields)
    return ClaimView(name=name, created_at=NOW - age, **values)  # type: ignore[arg-type]


def failed(retry_count: str, failed_ago: timedelta, **fields: object) -> ClaimView:
    """A failed claim with the given retry count and failed-at."""
    annotations = {
        CLAIM_STATE: "failed",
        RETRY_COUNT: retry_count,
        FAILED_AT: format_timestamp(NOW - failed_ago),
    }
    return claim(annotations=annotations, **fields)


# --- trigger ----------------------------------------------------------------------------------


def test_auto_trigger_is_strictly_past_e_minus_lead_time() -> None:
    threshold = E - LEAD  # 142h43m: A of V1
    assert not is_triggered(claim(age=threshold), NOW, AUTO)
    assert is_triggered(claim(age=threshold + timedelta(seconds=1)), NOW, AUTO)


def test_auto_trigger_uses_the_claims_own_expiry_and_tgp() -> None:
    older_template = claim(age=100 * H, expire_after=200 * H, tgp=24 * H)
    assert is_triggered(older_template, NOW, AUTO)  # 100h > 200h - (BASE + 24h)
    assert lead_time_for(BASE, None) == BASE + H  # unset tGP: 1h fallback


def test_never_expiring_claim_never_triggers_in_auto_mode() -> None:
    assert not is_triggered(claim(age=10_000 * H, expire_after=None), NOW, AUTO)


def test_override_trigger_ignores_expiry() -> None:
    rules = SelectionRules(lead_time_base=BASE, retry_backoff=30 * M, override=50 * H)
    assert not is_triggered(claim(age=50 * H), NOW, rules)
    assert is_triggered(claim(age=50 * H + timedelta(seconds=1)), NOW, rules)
    assert is_triggered(claim(age=51 * H, expire_after=None), NOW, rules)


# --- eligibility and census -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("view", "opted", "bucket"),
    [
        (claim(), True, Bucket.OPTED_OUT),
        (claim(deleting=True, ready=False), False, Bucket.DELETING),
        (claim(deleting=True, disruption_reason="Drifted"), False, Bucket.DELETING),
        (
            claim(disruption_reason="Underutilized", drifted=True),
            False,
            Bucket.KARPENTER_DISRUPTING,
        ),
        (claim(node_disrupted=True, ready=False), False, Bucket.KARPENTER_DISRUPTING),
        (claim(drifted=True, ready=False, age=H), False, Bucket.DRIFTED),
        # Due: a drifted claim is Karpenter's no longer, and goes on to the next checks.
        (claim(drifted=True, ready=False), False, Bucket.NOT_READY),
        (claim(drifted=True), True, Bucket.OPTED_OUT),
        (claim(drifted=True, node_disrupted=True), False, Bucket.KARPENTER_DISRUPTING),
        (claim(ready=False, annotations={CLAIM_STATE: "pending"}), False, Bucket.NOT_READY),
        (claim(annotations={CLAIM_STATE: "pending"}), False, Bucket.IN_FLIGHT),
        (claim(annotations={CLAIM_STATE: "draining"}), False, Bucket.IN_FLIGHT),
        (claim(annotations={CLAIM_STATE: "weird"}), False, Bucket.IN_FLIGHT),
        (claim(annotations={CLAIM_STATE: "expired"}), False, Bucket.TERMINAL),
        (failed("1", 10 * M), False, Bucket.IN_BACKOFF),
        (failed("1", 30 * M), False, Bucket.ELIGIBLE),
        (failed("1", 30 * M, age=H), False, Bucket.NOT_TRIGGERED),
        (claim(age=H), False, Bucket.NOT_TRIGGERED),
        (claim(), False, Bucket.ELIGIBLE),
    ],
)
def test_first_failed_check_is_the_bucket(view: ClaimView, opted: bool, bucket: Bucket) -> None:
    opted_out = frozenset({view.name}) if opted else frozenset()
    assert classify(view, NOW, AUTO, opted_out) is bucket


@pytest.mark.parametrize(
    ("retry_count", "failed_ago", "bucket"),
    [
        ("1", 30 * M - timedelta(seconds=1), Bucket.IN_BACKOFF),
        ("1", 30 * M, Bucket.ELIGIBLE),  # elapsed is inclusive
        ("3", 119 * M, Bucket.IN_BACKOFF),  # 4x after three failures
        ("3", 120 * M, Bucket.ELIGIBLE),
        ("9", 3 * H, Bucket.IN_BACKOFF),  # capped at 8x = 4h
        ("9", 4 * H, Bucket.ELIGIBLE),
        ("garbage", 30 * M, Bucket.ELIGIBLE),  # bad retry-count counts as 0
        ("-4", 30 * M, Bucket.ELIGIBLE),
    ],
)
def test_failed_claims_wait_out_their_backoff(retry_count, failed_ago, bucket) -> None:
    assert classify(failed(retry_count, failed_ago), NOW, AUTO) is bucket


def test_missing_or_bad_failed_at_counts_as_elapsed() -> None:
    missing = claim(annotations={CLAIM_STATE: "failed", RETRY_COUNT: "3"})
    bad = claim(annotations={CLAIM_STATE: "failed", FAILED_AT: "yesterday"})
    assert classify(missing, NOW, AUTO) is Bucket.ELIGIBLE
    assert classify(bad, NOW, AUTO) is Bucket.ELIGIBLE


@pytest.mark.parametrize(
    ("count", "factor"), [(0, 1), (1, 1), (2, 2), (3, 4), (4, 8), (5, 8), (100, 8), (-1, 1)]
)
def test_retry_backoff_doubles_to_a_cap_of_eight(count: int, factor: int) -> None:
    assert retry_backoff(30 * M, count) == 30 * M * factor


def test_census_partitions_the_pool() -> None:
    claims = [
        claim("a"),
        claim("b", age=H),
        claim("c", deleting=True),
        claim("d", ready=False),
        claim("e", annotations={CLAIM_STATE: "pending"}),
        failed("1", M, name="f"),
        claim("g", annotations={CLAIM_STATE: "expired"}),
        claim("h"),
        claim("i", disruption_reason="Underutilized"),
        claim("j", drifted=True, age=H),
    ]
    census = take_census(claims, NOW, AUTO, frozenset({"h"}))
    assert census.as_dict() == {
        "Total": 10,
        "Eligible": 1,
        "OptedOut": 1,
        "Deleting": 1,
        "KarpenterDisrupting": 1,
        "Drifted": 1,
        "NotReady": 1,
        "InFlight": 1,
        "Terminal": 1,
        "InBackoff": 1,
        "NotTriggered": 1,
    }
    assert census.eligible == 1 and census.total == len(claims)


def test_opt_out_requires_exactly_true_and_no_owned_marker() -> None:
    assert is_opted_out({KARPENTER_DO_NOT_DISRUPT: "true"})
    assert not is_opted_out({KARPENTER_DO_NOT_DISRUPT: "True"})
    assert not is_opted_out({KARPENTER_DO_NOT_DISRUPT: "true", DO_NOT_DISRUPT_OWNED: "true"})
    assert not is_opted_out({})
    claims = [claim("a", node_name="n1"), claim("b", node_name="n2"), claim("c")]
    nodes = {"n1": {KARPENTER_DO_NOT_DISRUPT: "true"}, "n2": {}}
    assert opted_out_claims(claims, nodes) == frozenset({"a"})


# --- order and pick ---------------------------------------------------------------------------


def test_earliest_deadline_first_then_older_then_name() -> None:
    soon = claim("z-soon", age=300 * H)
    later_short = claim("a-later", age=310 * H, expire_after=400 * H)  # deadline 90h away
    never = claim("never", age=400 * H, expire_after=None)
    twin_a = claim("twin-a", age=250 * H)
    twin_b = claim("twin-b", age=250 * H)
    assert [c.name for c in order([never, twin_b, later_short, twin_a, soon], AUTO)] == [
        "z-soon",
        "twin-a",
        "twin-b",
        "a-later",
        "never",
    ]
    assert deadline(soon) == soon.created_at + E and deadline(never) is None


def test_override_orders_by_age_only() -> None:
    rules = SelectionRules(lead_time_base=BASE, retry_backoff=30 * M, override=10 * H)
    young_deadline = claim("x", age=20 * H, expire_after=21 * H)
    old = claim("y", age=200 * H)
    assert [c.name for c in order([young_deadline, old], rules)] == ["y", "x"]


def test_pick_skips_ineligible_claims() -> None:
    urgent_but_busy = claim("busy", age=330 * H, annotations={CLAIM_STATE: "pending"})
    eligible = claim("ok", age=200 * H)
    assert pick([urgent_but_busy, eligible], NOW, AUTO) == eligible
    assert pick([claim(age=H)], NOW, AUTO) is None


@given(st.lists(st.tuples(st.integers(150, 400), st.integers(0, 3)), max_size=12), st.randoms())
def test_pick_is_independent_of_list_order(specs, rnd: random.Random) -> None:
    claims = [
        claim(f"c{i}", age=hours * H, expire_after=E + extra * H)
        for i, (hours, extra) in enumerate(specs)
    ]
    shuffled = list(claims)
    rnd.shuffle(shuffled)
    assert pick(claims, NOW, AUTO) == pick(shuffled, NOW, AUTO)
    assert order(claims, AUTO) == order(shuffled, AUTO)


# --- short lead -------------------------------------------------------------------------------


def test_short_lead_is_non_strict_and_skips_never_and_deleting() -> None:
    assert is_short_lead(claim(expire_after=LEAD), BASE)
    assert not is_short_lead(claim(expire_after=LEAD + timedelta(seconds=1)), BASE)
    assert not is_short_lead(claim(expire_after=None), BASE)
    assert not is_short_lead(claim(expire_after=H, deleting=True), BASE)
    assert is_short_lead(claim(expire_after=BASE + 2 * H, tgp=2 * H), BASE)  # claim's own tGP


def test_karpenter_disrupting_claims_are_never_picked() -> None:
    # Karpenter tainted the node or set DisruptionReason: it is replacing the claim already, so
    # picking it would replace it twice. The oldest claim is skipped for the next one.
    oldest = claim("old", age=E + H, disruption_reason="Expired")
    tainted = claim("tainted", age=E + H, node_disrupted=True)
    assert oldest.karpenter_disrupting and tainted.karpenter_disrupting
    picked = pick([oldest, tainted, claim("next")], NOW, AUTO)
    assert picked is not None and picked.name == "next"


def test_drifted_claims_are_karpenters_only_until_they_fall_due() -> None:
    # Karpenter may never act on drift (a Drifted budget of "0"); a drifted claim left to it
    # past its age threshold would run to its forced expiry, so from then on it is ours.
    young = claim("d", drifted=True, age=E - LEAD)
    assert classify(young, NOW, AUTO) is Bucket.DRIFTED
    assert pick([young], NOW, AUTO) is None
    assert drift_rule(young, Bucket.DRIFTED, AUTO) is None
    due = claim("d", drifted=True, age=E - LEAD + timedelta(seconds=1))
    assert classify(due, NOW, AUTO) is Bucket.ELIGIBLE
    assert pick([due], NOW, AUTO) == due
    assert drift_rule(due, Bucket.ELIGIBLE, AUTO) is DriftRule.DUE
    census = take_census([young, replace(due, name="e"), claim("f")], NOW, AUTO)
    assert census.drifted_due == 1
    assert census.as_dict()["Drifted"] == 1 and census.as_dict()[DRIFTED_DUE] == 1
    assert census.as_dict()["Eligible"] == 2 and census.total == 3
    # Not a bucket: absent when no drifted claim fell due, so the census keys stay the same.
    assert DRIFTED_DUE not in take_census([young], NOW, AUTO).as_dict()
    # Karpenter already replacing it, or an opt-out: still not ours.
    disrupting = replace(due, node_disrupted=True)
    bucket = classify(disrupting, NOW, AUTO)
    assert bucket is Bucket.KARPENTER_DISRUPTING and drift_rule(disrupting, bucket, AUTO) is None
    assert take_census([disrupting], NOW, AUTO).drifted_due == 0


def test_rotate_drifted_makes_drifted_claims_ours_from_the_start() -> None:
    ours = SelectionRules(lead_time_base=BASE, retry_backoff=30 * M, rotate_drifted=True)
    drifted = claim("d", drifted=True)
    assert classify(drifted, NOW, ours) is Bucket.ELIGIBLE
    assert drift_rule(drifted, Bucket.ELIGIBLE, ours) is DriftRule.ROTATE_DRIFTED
    young = claim("d", drifted=True, age=H)
    assert classify(young, NOW, ours) is Bucket.NOT_TRIGGERED
    assert take_census([drifted], NOW, ours).drifted_due == 0
    assert drift_rule(claim(), Bucket.ELIGIBLE, ours) is None
