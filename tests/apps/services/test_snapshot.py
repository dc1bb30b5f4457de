"""The node snapshot: read at most once per max_age, shared by concurrent requests, invalidated."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.apps.settings import ConfigError, load_settings
from fleetgate.domain.capacity.dimensions import Capacity
from fleetgate.domain.capacity.model import NodeSpec, NodeState
from tests.fakes.ledger import InMemoryLedger


def names(candidates: object) -> list[str]:
    return sorted(r.node.name for band in candidates.bands for r in band.members)  # type: ignore[attr-defined]


async def add(ledger: InMemoryLedger, name: str, pool: str = "") -> None:
    await ledger.add_node(NodeSpec(name, Capacity(4, 4096, 40), pool=pool))


async def test_nodes_are_read_at_most_once_per_max_age(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    snapshot = NodeSnapshot(ledger, clock, 0.75, max_age=1.0)
    await add(ledger, "a")
    assert names(await snapshot.candidates()) == ["a"]
    await add(ledger, "b")
    clock.advance(timedelta(seconds=0.999))
    assert names(await snapshot.candidates()) == ["a"]  # still within the bound
    assert snapshot.reads == 1
    clock.advance(timedelta(seconds=0.001))
    assert names(await snapshot.candidates()) == ["a", "b"]  # never older than max_age
    assert snapshot.reads == 2


async def test_age_zero_reads_every_request(ledger: InMemoryLedger, clock: VirtualClock) -> None:
    snapshot = NodeSnapshot(ledger, clock, 0.75, max_age=0)
    await add(ledger, "a")
    await snapshot.candidates()
    await add(ledger, "b")
    assert names(await snapshot.candidates()) == ["a", "b"] and snapshot.reads == 2


async def test_pools_and_cordons_are_filtered_from_one_read(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    snapshot = NodeSnapshot(ledger, clock, 0.75, max_age=5)
    await add(ledger, "g1", "gpu")
    await add(ledger, "g2", "gpu")
    await add(ledger, "c1", "cpu")
    await ledger.cordon("g2")
    assert names(await snapshot.candidates("gpu")) == ["g1"]
    assert names(await snapshot.candidates("cpu")) == ["c1"]
    assert names(await snapshot.candidates()) == ["c1", "g1"]
    assert snapshot.reads == 1


async def test_invalidate_makes_the_next_request_read(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    snapshot = NodeSnapshot(ledger, clock, 0.75, max_age=60)
    await snapshot.candidates()
    await add(ledger, "a")
    snapshot.invalidate()
    assert names(await snapshot.candidates()) == ["a"]


class _SlowLedger:
    """Counts reads of every node and holds each read until released."""

    def __init__(self, ledger: InMemoryLedger) -> None:
        self.ledger = ledger
        self.reads = 0
        self.release = asyncio.Event()

    async def nodes(self) -> list[NodeState]:
        self.reads += 1
        await self.release.wait()
        return await self.ledger.nodes()


async def test_concurrent_requests_share_one_refresh(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await add(ledger, "a")
    slow = _SlowLedger(ledger)
    snapshot = NodeSnapshot(slow, clock, 0.75, max_age=1.0)  # type: ignore[arg-type]
    waiting = [asyncio.create_task(snapshot.candidates()) for _ in range(20)]
    await asyncio.sleep(0)
    slow.release.set()
    results = await asyncio.gather(*waiting)
    assert slow.reads == 1 and all(r is results[0] for r in results)


async def test_an_invalidate_during_a_read_is_not_lost(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    slow = _SlowLedger(ledger)
    snapshot = NodeSnapshot(slow, clock, 0.75, max_age=60)  # type: ignore[arg-type]
    reading = asyncio.create_task(snapshot.candidates())
    await asyncio.sleep(0)
    await add(ledger, "a")  # may or may not be seen by the read in flight
    snapshot.invalidate()
    slow.release.set()
    await reading
    assert names(await snapshot.candidates()) == ["a"] and slow.reads == 2


def test_the_setting_is_validated_and_named(tmp_path: Path) -> None:
    assert load_settings().capacity.snapshot_seconds == 1.0
    with pytest.raises(ConfigError, match="snapshot_seconds"):
        load_settings(capacity={"snapshot_seconds": -1})
    with pytest.raises(ValueError, match="max_age"):
        NodeSnapshot(None, None, 0.75, max_age=-1)  # type: ignore[arg-type]
