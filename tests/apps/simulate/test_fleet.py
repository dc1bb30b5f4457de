"""The fleet file: listed or generated nodes, and errors that name the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetgate.apps.simulate.fleet import FleetError, labels_for, load_fleet
from fleetgate.domain.rotation.labelselector import LabelSelector, SelectorRequirement

START = datetime(2024, 1, 1, tzinfo=UTC)


def test_listed_nodes_keep_their_own_expiry_and_grace_period() -> None:
    fleet = load_fleet(
        {
            "fleet": {
                "expireAfter": "14d",
                "terminationGracePeriod": "1h",
                "labels": {"a": "b"},
                "nodes": [
                    {"name": "n1", "createdAt": "2023-12-30T00:00:00Z"},
                    {
                        "name": "n2",
                        "createdAt": "2023-12-31T00:00:00Z",
                        "expireAfter": "28d",
                        "terminationGracePeriod": "2h",
                    },
                ],
            },
            "env": {"provisioning": "3m", "drain": "8m"},
        },
        START,
    )
    assert fleet.expire_after == timedelta(days=14) and fleet.tgp == timedelta(hours=1)
    assert [n.name for n in fleet.nodes] == ["n1", "n2"]
    assert fleet.nodes[0].expire_after is None  # inherits the template
    assert fleet.nodes[1].expire_after == timedelta(days=28)
    assert fleet.nodes[1].tgp == timedelta(hours=2)
    assert fleet.env_provisioning == timedelta(minutes=3) and dict(fleet.labels) == {"a": "b"}


def test_generated_ages_are_spread_evenly_from_brand_new_to_nearly_the_spread() -> None:
    fleet = load_fleet(
        {"fleet": {"expireAfter": "14d", "generate": {"count": 4, "spread": "4d"}}}, START
    )
    ages = [START - n.created_at for n in fleet.nodes]
    assert ages == [timedelta(days=3), timedelta(days=2), timedelta(days=1), timedelta(0)]
    assert [n.name for n in fleet.nodes] == ["node-1", "node-2", "node-3", "node-4"]


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({}, "fleet:"),
        ({"fleet": {"generate": {"count": 1}}}, "fleet.expireAfter"),
        ({"fleet": {"expireAfter": "0s", "generate": {"count": 1}}}, "fleet.expireAfter"),
        ({"fleet": {"expireAfter": "soon", "generate": {"count": 1}}}, "fleet.expireAfter"),
        ({"fleet": {"expireAfter": "14d"}}, "exactly one of nodes"),
        ({"fleet": {"expireAfter": "14d", "generate": {"count": 0}}}, "fleet.generate.count"),
        ({"fleet": {"expireAfter": "14d", "nodes": [{"name": "a"}]}}, "fleet.nodes[0].createdAt"),
        (
            {
                "fleet": {
                    "expireAfter": "14d",
                    "nodes": [{"name": "a", "createdAt": "2025-01-01T00:00:00Z"}],
                }
            },
            "after the simulation start",
        ),
        (
            {"fleet": {"expireAfter": "14d", "nodes": [{"name": "a", "createdAt": "yesterday"}]}},
            "fleet.nodes[0].createdAt",
        ),
        (
            {
                "fleet": {
                    "expireAfter": "14d",
                    "nodes": [
                        {"name": "a", "createdAt": "2023-01-01T00:00:00Z"},
                        {"name": "a", "createdAt": "2023-01-01T00:00:00Z"},
                    ],
                }
            },
            "appears twice",
        ),
        (
            {"fleet": {"expireAfter": "14d", "generate": {"count": 1}}, "env": {"drain": "-1m"}},
            "env.drain",
        ),
        (
            {"fleet": {"expireAfter": "14d", "generate": {"count": 1}, "color": "red"}},
            "unknown keys",
        ),
    ],
)
def test_bad_fleets_are_rejected_naming_the_field(document: dict[str, object], field: str) -> None:
    with pytest.raises(FleetError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_fleet(document, START)


def _states(pool: dict[str, object], node: dict[str, object]) -> dict[str, object]:
    """A one-node fleet with these pool-level and node-level Karpenter states."""
    listed = {"name": "a", "createdAt": "2023-12-30T00:00:00Z", **node}
    return {"fleet": {"expireAfter": "14d", "nodes": [listed], **pool}}


def test_karpenters_own_states_are_read_from_the_pool_and_its_nodes() -> None:
    fleet = load_fleet(
        _states(
            {"replicas": 3, "ready": False, "limits": {"nodes": 5}},
            {"drifted": True, "disruptedAt": "2024-01-02T00:00:00Z", "doNotDisrupt": "2h"},
        ),
        START,
    )
    assert (fleet.replicas, fleet.ready, fleet.node_limit) == (3, False, 5)
    (node,) = fleet.nodes
    assert node.drifted and node.disrupted_at == START + timedelta(days=1)
    assert node.do_not_disrupt == "2h"
    assert load_fleet(_states({}, {"doNotDisrupt": True}), START).nodes[0].do_not_disrupt == "true"
    plain = load_fleet(_states({}, {}), START)
    assert (plain.replicas, plain.ready, plain.node_limit) == (None, True, None)
    assert plain.nodes[0] == type(node)(name="a", created_at=node.created_at)


@pytest.mark.parametrize(
    ("pool", "node", "field"),
    [
        ({"replicas": -1}, {}, "fleet.replicas"),
        ({"replicas": True}, {}, "fleet.replicas"),
        ({"ready": "no"}, {}, "fleet.ready"),
        ({"limits": {"cpu": 4}}, {}, "fleet.limits"),
        ({"limits": {"nodes": "12"}}, {}, "fleet.limits.nodes"),
        ({}, {"drifted": "yes"}, r"fleet.nodes\[0\].drifted"),
        ({}, {"disruptedAt": "2023-01-01T00:00:00Z"}, r"fleet.nodes\[0\].disruptedAt"),
        ({}, {"disruptedAt": "later"}, r"fleet.nodes\[0\].disruptedAt"),
        ({}, {"doNotDisrupt": False}, r"fleet.nodes\[0\].doNotDisrupt"),
        ({}, {"doNotDisrupt": "forever"}, r"fleet.nodes\[0\].doNotDisrupt"),
        ({}, {"doNotDisrupt": "0s"}, r"fleet.nodes\[0\].doNotDisrupt"),
    ],
)
def test_bad_karpenter_states_are_rejected_naming_the_field(
    pool: dict[str, object], node: dict[str, object], field: str
) -> None:
    with pytest.raises(FleetError, match=field):
        load_fleet(_states(pool, node), START)


def _budget(budget: object) -> dict[str, object]:
    return {
        "fleet": {"expireAfter": "14d", "generate": {"count": 2}, "podDisruptionBudget": budget}
    }


def test_a_workload_budget_takes_one_bound_a_count_or_a_percentage() -> None:
    fleet = load_fleet(_budget({"maxUnavailable": 0}), START)
    assert fleet.pod_budget is not None and (
        fleet.pod_budget.max_unavailable,
        fleet.pod_budget.min_available,
    ) == (0, None)
    fleet = load_fleet(
        _budget({"minAvailable": "50%", "unhealthyPodEvictionPolicy": "AlwaysAllow"}), START
    )
    assert fleet.pod_budget is not None
    assert (fleet.pod_budget.min_available, fleet.pod_budget.unhealthy_policy) == (
        "50%",
        "AlwaysAllow",
    )
    assert load_fleet(_budget(None), START).pod_budget is None


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({}, "exactly one of minAvailable or maxUnavailable"),
        ({"minAvailable": 1, "maxUnavailable": 1}, "exactly one of minAvailable or maxUnavailable"),
        ({"maxUnavailable": -1}, "fleet.podDisruptionBudget.maxUnavailable"),
        ({"maxUnavailable": "101%"}, "fleet.podDisruptionBudget.maxUnavailable"),
        ({"minAvailable": True}, "fleet.podDisruptionBudget.minAvailable"),
        ({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"}, "unhealthyPodEvictionPolicy"),
        ({"minAvailable": 1, "selector": {}}, "unknown keys"),
        ([1], "fleet.podDisruptionBudget: must be a mapping"),
    ],
)
def test_a_bad_workload_budget_is_refused_naming_the_field(budget: object, field: str) -> None:
    with pytest.raises(FleetError, match=field):
        load_fleet(_budget(budget), START)


def test_labels_satisfy_match_labels_and_in_and_exists_but_nothing_negative() -> None:
    selector = LabelSelector(
        match_labels={"team": "a"},
        match_expressions=(
            SelectorRequirement("tier", "In", ("gold", "silver")),
            SelectorRequirement("rotate", "Exists"),
            SelectorRequirement("legacy", "NotIn", ("yes",)),
            SelectorRequirement("frozen", "DoesNotExist"),
        ),
    )
    labels = labels_for(selector)
    assert labels == {"team": "a", "tier": "gold", "rotate": "true"}
    assert selector.matches(labels)
    assert labels_for(None) == {}
