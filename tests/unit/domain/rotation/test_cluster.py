"""The observation values: a changed copy answers its look-ups as one built afresh would."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fleetgate.domain.rotation.cluster import (
    MemberChanges,
    NodeClaimView,
    NodeView,
    PodView,
    PoolObservation,
)

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


def _next(obs: PoolObservation, claims: tuple[NodeClaimView, ...]) -> PoolObservation:
    before, after = {id(c) for c in obs.claims}, {id(c) for c in claims}
    changes = MemberChanges(
        since=1,
        claims_added=tuple(c for c in claims if id(c) not in before),
        claims_gone=tuple(c for c in obs.claims if id(c) not in after),
    )
    return replace(obs, claims=claims, serial=2, changes=changes)


def test_indexes_carried_over_answer_as_fresh_ones() -> None:
    obs = replace(_obs(), serial=1)
    obs.claim("c0"), obs.claim_on("n0"), obs.node("n0")
    claims = list(obs.claims)
    claims[1] = replace(claims[1], annotations={"a": "b"})
    del claims[3]
    claims.append(NodeClaimView("c9", T0, timedelta(days=14), node_name="n9"))
    claims.append(NodeClaimView("c8", T0, timedelta(days=14)))
    after = _next(obs, tuple(claims))
    after.inherit_indexes(obs)
    assert "_claims_by_name" in after.__dict__ and "_claims_by_node" in after.__dict__
    fresh = replace(after, serial=None, changes=None)
    for name in ("c0", "c1", "c3", "c8", "c9", "n1", "n3", "n9"):
        assert after.claim(name) is fresh.claim(name)
        assert after.claim_on(name) is fresh.claim_on(name)


def test_an_index_a_duplicate_would_make_ambiguous_is_built_afresh() -> None:
    obs = replace(_obs(), serial=1)
    obs.claim("c0"), obs.claim_on("n0")
    twin = NodeClaimView("c2", T0, timedelta(days=14), node_name="n2")  # same name and node
    after = _next(obs, (*obs.claims, twin))
    after.inherit_indexes(obs)
    assert "_claims_by_name" not in after.__dict__ and "_claims_by_node" not in after.__dict__
    assert after.claim("c2") is obs.claims[2] and after.claim_on("n2") is obs.claims[2]


def test_indexes_are_carried_even_when_the_previous_pass_had_not_built_them() -> None:
    obs = replace(_obs(), serial=1)  # no look-up made: the carry builds them on ``obs``
    after = _next(obs, obs.claims[1:])
    after.inherit_indexes(obs)
    assert {"_claims_by_name", "_nodes_by_name", "_claims_by_node"} <= set(after.__dict__)
    assert after.claim("c0") is None and after.claim_on("n0") is None
    assert after.claim("c1") is obs.claims[1] and after.node("n0") is obs.nodes[0]


def test_a_long_chain_of_carried_indexes_answers_as_fresh_ones() -> None:
    """Past the overlay's bound the carried tables are merged into a new base: every
    observation along the way still answers exactly as one built from its members."""
    obs = replace(_obs(), serial=1)
    for serial in range(2, 1000):
        claims = list(obs.claims)
        i = serial % len(claims)
        if serial % 7 == 0:  # a claim leaves and a new one joins (the pool rotates)
            del claims[i]
            claims.append(
                NodeClaimView(f"c{serial + 100}", T0, timedelta(days=14), node_name=f"n{serial}")
            )
        else:  # a claim is rebuilt (its annotations changed)
            claims[i] = replace(claims[i], annotations={"pass": str(serial)})
        before, now = {id(c) for c in obs.claims}, {id(c) for c in claims}
        changes = MemberChanges(
            since=serial - 1,
            claims_added=tuple(c for c in claims if id(c) not in before),
            claims_gone=tuple(c for c in obs.claims if id(c) not in now),
        )
        nxt = replace(obs, claims=tuple(claims), serial=serial, changes=changes)
        nxt.inherit_indexes(obs)
        fresh = replace(nxt, serial=None, changes=None)
        names = {c.name for c in obs.claims} | {c.name for c in claims}
        nodes = {c.node_name or "" for c in obs.claims} | {c.node_name or "" for c in claims}
        assert all(nxt.claim(n) is fresh.claim(n) for n in names)
        assert all(nxt.claim_on(n) is fresh.claim_on(n) for n in nodes)
        assert len(nxt._claims_by_name) == len(fresh._claims_by_name)
        obs = nxt


def test_the_pods_of_a_node_carried_over_are_the_ones_a_fresh_look_finds() -> None:
    pods = tuple(PodView("ns", f"p{i}", node_name=f"n{i % 3}") for i in range(9))
    obs = replace(_obs(), pods=pods, serial=1)
    assert [p.name for p in obs.pods_on("n1")] == ["p1", "p4", "p7"]
    moved = replace(pods[4], node_name="n2")  # a Pod evicted and bound elsewhere
    born = PodView("ns", "p0a", node_name="n1")
    now = (pods[0], born, *pods[1:4], moved, *pods[5:8])  # p8 left
    changes = MemberChanges(since=1, pods_added=(born, moved), pods_gone=(pods[4], pods[8]))
    after = replace(obs, pods=now, serial=2, changes=changes)
    after.inherit_indexes(obs)
    assert "_pods_by_node" in after.__dict__
    fresh = replace(after, serial=None, changes=None)
    for node in ("n0", "n1", "n2", "n9"):
        assert after.pods_on(node) == fresh.pods_on(node)
    assert [p.name for p in after.pods_on("n1")] == ["p0a", "p1", "p7"]
    assert [p.name for p in after.pods_on("n2")] == ["p2", "p4", "p5"]
