"""The controller on a real cluster backend: preflight, then leader election, then the loop.

Two controller replicas (each its own RotationController, gateway and identity) run against the
local Kubernetes API server; Karpenter's reactions are played between passes. A rotation started
by one replica is finished by the other after a hand-over.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.karpenter.connection import KubernetesAPIError
from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.apps.container import build_container
from fleetgate.apps.controller.command import _main
from fleetgate.apps.controller.endpoints import ControllerEndpoints
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.runtime import PreflightFailed, run_on_cluster
from fleetgate.apps.controller.shell import PassResult, RotationController
from fleetgate.apps.settings import load_settings
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.machine import MachineConfig
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.windows import MaintenanceWindow
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import KubeAPIServer
from tests.waiting import HANG_SECONDS, until

NAMESPACE = "fleetgate-system"
ALWAYS = MaintenanceWindow(
    "UTC", ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), "00:00", "24:00"
)
POLICY = RotationPolicy(
    name="all", node_pool_selector=LabelSelector(), maintenance_windows=(ALWAYS,)
)
# Both replicas share this process's event loop, so one replica's synchronous start-up (its API
# client loads the system CA bundle: ~0.2 s here, more on a loaded machine) stalls the other's
# renewals; leadership ends at an absolute renew deadline, so that deadline must outlast such a
# stall. A partitioned leader is still replaced within about two seconds.
FAST = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.1}


class Replica:
    """One controller process: its gateway (own identity and token), controller, endpoints."""

    def __init__(self, name: str, api: KubeAPIServer, clock: VirtualClock, tmp: Path) -> None:
        config = tmp / f"kubeconfig-{name}"
        config.write_text(api.kubeconfig(token=name))
        self.name = name
        self.gateway = KarpenterGateway(
            clock, kubeconfig=str(config), namespace=NAMESPACE, identity=name, **FAST
        )

        async def policies() -> list[RotationPolicy]:
            return [POLICY]

        self.passes: list[PassResult] = []
        self.controller = RotationController(
            self.gateway,
            policies,
            clock,
            self.gateway.event_sink(),
            RotationMetrics(CollectorRegistry()),
            MachineConfig(namespace=NAMESPACE),
            on_pass=self.passes.append,
        )
        self.endpoints = ControllerEndpoints(
            CollectorRegistry(), lambda: False, metrics_port=None, probes_port=0
        )
        self.task: asyncio.Task[list[PassResult]] | None = None

    def start(self, loop: Callable[[], object]) -> None:
        self.task = asyncio.create_task(
            run_on_cluster(self.controller, loop, endpoints=self.endpoints)  # type: ignore[arg-type]
        )

    async def ready(self) -> int:
        return await self._probe("/readyz")

    async def leads(self) -> int:
        return await self._probe("/leaderz")

    async def _probe(self, path: str) -> int:
        url = f"http://127.0.0.1:{self.endpoints.ports['probes']}{path}"
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            return response.status

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(datetime(2026, 1, 7, 2, 0, tzinfo=UTC))


@pytest.fixture
async def api(clock: VirtualClock) -> AsyncIterator[KubeAPIServer]:
    async with KubeAPIServer(now=clock.now) as server:
        yield server


def karpenter_loop(
    replica: Replica, sim: KarpenterSim, clock: VirtualClock
) -> Callable[[], object]:
    """The real loop's shape in virtual time: pass when due, then time moves and Karpenter acts."""

    async def loop(wake: asyncio.Event) -> list[PassResult]:
        while True:
            try:
                await replica.controller.run_due()
            except KubernetesAPIError:
                await asyncio.sleep(0.02)  # as run_loop does: cut off, try again later
                continue
            due = replica.controller.next_due()
            if due is not None:
                clock.set(due)
            sim.provision()
            sim.terminate()
            await asyncio.sleep(0.02)

    return loop


async def _probed(replica: Replica, probe: Callable[[], Awaitable[int]], status: int) -> None:
    async with asyncio.timeout(HANG_SECONDS):  # the replica's task may not have started yet
        while True:
            if "probes" in replica.endpoints.ports and await probe() == status:
                return
            await asyncio.sleep(0.02)


def _pool(api: KubeAPIServer) -> dict[str, str]:
    return dict((api.get("NodePool", "pool") or {})["metadata"].get("annotations") or {})


@pytest.mark.parametrize("how", ["shutdown", "partition"])
async def test_leader_hand_over_mid_rotation_and_the_other_replica_finishes_it(
    api: KubeAPIServer, clock: VirtualClock, tmp_path: Path, how: str
) -> None:
    sim = KarpenterSim(api)
    api.seed(nodepool("pool", expire_after="336h", tgp="1h"))
    old, node = sim.node("pool", created=clock.now() - timedelta(days=14) + timedelta(minutes=30))
    sim.pod("web-0", node, {"cpu": "3"})
    a, b = Replica("replica-a", api, clock, tmp_path), Replica("replica-b", api, clock, tmp_path)
    # Karpenter is slow to provision while a leads, so the rotation is mid-flight at hand-over.
    sim.shortage = True
    a.start(karpenter_loop(a, sim, clock))
    await until(lambda: bool(a.passes))
    b.start(karpenter_loop(b, sim, clock))
    await until(lambda: _pool(api).get(ann.ACTIVE_ROTATION) == old)
    await until(lambda: bool(api.list("Pod", NAMESPACE)))  # a created the placeholder
    await _probed(b, b.ready, 200)  # a standby is Ready too, once its preflight passed
    assert await a.ready() == 200
    assert (await a.leads(), await b.leads()) == (200, 503)  # leadership is reported apart
    assert b.passes == []  # the follower never acted

    if how == "shutdown":
        await a.stop()  # SIGTERM: the lease is released and b takes over at once
    else:
        api.fail_next("*", "", 503, times=10**6, token="replica-a")  # a is cut off entirely
        await until(lambda: b.passes != [])  # b waited out the lease a could not renew
        assert await a.leads() == 503
    sim.shortage = False
    await until(lambda: ann.LAST_ROTATION_AT in _pool(api))

    assert b.passes, "the second replica finished the rotation"
    assert api.get("NodeClaim", old) is None
    assert ann.ACTIVE_ROTATION not in _pool(api)
    assert api.list("Pod", NAMESPACE) == []
    assert (api.get("Lease", "fleetgate-controller", NAMESPACE) or {})["spec"][
        "holderIdentity"
    ] == "replica-b"
    assert (await b.ready(), await b.leads()) == (200, 200)
    if how == "partition":
        assert a.task is not None and not a.task.done()  # a keeps campaigning, acts no more
        api.heal()
        await _probed(a, a.ready, 200)  # a Ready standby again, however long that takes here
        assert await a.leads() == 503
        await a.stop()
    await b.stop()
    for replica in (a, b):
        await replica.gateway.close()


async def test_preflight_failure_stops_before_campaigning_or_acting(
    api: KubeAPIServer, clock: VirtualClock, tmp_path: Path
) -> None:
    api.unserve("karpenter.sh", "v1")
    replica = Replica("replica-a", api, clock, tmp_path)
    ran = False

    async def loop(wake: asyncio.Event) -> list[PassResult]:
        nonlocal ran
        ran = True
        return []

    with pytest.raises(PreflightFailed, match=r"does not serve karpenter\.sh/v1"):
        await run_on_cluster(replica.controller, loop, endpoints=replica.endpoints)
    assert not ran
    assert api.writes() == []  # no Lease, no annotation, nothing


async def test_a_preflight_that_gets_no_answer_fails_within_its_bound(
    api: KubeAPIServer, clock: VirtualClock, tmp_path: Path
) -> None:
    # The API server takes the connection and never answers discovery: preflight used to wait
    # on it forever (kubernetes-asyncio sets no timeout), which hung this suite once.
    api.stall_next("GET", "/apis/karpenter.sh/v1$", 10**6, times=10**6)
    replica = Replica("replica-a", api, clock, tmp_path)
    replica.gateway.options = dataclasses.replace(replica.gateway.options, request_timeout=0.5)

    async def loop(wake: asyncio.Event) -> list[PassResult]:
        raise AssertionError("the loop must not run without a preflight")

    async with asyncio.timeout(60):  # the test's own guard; the bound is 4 x 0.5 s
        with pytest.raises(PreflightFailed, match=r"did not answer within 2s"):
            await run_on_cluster(replica.controller, loop, endpoints=replica.endpoints)
    assert api.writes() == []


async def test_the_command_runs_preflight_election_and_a_pass_from_settings(
    api: KubeAPIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(api.kubeconfig())
    api.seed(nodepool("pool"))
    settings = load_settings(
        cluster="karpenter",
        cluster_options={"kubeconfig": str(config), "identity": "cli", **FAST},
        controller={"namespace": "rotation", "metrics_port": None, "probes_port": None},
    )
    container = build_container(settings)
    controller = container.rotation_controller()
    assert controller.cluster.options.namespace == "rotation"  # the controller's own setting

    assert await _main(controller, True, settings, CollectorRegistry()) == 0
    paths = [(r.method, r.path) for r in api.requests]
    assert paths[:3] == [
        ("GET", "/apis/karpenter.sh/v1"),
        ("GET", "/apis/karpenter.sh/v1/nodeclaims"),
        ("GET", "/apis/karpenter.sh/v1/nodepools"),
    ]  # preflight first
    lease_write = paths.index(("POST", "/apis/coordination.k8s.io/v1/namespaces/rotation/leases"))
    first_pool_read = paths.index(("GET", "/apis/karpenter.sh/v1/nodepools/pool"))
    assert lease_write < first_pool_read  # then the Lease, then the pass
    lease = api.get("Lease", "fleetgate-controller", "rotation")
    assert lease is not None and "holderIdentity" not in lease["spec"]  # released at exit

    api.unserve("karpenter.sh", "v1")
    controller = build_container(settings).rotation_controller()
    assert await _main(controller, True, settings, CollectorRegistry()) == 1  # preflight failed


async def test_a_watch_event_wakes_the_real_loop_before_its_requeue(
    api: KubeAPIServer, clock: VirtualClock, tmp_path: Path
) -> None:
    from fleetgate.apps.controller.command import run_loop

    sim = KarpenterSim(api)
    api.seed(nodepool("pool"))
    sim.node("pool", created=clock.now() - timedelta(days=1))  # young: nothing to rotate
    replica = Replica("replica-a", api, clock, tmp_path)
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_on_cluster(
            replica.controller,
            lambda wake: run_loop(replica.controller, once=False, stop=stop, wake=wake),
            endpoints=replica.endpoints,
        )
    )
    await until(lambda: len(replica.passes) == 1)
    assert replica.controller.next_due() == clock.now() + timedelta(minutes=1)
    await asyncio.sleep(0.3)
    assert len(replica.passes) == 1  # the loop sleeps towards its 1-minute requeue...
    sim.node("pool")  # ...until Karpenter adds a Ready node to the pool
    await until(lambda: len(replica.passes) == 2)
    stop.set()
    assert await task == []
    await replica.gateway.close()
