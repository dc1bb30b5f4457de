"""The observation values: a changed copy answers its look-ups as one built afresh would."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fleetgate.domain.rotation.cluster import NodeClaimView, NodeView, PoolObservation

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _obs() -> PoolObservation:
    claims = tuple(
        NodeClaimView(f"c{i}", T0 - timedelta(hours=i), timedelta(days=14), node_name=f"n{i}")
        for i in range(5)
    )
    nodes = tuple(NodeView(f"n{i}") for i in range(5))
    return PoolObservation("pool", "1", timedelta(days=14), claims=claims, nodes=nodes)


def test_a_changed_observation_looks_up_as_a_fresh_one() -> None:
    obs = _obs()
    obs.claim("c0"), obs.node("n0"), obs.claim_on("n0")  # its indexes are built first
    claim = replace(obs.claims[2], annotations={"a": "b"}, deleting_at=T0)
    node = replace(obs.nodes[3], unschedulable=True)
    changed = obs.with_changes({"x": "y"}, {"c2": claim}, {"n3": node})
    fresh = PoolObservation(
        "pool",
        "1",
        timedelta(days=14),
        annotations={"x": "y"},
        claims=changed.claims,
        nodes=changed.nodes,
    )
    assert changed == fresh
    assert changed.claims[2] is claim and changed.nodes[3] is node
    for i in range(5):
        assert changed.claim(f"c{i}") is fresh.claim(f"c{i}")
        assert changed.node(f"n{i}") is fresh.node(f"n{i}")
        assert changed.claim_on(f"n{i}") is fresh.claim_on(f"n{i}")
    assert obs.claim("c2") is obs.claims[2] and obs.claims[2] is not claim  # left unchanged
