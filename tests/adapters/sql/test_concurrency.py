"""Concurrent writers on the database under test: races for the last slot, bursts, identical
request ids, crossing moves, and a randomised soak whose counters must equal the recomputation
from the placements afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections import defaultdict

import pytest

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import ALLOCATION, Capacity, Resources
from fleetgate.domain.capacity.errors import PlacementNotFound
from fleetgate.domain.capacity.model import Admission, AdmitRequest, MoveRequest, NodeSpec


def req(node: str, size: Resources, **kw: object) -> AdmitRequest:
    return AdmitRequest("team", node, size, **kw)  # type: ignore[arg-type]


async def assert_counters_match_placements(ledger: SqlLedger) -> None:
    """Every counter equals the sum over the placements it covers; none negative or over."""
    placements = await ledger.placements()
    per_node: dict[str, Resources] = defaultdict(Resources)
    demand: dict[str, float] = defaultdict(float)
    total = Resources()
    for p in placements:
        per_node[p.node] = per_node[p.node].plus(p.resources)
        demand[p.node] += p.demand
        total = total.plus(p.resources)
    for node in await ledger.nodes():
        assert node.used == per_node[node.name], node.name
        # The clock stands still in these tests, so nothing has decayed: demand is exact sums.
        assert math.isclose(node.expected_demand, demand[node.name], abs_tol=1e-6), node.name
        assert all(0 <= node.used.get(d) <= node.limits.get(d) for d in ALLOCATION)
    cluster = await ledger.cluster()
    assert cluster.unclaimed_used == total
    assert all(total.get(d) <= cluster.total.get(d) for d in ALLOCATION)


async def test_writers_racing_for_the_last_slot_admit_exactly_one(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("n", Capacity(1, 4096, 100)))  # 3 vCPUs
    await ledger.admit(req("n", Resources(2, 0, 0)))
    for _ in range(10):
        results = await asyncio.gather(*(ledger.admit(req("n", Resources(1, 1, 1)))
                                         for _ in range(8)))  # fmt: skip
        winners = [r for r in results if r.admitted]
        assert len(winners) == 1
        losers = [r.denial for r in results if not r.admitted]
        assert all(d is not None and d.exceeded == {"cpus"} for d in losers)
        assert winners[0].placement is not None
        await ledger.release(winners[0].placement.id)
    await assert_counters_match_placements(ledger)


async def burst_onto_room_for_five(ledger: SqlLedger) -> list[Admission]:
    """Fifty callers each try a CPU-bound node (room for 3), then a memory-bound one (for 2)."""
    await ledger.add_node(NodeSpec("cpu-bound", Capacity(2, 100_000, 1000)))  # 6 vCPUs: 3 x 2
    await ledger.add_node(NodeSpec("mem-bound", Capacity(64, 4096, 1000)))  # 2 x 2048 MB
    size = Resources(2, 2048, 10)

    async def walk() -> Admission:
        for node in ("cpu-bound", "mem-bound"):
            admission = await ledger.admit(req(node, size, demand=1.2))
            if admission.admitted:
                return admission
        return admission

    return list(await asyncio.gather(*(walk() for _ in range(50))))


async def test_a_burst_over_two_bounded_nodes_admits_exactly_what_fits(ledger: SqlLedger) -> None:
    results = await burst_onto_room_for_five(ledger)
    placed = [r.placement for r in results if r.placement is not None]
    assert len(placed) == 5
    assert sorted(p.node for p in placed) == ["cpu-bound"] * 3 + ["mem-bound"] * 2
    await assert_counters_match_placements(ledger)


async def test_racing_identical_requests_admit_once(ledger: SqlLedger) -> None:
    await ledger.add_node(NodeSpec("n", Capacity(16, 65536, 1000)))
    results = await asyncio.gather(
        *(ledger.admit(req("n", Resources(1, 1, 1), request_id="once")) for _ in range(8))
    )
    ids = {r.placement.id for r in results if r.placement is not None}
    assert len(ids) == 1 and sum(not r.replayed for r in results) == 1
    assert len(await ledger.placements()) == 1
    await assert_counters_match_placements(ledger)


async def test_crossing_moves_never_deadlock_for_the_caller(ledger: SqlLedger) -> None:
    for name in ("a", "b"):
        await ledger.add_node(NodeSpec(name, Capacity(16, 65536, 1000)))
    one = (await ledger.admit(req("a", Resources(1, 1, 1)))).placement
    two = (await ledger.admit(req("b", Resources(1, 1, 1)))).placement
    assert one is not None and two is not None
    for i in range(10):
        there, back = ("b", "a") if i % 2 == 0 else ("a", "b")
        moved = await asyncio.gather(
            ledger.move(MoveRequest(one.id, there)), ledger.move(MoveRequest(two.id, back))
        )
        assert all(m.admitted for m in moved)
    await assert_counters_match_placements(ledger)


@pytest.mark.parametrize("seed", [1, 2])
async def test_a_randomised_soak_keeps_every_counter_exact(ledger: SqlLedger, seed: int) -> None:
    names = ["n1", "n2", "n3"]
    for name in names:
        await ledger.add_node(NodeSpec(name, Capacity(2, 8192, 80)))  # 6 vCPUs each
    rng = random.Random(seed)

    async def worker(worker_rng: random.Random) -> None:
        for _ in range(25):
            mine = await ledger.placements()
            op = worker_rng.random()
            if op < 0.5 or not mine:
                size = Resources(worker_rng.randint(0, 3), worker_rng.randint(0, 3000),
                                 worker_rng.randint(0, 30))  # fmt: skip
                await ledger.admit(req(worker_rng.choice(names), size, demand=size.cpus * 0.6))
            elif op < 0.75:
                p = worker_rng.choice(mine)
                move = MoveRequest(p.id, worker_rng.choice(names), demand=p.resources.cpus * 0.6)
                with contextlib.suppress(PlacementNotFound):  # another worker released it
                    await ledger.move(move)
            else:
                await ledger.release(worker_rng.choice(mine).id)

    await asyncio.gather(*(worker(random.Random(rng.random())) for _ in range(8)))
    await assert_counters_match_placements(ledger)
