"""The fake cluster's tables keep every index exactly what a walk of their records would find."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.adapters.fakecluster.model import is_placeholder
from fleetgate.domain.rotation.cluster import PlaceholderSpec
from tests.strategies import fake_cluster_operations

T0 = datetime(2024, 1, 1, tzinfo=UTC)
POOLS = ("a", "b")
_ABSENT = object()  # a group_of result: the record is in no group of this index


def _grouped(
    items: Iterable[Any], group_of: Callable[[Any], Any], key_of: Callable[[Any], Hashable]
) -> dict[Any, dict[Hashable, int]]:
    """What a walk finds: per group, each member's key and identity (empty groups absent)."""
    out: dict[Any, dict[Hashable, int]] = {}
    for item in items:
        group = group_of(item)
        if group is not _ABSENT:
            out.setdefault(group, {})[key_of(item)] = id(item)
    return out


def _held(index: Mapping[Any, Mapping[Any, Any]]) -> dict[Any, dict[Hashable, int]]:
    """What an index holds, in the same shape as ``_grouped``."""
    return {group: {key: id(v) for key, v in members.items()} for group, members in index.items()}


def assert_indexes_exact(cluster: FakeCluster) -> None:
    """Every claim and Pod index against a from-scratch walk of the records (order included
    where the cluster iterates one in order)."""
    claims, pods = cluster.claims, cluster.pods
    by_name = lambda c: c.name  # noqa: E731
    by_key = lambda p: p.key  # noqa: E731
    assert _held(claims.of_pool) == _grouped(claims.values(), lambda c: c.pool, by_name)
    launching = _grouped(
        claims.values(),
        lambda c: c.pool if not c.ready and c.deleting_at is None else _ABSENT,
        by_name,
    )
    assert _held(claims.launching) == launching
    for pool in {*POOLS, *(c.pool for c in claims.values())}:
        walk = sorted(
            (c for c in claims.values() if c.pool == pool and not c.ready and not c.deleting_at),
            key=by_name,
        )
        assert claims.launching_in(pool) == walk
        assert claims.count_in(pool) == sum(c.pool == pool for c in claims.values())

    nominated = _grouped(pods.values(), lambda p: p.nominated_claim or _ABSENT, by_key)
    assert _held(pods.nominated) == nominated
    for claim in {*nominated, *claims, *cluster.archive}:
        walk_pods = [p for p in pods.values() if p.nominated_claim == claim]
        assert [id(p) for p in pods.nominated_to(claim)] == [id(p) for p in walk_pods]
    placeholders = _grouped(
        pods.values(), lambda p: p.pool if is_placeholder(p) else _ABSENT, by_key
    )
    assert _held(pods.placeholders) == placeholders
    for of in (*POOLS, None):  # None: every pool's
        walk_pods = [p for p in pods.values() if is_placeholder(p) and of in (None, p.pool)]
        assert [id(p) for p in pods.placeholders_of(of)] == [id(p) for p in walk_pods]
    pending = _grouped(pods.values(), lambda p: p.pool if p.node_name is None else _ABSENT, by_key)
    assert _held(pods.pending_in) == pending
    assert {key: id(p) for key, p in pods.pending.items()} == {
        key: id(p) for key, p in pods.items() if p.node_name is None
    }
    assert _held(pods.bound) == _grouped(pods.values(), lambda p: p.node_name or _ABSENT, by_key)

    # The placement indexes the scheduler's searches rest on.
    hosts: dict[int, dict[str, int]] = {}
    used: dict[str, dict[str, int]] = {}
    for pod in pods.values():
        if pod.node_name is not None:
            on = hosts.setdefault(pod.priority, {})
            on[pod.node_name] = on.get(pod.node_name, 0) + 1
            for name, value in pod.requests.items():
                node_used = used.setdefault(pod.node_name, {})
                node_used[name] = node_used.get(name, 0) + value
    assert {level: on for level, on in pods._hosts.items() if on} == hosts
    assert {
        node: {name: v for name, v in amounts.items() if v}
        for node, amounts in pods._used.items()
        if any(amounts.values())
    } == {node: {n: v for n, v in amounts.items() if v} for node, amounts in used.items()}
    launched = {c.name: c.node for c in claims.values() if c.node is not None}
    assert {name: id(n) for name, n in pods._nodes.items()} == {
        name: id(n) for name, n in launched.items()
    }
    for resource, entries in pods._free.items():
        assert entries == sorted(
            (n.allocatable.get(resource, 0) - used.get(n.name, {}).get(resource, 0), n.name)
            for n in launched.values()
            if n is not None
        )


async def _apply(
    cluster: FakeCluster, clock: VirtualClock, op: tuple[str, int, int], n: int
) -> None:
    """One operation; ``target`` and ``variant`` pick among what exists now."""
    kind, target, variant = op
    pool, other = POOLS[target % 2], POOLS[(target + 1) % 2]
    names = sorted(cluster.claims)
    claim = cluster.claims[names[target % len(names)]] if names else None
    keys = sorted(cluster.pods)
    pod = cluster.pods[keys[target % len(keys)]] if keys else None
    requests = {"cpu": 1_000 * (1 + variant % 4)}
    if kind == "add-node":
        cluster.add_node(pool, workload=requests if variant % 2 else None)
    elif kind == "add-pending-node":
        cluster.add_node(pool, ready=False)
    elif kind == "add-pod":
        affinity = None if variant == 5 else pool
        cluster.add_pod("app", f"pod-{n}", requests=requests, pool=affinity, priority=variant % 2)
    elif kind == "add-bare-pod":  # negative priority and no owner: counted as a placeholder
        affinity = None if variant == 5 else pool
        priority = -10 if variant % 2 else 0
        name = f"bare-{n}"
        cluster.add_pod(
            "bare", name, requests=requests, pool=affinity, owner_kind=None, priority=priority
        )
    elif kind == "create-placeholder":
        spec = PlaceholderSpec(
            namespace="ns",
            name=f"ph-{n}",
            pool=pool,
            surge_for=claim.name if claim else "none",
            requests=requests,
            avoid_hosts=(claim.name,) if claim else (),
        )
        await cluster.create_placeholder(spec)
    elif kind == "delete-pod" and pod is not None:
        await cluster.delete_placeholder(*pod.key)  # deletes whatever Pod has that key
    elif kind == "delete-claim" and claim is not None:
        await cluster.delete_claim(claim.name)
    elif kind in ("not-ready", "ready-again") and claim is not None and claim.node is not None:
        cluster.set_ready(claim.name, kind == "ready-again")
    elif kind == "advance":
        seconds = (1, 30, 60, 120, 300, 600)[variant]
        cluster.advance_to(clock.now() + timedelta(seconds=seconds))
    elif kind == "fail-provisioning":
        cluster.fail_provisioning(pool, on=variant % 2 == 0)
    elif kind == "capacity-shortage":
        cluster.capacity_shortage(pool, on=variant % 2 == 0)
    elif kind == "pool-not-ready":
        cluster.set_pool_ready(pool, variant % 2 == 1)
    elif kind == "preempt-placeholders":
        cluster.preempt_placeholders(pool if variant % 2 else None)
    elif kind == "karpenter-disrupts" and claim is not None and claim.deleting_at is None:
        cluster.karpenter_disrupt(claim.name)
    elif kind == "disrupt-later" and claim is not None:
        cluster.disrupt_at(claim.name, clock.now() + timedelta(seconds=30 * variant))
    elif kind == "write-pod" and pod is not None:
        _write_pod(pod, variant, other, claim.name if claim else None)
    elif kind == "write-claim" and claim is not None:
        if variant in (0, 1):
            claim.ready = not claim.ready
        elif variant in (2, 3):
            claim.deleting_at = clock.now() if claim.deleting_at is None else None
        else:
            claim.pool = other


def _write_pod(pod: Any, variant: int, other: str, claim: str | None) -> None:
    """Write one indexed attribute of ``pod`` directly, as no cluster method would."""
    if variant == 0:
        pod.priority = 0 if pod.priority < 0 else -10
    elif variant == 1:
        pod.owner_kind = "ReplicaSet" if pod.owner_kind is None else None
    elif variant == 2:
        pod.pool = None if pod.pool == other else other
    elif variant == 3:
        pod.nominated_claim = claim
    elif variant == 4:
        pod.nominated_claim = None
    else:
        pod.node_name = None


async def _run(ops: list[tuple[str, int, int]]) -> None:
    clock = VirtualClock(T0)
    cluster = FakeCluster(clock)
    for pool in POOLS:
        cluster.add_pool(pool, expire_after="1h", termination_grace_period="20m")
    cluster.add_node("a", workload={"cpu": 3_000})
    assert_indexes_exact(cluster)
    for n, op in enumerate(ops):
        await _apply(cluster, clock, op, n)
        assert_indexes_exact(cluster)


@settings(max_examples=300)
@given(fake_cluster_operations())
def test_every_index_matches_a_walk_after_any_sequence_of_changes(
    ops: list[tuple[str, int, int]],
) -> None:
    asyncio.run(_run(ops))


# --- the check itself, and what the indexes answer ----------------------------------------------


@pytest.fixture
def cluster() -> FakeCluster:
    fc = FakeCluster(VirtualClock(T0))
    for pool in POOLS:
        fc.add_pool(pool, expire_after="14d")
    return fc


@pytest.mark.parametrize(
    ("record", "attribute", "value"),
    [
        ("pod", "nominated_claim", None),
        ("pod", "pool", "b"),
        ("pod", "priority", -10),
        ("pod", "node_name", "a-0001"),
        ("claim", "ready", True),
        ("claim", "deleting_at", T0),
        ("claim", "pool", "b"),
    ],
)
def test_a_write_that_bypasses_the_hooks_fails_the_check(
    cluster: FakeCluster, record: str, attribute: str, value: object
) -> None:
    cluster.add_node("a", ready=False)  # a-0001, launching
    cluster.add_pod("ns", "p", requests={"cpu": 1_000}, pool="a", owner_kind=None)
    cluster.clock.advance(timedelta(seconds=1))
    cluster.catch_up()  # the batch window passed: p is nominated to a new claim
    pod = cluster.pods["ns", "p"]
    assert pod.nominated_claim is not None and pod.node_name is None
    assert_indexes_exact(cluster)
    target = pod if record == "pod" else cluster.claims["a-0001"]
    object.__setattr__(target, attribute, value)  # as if the hook were missing
    with pytest.raises(AssertionError):
        assert_indexes_exact(cluster)


def test_launching_claims_are_by_name_and_a_claim_that_falls_back_not_ready_rejoins(
    cluster: FakeCluster,
) -> None:
    for name in ("a-3", "a-1", "a-2"):
        cluster.add_node("a", name, ready=False)
    cluster.add_node("a", "a-0")
    assert [c.name for c in cluster.claims.launching_in("a")] == ["a-1", "a-2", "a-3"]
    cluster.set_ready("a-0", False)  # a fault: the Ready node drops back
    cluster.set_ready("a-2", True)
    assert [c.name for c in cluster.claims.launching_in("a")] == ["a-0", "a-1", "a-3"]
    asyncio.run(cluster.delete_claim("a-1"))
    assert [c.name for c in cluster.claims.launching_in("a")] == ["a-0", "a-3"]
    assert cluster.claims.launching_in("b") == [] and cluster.claims.count_in("a") == 4


def test_nominated_pods_come_in_the_tables_order_and_leave_with_their_claim(
    cluster: FakeCluster,
) -> None:
    cluster.add_node("a", "a-0", ready=False)
    names = [f"p{i}" for i in range(3)]
    for name in names:
        cluster.add_pod("ns", name, pool="b", requests={"cpu": 1})
    for name in reversed(names):  # nominated in the reverse of the table's order
        cluster.pods["ns", name].nominated_claim = "a-0"
    assert [p.name for p in cluster.pods.nominated_to("a-0")] == names
    cluster.karpenter.remove_claim(cluster.claims["a-0"], T0)
    assert cluster.pods.nominated_to("a-0") == [] and cluster.pods.nominated == {}
    assert all(cluster.pods["ns", name].nominated_claim is None for name in names)


def test_the_next_batch_is_due_only_while_a_pod_of_its_pool_is_pending(
    cluster: FakeCluster,
) -> None:
    cluster.add_pod("ns", "p", pool="a", requests={"cpu": 1_000})
    still_due = cluster.karpenter.still_due
    assert still_due("batch", "a") and not still_due("batch", "b")
    cluster.pods["ns", "p"].pool = "b"
    assert not still_due("batch", "a") and still_due("batch", "b")
