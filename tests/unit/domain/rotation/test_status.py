"""RotationPolicy status (spec §8.3): matched/rotating pools, Ready precedence, when to write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetgate.domain.rotation.governance import govern
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.manifest import read_manifest
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.status import (
    PolicyStatus,
    PoolGovernance,
    desired_statuses,
    needs_write,
    stamped,
    validation_errors,
    window_state,
)
from fleetgate.domain.rotation.windows import MaintenanceWindow

WINDOW = (MaintenanceWindow("UTC", ("Sun",), "00:00", "04:00"),)
T0 = datetime(2026, 1, 4, tzinfo=UTC)


def pol(name: str, labels: dict[str, str] | None = None, **kw: object) -> RotationPolicy:
    fields: dict[str, object] = {"maintenance_windows": WINDOW, "generation": 3, **kw}
    return RotationPolicy(name=name, node_pool_selector=LabelSelector(labels or {}), **fields)  # type: ignore[arg-type]


def statuses(
    policies: list[RotationPolicy],
    pools: dict[str, dict[str, str]],
    anchored: frozenset[str] = frozenset(),
) -> dict[str, PolicyStatus]:
    """Govern every pool as a pass would, then derive the statuses."""
    governance = [
        PoolGovernance.of(
            name, govern(labels, policies, None), "claim" if name in anchored else None
        )
        for name, labels in pools.items()
    ]
    errors = {p.name: validation_errors(p) for p in policies}
    return desired_statuses(policies, errors, governance)


def test_a_valid_policy_is_accepted_with_the_pools_it_wins_and_those_rotating() -> None:
    pools = {"b": {"team": "web"}, "a": {"team": "web"}, "c": {"team": "db"}}
    out = statuses([pol("web", {"team": "web"})], pools, anchored=frozenset({"b", "c"}))
    status = out["web"]
    assert status.observed_generation == 3
    assert status.matched_node_pools == ("a", "b")
    assert status.rotating_node_pools == ("b",)  # c is not this policy's
    assert status.ready.status is True and status.ready.reason == "Accepted"
    assert status.ready.message == "valid and governs 2 NodePool(s)"


def test_a_policy_that_wins_nothing_is_still_accepted() -> None:
    out = statuses([pol("db", {"team": "db"})], {"a": {"team": "web"}})
    assert out["db"].matched_node_pools == ()
    assert out["db"].ready.message == "valid and governs 0 NodePool(s)"


def test_a_less_specific_policy_loses_the_pool_to_the_more_specific_one() -> None:
    out = statuses([pol("all"), pol("web", {"team": "web"})], {"a": {"team": "web"}})
    assert out["web"].matched_node_pools == ("a",) and out["all"].matched_node_pools == ()


def test_a_tie_is_a_conflict_naming_the_others_and_the_pools() -> None:
    policies = [pol("x", {"team": "web"}), pol("y", {"tier": "front"}), pol("z", {"zone": "a"})]
    pools = {
        "p2": {"team": "web", "tier": "front"},
        "p1": {"team": "web", "tier": "front", "zone": "a"},  # three-way tie
        "p3": {"team": "web"},  # x alone
    }
    out = statuses(policies, pools)
    x = out["x"]
    assert x.ready.status is False and x.ready.reason == "Conflict"
    assert x.ready.message == "ties with [y z] for NodePool(s) [p1 p2]"
    assert x.matched_node_pools == ("p3",)  # a tied pool is nobody's
    assert out["z"].ready.message == "ties with [x y] for NodePool(s) [p1]"


def test_an_invalid_policy_still_matches_what_it_wins_and_says_why() -> None:
    bad = pol("bad", {"team": "web"}, min_rotation_chances=0)
    out = statuses([bad], {"a": {"team": "web"}}, anchored=frozenset({"a"}))
    status = out["bad"]
    assert status.matched_node_pools == ("a",)  # it wins (and so blocks) the pool
    assert status.rotating_node_pools == ("a",)
    assert status.ready.status is False and status.ready.reason == "Invalid"
    assert status.ready.message == "spec.minRotationChances: must be at least 1"


def test_invalid_takes_precedence_over_conflict() -> None:
    bad = pol("bad", {"team": "web"}, min_rotation_chances=0, maintenance_windows=())
    out = statuses([bad, pol("other", {"tier": "front"})], {"a": {"team": "web", "tier": "front"}})
    assert out["bad"].ready.reason == "Invalid"
    assert out["bad"].ready.message == (
        "spec.minRotationChances: must be at least 1; "
        "spec.maintenanceWindows: must have at least one entry"
    )
    assert out["other"].ready.reason == "Conflict"


def test_the_generation_is_read_from_the_manifest() -> None:
    manifest = {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "RotationPolicy",
        "metadata": {"name": "p", "generation": 7},
        "spec": {"nodePoolSelector": {}},
    }
    policy, _ = read_manifest(manifest)
    assert policy.generation == 7
    assert policy == RotationPolicy(name="p")  # bookkeeping, not part of what the policy says


def test_a_status_is_written_only_when_it_changed() -> None:
    [want] = statuses([pol("web", {"team": "web"})], {"a": {"team": "web"}}).values()
    assert needs_write(None, want)
    written = stamped(want, None, T0)
    assert written.ready.last_transition_time == T0
    assert not needs_write(written, want)  # lastTransitionTime is not a change
    [moved] = statuses(
        [pol("web", {"team": "web"})], {"a": {"team": "web"}, "b": {"team": "web"}}
    ).values()
    assert needs_write(written, moved)


def test_last_transition_time_moves_only_when_the_condition_status_flips() -> None:
    [accepted] = statuses([pol("web")], {"a": {}}).values()
    first = stamped(accepted, None, T0)
    [more] = statuses([pol("web")], {"a": {}, "b": {}}).values()
    later = T0 + timedelta(hours=1)
    assert stamped(more, first, later).ready.last_transition_time == T0  # still True
    [invalid] = statuses([pol("web", min_rotation_chances=0)], {"a": {}}).values()
    assert stamped(invalid, first, later).ready.last_transition_time == later


def test_the_status_manifest_round_trips() -> None:
    [want] = statuses([pol("web")], {"a": {}}, anchored=frozenset({"a"})).values()
    status = stamped(want, None, T0)
    body = status.as_manifest()
    assert body == {
        "observedGeneration": 3,
        "matchedNodePools": 1,
        "rotatingNodePools": 1,
        "matchedNodePoolNames": ["a"],
        "rotatingNodePoolNames": ["a"],
        "windowOpen": None,  # no ``now`` given: unknown, written as null (merge patch)
        "nextWindow": None,
        "ageThreshold": None,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Accepted",
                "message": "valid and governs 1 NodePool(s)",
                "lastTransitionTime": "2026-01-04T00:00:00Z",
                "observedGeneration": 3,
            }
        ],
    }
    assert PolicyStatus.from_manifest(body) == status
    legacy = {**body, "matchedNodePools": ["a"], "rotatingNodePools": ["a"]}
    del legacy["matchedNodePoolNames"], legacy["rotatingNodePoolNames"]
    assert PolicyStatus.from_manifest(legacy) == status  # the list form written before counts
    assert PolicyStatus.from_manifest({"conditions": []}) is None
    assert PolicyStatus.from_manifest("junk") is None


def test_the_window_columns_say_open_and_when_the_next_window_opens() -> None:
    web = pol("web")
    # Sunday 00:00: open, and the next one is a week on (not the one already open).
    assert window_state(web, T0) == (True, T0 + timedelta(days=7))
    # Sunday 05:00: closed, the next opens next Sunday at midnight.
    assert window_state(web, T0 + timedelta(hours=5)) == (False, T0 + timedelta(days=7))
    assert window_state(pol("bad", min_rotation_chances=0), T0) is None  # no schedule to read
    errors = {"web": ()}
    pools = [PoolGovernance("a", "web", age_threshold=timedelta(hours=46, minutes=43))]
    [status] = desired_statuses([web], errors, pools, T0 + timedelta(hours=5)).values()
    assert (status.window_open, status.next_window) == (False, T0 + timedelta(days=7))
    assert status.age_threshold == "46h43m"
    body = status.as_manifest()
    assert body["windowOpen"] is False and body["nextWindow"] == "2026-01-11T00:00:00Z"
    assert body["ageThreshold"] == "46h43m"
    assert PolicyStatus.from_manifest(body) == status  # a restart rewrites nothing still right
    # Without ``now`` (or for an invalid policy) the columns are absent, not guessed.
    [bare] = desired_statuses([web], errors, pools).values()
    assert bare.window_open is None and bare.as_manifest()["windowOpen"] is None


def test_a_is_each_distinct_value_its_pools_derive_else_the_override() -> None:
    web = pol("web", age_threshold=timedelta(hours=30))
    pools = [
        PoolGovernance("a", "web", age_threshold=timedelta(hours=50)),
        PoolGovernance("b", "web", age_threshold=timedelta(hours=20)),
        PoolGovernance("c", "web", age_threshold=timedelta(hours=50)),
        PoolGovernance("d", "other", age_threshold=timedelta(hours=1)),
    ]
    [status] = desired_statuses([web], {}, pools, T0).values()
    assert status.age_threshold == "20h, 50h"
    [status] = desired_statuses([web], {}, [], T0).values()
    assert status.age_threshold == "30h"  # no pool derived one yet: the override
    [status] = desired_statuses([pol("x")], {}, [], T0).values()
    assert status.age_threshold is None


def test_a_window_transition_is_a_change_worth_writing() -> None:
    web = pol("web")
    [inside] = desired_statuses([web], {}, [PoolGovernance("a", "web")], T0).values()
    later = T0 + timedelta(hours=5)
    [outside] = desired_statuses([web], {}, [PoolGovernance("a", "web")], later).values()
    assert needs_write(inside, outside)
    [same] = desired_statuses([web], {}, [PoolGovernance("a", "web")], later).values()
    assert not needs_write(outside, same)
