"""Lease leader election between replicas, against the local API server (real, short timings)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.adapters.karpenter.leader import LeaderElector
from tests.adapters.karpenter.conftest import NAMESPACE
from tests.adapters.karpenter.kubeapi import KubeAPIServer

FAST = {"lease_duration": 1.0, "renew_deadline": 0.5, "retry_period": 0.05}


@pytest.fixture
async def replicas(
    clock: VirtualClock, api: KubeAPIServer, tmp_path: Path
) -> AsyncIterator[list[KarpenterGateway]]:
    """Two controller replicas' gateways, each with its own identity and its own token."""
    gateways = []
    for i in range(2):
        config = tmp_path / f"kubeconfig-{i}"
        config.write_text(api.kubeconfig(token=f"replica-{i}"))
        gateways.append(
            KarpenterGateway(
                clock, kubeconfig=str(config), namespace=NAMESPACE, identity=f"replica-{i}", **FAST
            )
        )
    yield gateways
    for gw in gateways:
        await gw.close()


def _work(
    log: list[str], name: str, done: asyncio.Event | None = None
) -> Callable[[], Coroutine[Any, Any, None]]:
    async def work() -> None:
        log.append(f"{name} started")
        try:
            if done is None:
                await asyncio.Event().wait()  # runs until cancelled
            else:
                await done.wait()
        finally:
            log.append(f"{name} stopped")

    return work


async def _until(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` (state another task changes) for up to 10 s (a loaded CI machine)."""
    async with asyncio.timeout(10.0):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.01)


def _lease(api: KubeAPIServer) -> dict[str, Any]:
    lease = api.get("Lease", "fleetgate-controller", NAMESPACE)
    assert lease is not None
    return lease["spec"]


async def test_single_replica_leads_runs_and_releases(
    api: KubeAPIServer, replicas: list[KarpenterGateway]
) -> None:
    elector = replicas[0].leader_elector()
    log: list[str] = []
    done = asyncio.Event()
    runner = asyncio.create_task(elector.run(_work(log, "a", done)))
    await _until(lambda: log == ["a started"])
    assert elector.is_leader
    spec = _lease(api)
    assert spec["holderIdentity"] == "replica-0" and spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0

    done.set()
    await runner
    assert not elector.is_leader
    assert "holderIdentity" not in _lease(api)  # released for the next replica


async def test_only_one_of_two_replicas_acts_and_shutdown_hands_over_at_once(
    api: KubeAPIServer, replicas: list[KarpenterGateway]
) -> None:
    a, b = (gw.leader_elector() for gw in replicas)
    log: list[str] = []
    run_a = asyncio.create_task(a.run(_work(log, "a")))
    await _until(lambda: a.is_leader)
    run_b = asyncio.create_task(b.run(_work(log, "b")))
    await asyncio.sleep(0.3)  # several of b's retry periods
    assert log == ["a started"] and not b.is_leader

    loop = asyncio.get_running_loop()
    stopped_at = loop.time()
    run_a.cancel()  # replica a shuts down (SIGTERM)
    with pytest.raises(asyncio.CancelledError):
        await run_a
    await _until(lambda: log[-1] == "b started")
    assert loop.time() - stopped_at < 0.9  # released: b did not wait out the 1 s lease
    assert log == ["a started", "a stopped", "b started"]
    assert _lease(api)["holderIdentity"] == "replica-1"
    assert _lease(api)["leaseTransitions"] == 1

    run_b.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run_b


async def test_a_leader_that_cannot_renew_stops_and_the_other_takes_over(
    api: KubeAPIServer, replicas: list[KarpenterGateway]
) -> None:
    a, b = (gw.leader_elector() for gw in replicas)
    log: list[str] = []
    run_a = asyncio.create_task(a.run(_work(log, "a")))
    await _until(lambda: a.is_leader)
    run_b = asyncio.create_task(b.run(_work(log, "b")))

    # Replica a is cut off from the API server: every lease read it makes fails.
    api.fail_next("GET", "/leases/", 503, times=10**6, token="replica-0")
    await _until(lambda: not a.is_leader)
    # Leadership (and readiness) drops first; the work is then cancelled and awaited.
    await _until(lambda: "a stopped" in log)
    assert log == ["a started", "a stopped"]  # cancelled once its renew deadline passed
    await _until(lambda: log[-1] == "b started")  # b waited out the lease a stopped renewing
    assert log == ["a started", "a stopped", "b started"] and b.is_leader
    api.heal()  # the partition heals: a campaigns again, but the lease is b's
    await asyncio.sleep(0.2)
    assert not a.is_leader and _lease(api)["holderIdentity"] == "replica-1"
    for run in (run_a, run_b):
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run


async def test_losing_a_race_is_normal_not_an_error(
    api: KubeAPIServer, replicas: list[KarpenterGateway], caplog: pytest.LogCaptureFixture
) -> None:
    a, b = (gw.leader_elector() for gw in replicas)
    api.fail_next("POST", "/leases", 409)  # someone else created the lease first
    caplog.set_level(logging.WARNING)
    assert await a.try_acquire_or_renew() is False
    assert await a.try_acquire_or_renew() is True
    api.fail_next("PUT", "/leases/", 409)  # a concurrent writer between a's read and write
    assert await a.try_acquire_or_renew() is False
    assert await b.try_acquire_or_renew() is False  # held and not expired
    assert [r.levelname for r in caplog.records] == []


def test_timings_must_nest() -> None:
    async def factory() -> Any:
        raise AssertionError("not reached")

    with pytest.raises(ValueError, match="lease_duration > renew_deadline > retry_period"):
        LeaderElector(
            factory,
            namespace="n",
            name="l",
            identity="i",
            lease_duration=1,
            renew_deadline=2,
            retry_period=0.1,
        )


async def test_a_leader_whose_requests_hang_stops_before_its_lease_runs_out(
    api: KubeAPIServer, replicas: list[KarpenterGateway]
) -> None:
    a = replicas[0].leader_elector()
    log: list[str] = []
    run_a = asyncio.create_task(a.run(_work(log, "a")))
    await _until(lambda: a.is_leader)
    loop = asyncio.get_running_loop()
    hung_at = loop.time()
    api.stall_next("GET", "/leases/", 30.0, times=10**6)  # the API server stops answering
    await _until(lambda: not a.is_leader)
    # Stopped within its renew deadline (0.5 s) plus one bounded attempt, well inside the 1 s
    # lease another replica would wait out.
    assert loop.time() - hung_at < 1.0
    assert log == ["a started", "a stopped"]
    api.heal()
    run_a.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run_a
