"""Lease leader election between replicas, against the local API server (real, short timings)."""

from __future__ import annotations

import asyncio
import itertools
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
from tests.waiting import HANG_SECONDS, until

#: The hand-over tests' timings: short, but a renew deadline that survives the event loop of a
#: loaded 2-core machine stalling for a few hundred ms (every replica shares the test's loop).
FAST = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.1}
#: Scaled down, but with the renew deadline close to the lease (as at the defaults, 10 of 15 s),
#: so a leader that overstays its deadline by one more request outlives the lease.
SCALED = {"lease_duration": 1.0, "renew_deadline": 0.8, "retry_period": 0.1}
DEFAULTS = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}
TIMINGS = [
    pytest.param(SCALED, id="scaled"),
    pytest.param(DEFAULTS, id="defaults", marks=pytest.mark.slow),
]


async def _replicas(
    clock: VirtualClock, api: KubeAPIServer, tmp_path: Path, timings: dict[str, float]
) -> list[KarpenterGateway]:
    gateways = []
    for i in range(2):
        config = tmp_path / f"kubeconfig-{i}"
        config.write_text(api.kubeconfig(token=f"replica-{i}"))
        gateways.append(
            KarpenterGateway(
                clock,
                kubeconfig=str(config),
                namespace=NAMESPACE,
                identity=f"replica-{i}",
                **timings,
            )
        )
    return gateways


@pytest.fixture
async def replicas(
    clock: VirtualClock, api: KubeAPIServer, tmp_path: Path
) -> AsyncIterator[list[KarpenterGateway]]:
    """Two controller replicas' gateways, each with its own identity and its own token."""
    gateways = await _replicas(clock, api, tmp_path, FAST)
    yield gateways
    for gw in gateways:
        await gw.close()


@pytest.fixture(params=TIMINGS)
async def timed_replicas(
    request: pytest.FixtureRequest, clock: VirtualClock, api: KubeAPIServer, tmp_path: Path
) -> AsyncIterator[tuple[list[KarpenterGateway], dict[str, float]]]:
    """Two replicas at the timings the test is parametrized with (scaled down, or defaults)."""
    timings: dict[str, float] = request.param
    gateways = await _replicas(clock, api, tmp_path, timings)
    yield gateways, timings
    for gw in gateways:
        await gw.close()


class Intervals:
    """Each elector's work intervals on the loop's clock: the evidence that two never overlap."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float | None]] = []

    def work(self, name: str) -> Callable[[], Coroutine[Any, Any, None]]:
        """Work that runs until cancelled, recording when it started and stopped."""

        async def work() -> None:
            loop = asyncio.get_running_loop()
            index = len(self.spans)
            self.spans.append((name, loop.time(), None))
            try:
                await asyncio.Event().wait()
            finally:
                self.spans[index] = (name, self.spans[index][1], loop.time())

        return work

    def started(self, name: str) -> bool:
        """Whether ``name``'s work has started at least once."""
        return any(n == name for n, _, _ in self.spans)

    def assert_never_overlap(self) -> None:
        """Every interval ends before the next one (of any elector) begins."""
        spans = sorted(self.spans, key=lambda s: s[1])
        for (a, _, a_end), (b, b_start, _) in itertools.pairwise(spans):
            assert a_end is not None and a_end <= b_start, f"{a} still worked when {b} started"


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


async def _until(predicate: Callable[[], bool], seconds: float = HANG_SECONDS) -> None:
    """Poll ``predicate`` (state another task changes): the suite's one waiting helper."""
    await until(predicate, seconds)


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
    assert spec["holderIdentity"] == "replica-0" and spec["leaseDurationSeconds"] == 2
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
    assert loop.time() - stopped_at < 1.8  # released: b did not wait out the 2 s lease
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
    # Stopped at its renew deadline (1.5 s after its last renewal, which came before the hang),
    # before the 2 s lease another replica would wait out runs out.
    assert loop.time() - hung_at < FAST["lease_duration"]
    await _until(lambda: "a stopped" in log)  # readiness drops first, then the work is stopped
    assert log == ["a started", "a stopped"]
    api.heal()
    run_a.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run_a


async def _stop(*runs: asyncio.Task[None]) -> None:
    for run in runs:
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run


async def _a_leads_b_campaigns(
    gateways: list[KarpenterGateway],
) -> tuple[LeaderElector, Intervals, asyncio.Task[None], asyncio.Task[None]]:
    """Replica a leads; then b campaigns. Returns a's elector, the intervals and both runs."""
    a, b = (gw.leader_elector() for gw in gateways)
    spans = Intervals()
    run_a = asyncio.create_task(a.run(spans.work("a")))
    await _until(lambda: a.is_leader)
    run_b = asyncio.create_task(b.run(spans.work("b")))
    return a, spans, run_a, run_b


async def test_a_leader_whose_renewals_fail_fast_then_hang_stops_before_a_rival_starts(
    api: KubeAPIServer, timed_replicas: tuple[list[KarpenterGateway], dict[str, float]]
) -> None:
    # The reproduced split brain: fast failures use up most of the renew deadline, then one
    # request hangs. Leadership must end at the absolute deadline, mid-request, not one whole
    # request timeout later (which would outlive the lease the rival waits out).
    gateways, timings = timed_replicas
    a, spans, run_a, run_b = await _a_leads_b_campaigns(gateways)
    api.fail_next("GET", "/leases/", 503, times=10**6, token="replica-0")
    await asyncio.sleep(timings["renew_deadline"] * 0.6)
    api.heal()
    api.stall_next("GET", "/leases/", 3 * timings["lease_duration"], times=10**6, token="replica-0")
    await _until(lambda: spans.started("b"), seconds=3 * timings["lease_duration"] + HANG_SECONDS)
    spans.assert_never_overlap()
    assert not a.is_leader
    assert [name for name, _, _ in spans.spans] == ["a", "b"]
    api.heal()
    await _stop(run_a, run_b)


async def test_a_dropped_connection_is_a_failed_attempt_not_a_crash(
    api: KubeAPIServer, timed_replicas: tuple[list[KarpenterGateway], dict[str, float]]
) -> None:
    # aiohttp's ServerDisconnectedError is no OSError: it used to end ``run`` (and the process).
    gateways, timings = timed_replicas
    a, spans, run_a, run_b = await _a_leads_b_campaigns(gateways)
    renewals = len(api.requests)
    api.drop_next("GET", "/leases/", token="replica-0")
    # One dropped renewal: the next one succeeds and a keeps leading throughout.
    await _until(
        lambda: (
            sum(r.token == "replica-0" for r in api.requests[renewals:] if r.method == "PUT") >= 1
        ),
        seconds=3 * timings["retry_period"] + 10,
    )
    assert not run_a.done() and a.is_leader and not spans.started("b")
    # Every request of a's now drops: a stops at its deadline, b takes over, never together.
    api.drop_next("*", "/leases/", times=10**6, token="replica-0")
    await _until(lambda: spans.started("b"), seconds=3 * timings["lease_duration"] + HANG_SECONDS)
    assert not run_a.done() and not a.is_leader  # still campaigning, not crashed
    spans.assert_never_overlap()
    api.heal()
    await _stop(run_a, run_b)


def test_campaign_retries_are_jittered() -> None:
    # Replicas that lost together must not retry in lock-step: each pause is drawn from
    # [retry_period, retry_period * (1 + 1.2)], as client-go's JitterUntil does.
    async def factory() -> Any:
        raise AssertionError("not reached")

    draws = iter([0.0, 0.5, 1.0])
    elector = LeaderElector(
        factory, namespace="n", name="l", identity="i", retry_period=2.0, jitter=lambda: next(draws)
    )
    assert [elector.retry_pause() for _ in range(3)] == pytest.approx([2.0, 3.2, 4.4])
    spread = LeaderElector(factory, namespace="n", name="l", identity="i", retry_period=2.0)
    pauses = {spread.retry_pause() for _ in range(20)}
    assert len(pauses) > 1 and all(2.0 <= p <= 4.4 for p in pauses)
