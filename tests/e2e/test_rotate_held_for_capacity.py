"""Gate 9 end to end: no drain begins while its node's ledger placements have nowhere to go.

The tests run the real controller and node sync on the fake cluster and the real ledger of the
backend under test; after every round and sync every placement exists exactly once and the
counters agree. With the gate on nothing is ever stranded; issue 41's scenarios (a placeholder
that lands on a node that existed, fragmented room, a surge that never becomes Ready) strand
placements with the gate off, so the tests can fail.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import AdmitRequest
from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation.ledger_gate import HELD
from fleetgate.domain.rotation.policy import ForcefulFallback, RotationPolicy, Surge
from tests.apps.api.conftest import ADMIN, api_settings, running_api
from tests.conftest import Backend
from tests.e2e.test_rotate_loaded_fleet import POLICY  # every node older than 1h, any time
from tests.invariants import check_ledger
from tests.ledgers import open_ledger

T0 = datetime(2024, 1, 1, tzinfo=UTC)
GIB = 2**30 * 1_000
BIG = {"cpu": 8_000, "memory": 32 * GIB, "pods": 110_000}
SMALL = {"cpu": 4_000, "memory": 16 * GIB, "pods": 110_000}
SIZE = Resources(4, 1024, 5)


def rig(
    clock: VirtualClock,
    young: bool,
    cluster: FakeCluster | None = None,
    launches: Mapping[str, int] = BIG,
    big_age: timedelta = timedelta(hours=3),
) -> tuple[FakeCluster, str, list[str]]:
    """One pool launching ``launches`` nodes (big ones: 24 vCPU limit): ``big`` (24, ``big_age``
    old) and two small ones (12), oldest first; ``young``: the small ones are too young to
    rotate yet. On ``cluster`` if given (an application's own), else on a new fake cluster."""
    now = clock.now()
    if cluster is None:
        cluster = plugins.make_cluster(plugins.plugin_manager(allow={"fake"}), "fake", {}, clock)
    cluster.add_pool(
        "general",
        expire_after="14d",
        termination_grace_period="1h",
        provisioning_delay="2m",
        drain_time="5m",
        node_allocatable=launches,
    )
    # Workloads leave 1 vCPU free on every small node: each placeholder needs a new node (one
    # that fits it: big's asks for less when the pool launches small nodes).
    workload = 7_000 if launches["cpu"] >= 8_000 else 3_500
    big = cluster.add_node(
        "general", created_at=now - big_age, allocatable=BIG, workload={"cpu": workload}
    )
    small = [
        cluster.add_node(
            "general",
            created_at=now if young else now - timedelta(hours=2),
            allocatable=SMALL,
            workload={"cpu": 3_000},
        )
        for _ in range(2)
    ]
    return cluster, big, small


def node_of(cluster: FakeCluster, claim: str) -> str:
    node = cluster.claims[claim].node
    assert node is not None
    return node.name


async def place(ledger: SqlLedger, node: str, count: int, size: Resources = SIZE) -> set[str]:
    ids = set()
    for _ in range(count):
        made = await ledger.admit(AdmitRequest("team", node, size))
        assert made.placement is not None, made.denial
        ids.add(made.placement.id)
    return ids


async def load_placements(
    ledger: SqlLedger, cluster: FakeCluster, big: str, small: list[str], per_small: int = 3
) -> set[str]:
    """20 vCPU on ``big``, ``per_small`` placements of 4 on each small node (3: full)."""
    ids = await place(ledger, node_of(cluster, big), 5)
    for s in small:
        ids |= await place(ledger, node_of(cluster, s), per_small)
    await check_ledger(ledger, ids)
    return ids


async def _policies() -> list[RotationPolicy]:
    return [POLICY]


def _controller(
    cluster: FakeCluster,
    ledger: SqlLedger,
    clock: VirtualClock,
    registry: CollectorRegistry,
    gate: bool = True,
    policy: RotationPolicy = POLICY,
) -> RotationController:
    async def policies() -> list[RotationPolicy]:
        return [policy]

    return RotationController(
        cluster,
        policies,
        clock,
        ledger.event_sink(),
        RotationMetrics(registry),
        relocation=RelocationCheck(ledger, DemandPolicy()) if gate else None,
    )


def _gauge(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(f"fleetgate_rotation_{name}", {"nodepool": "general"})


async def drive(
    controller: RotationController,
    sync: NodeSync,
    cluster: FakeCluster,
    clock: VirtualClock,
    ledger: SqlLedger,
    ids: set[str],
    until: datetime,
) -> int:
    """Rounds and syncs until ``until``; the most placements one sync left stranded."""
    most = 0
    while clock.now() < until:
        await controller.run_due()
        most = max(most, (await sync.sync()).stranded)
        await check_ledger(ledger, ids)
        due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
        cluster.advance_to(min([*due, until]))
    return most


async def test_a_node_that_does_not_fit_now_is_skipped_for_one_that_fits(
    backend: Backend,
) -> None:
    """``big`` is the oldest but its 20 vCPU fit no other node now; small-1's 8 do (on small-2
    and big): small-1 starts first. Its replacement brings the room, and every node rotates."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=False)
    originals = {big, *small}
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        assert len((await sync.sync()).joined) == 3
        ids = await load_placements(ledger, cluster, big, small, per_small=2)
        controller = _controller(cluster, ledger, clock, CollectorRegistry())
        started: list[str] = []
        end = T0 + timedelta(hours=8)
        while originals & set(cluster.claims):
            assert clock.now() < end, f"not rotated: {sorted(originals & set(cluster.claims))}"
            for result in await controller.run_due():
                assert result.step is not None
                if result.step.started:
                    started.append(result.step.started)
            assert (await sync.sync()).stranded == 0, "a drain began with no room for it"
            await check_ledger(ledger, ids)
            due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
            cluster.advance_to(min(due))
        assert started[0] in small and set(started) >= originals, started
        held = await ledger.events(kind=HELD)
        assert held and held[0].event.subject == big  # passed over, once
        await sync.sync()
        await check_ledger(ledger, ids)


async def test_the_drain_waits_for_the_surge_to_join_the_ledger(backend: Backend) -> None:
    """Issue 41 items 1 and 2: no node fits ``big``'s placements now, so it starts on its surge;
    the surge's room is counted only once the node sync has brought it into the ledger, and
    only then does the drain begin. Nothing is stranded, no warning is raised."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=True)
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        await sync.sync()
        ids = await load_placements(ledger, cluster, big, small)
        controller = _controller(cluster, ledger, clock, CollectorRegistry())
        big_node = node_of(cluster, big)
        before = set(cluster.claims)
        while cluster.claims[big].deleting_at is None:
            assert clock.now() < T0 + timedelta(hours=1), "big's drain never began"
            await controller.run_due()
            surges = set(cluster.claims) - before
            if cluster.claims[big].deleting_at is not None:
                # The drain began: its surge was in the ledger when the plan was judged.
                (surge,) = surges
                assert await ledger.node(node_of(cluster, surge)) is not None
            assert (await sync.sync()).stranded == 0
            await check_ledger(ledger, ids)
            due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
            cluster.advance_to(min(due))
        assert not await ledger.events(kind=HELD)
        most = await drive(
            controller, sync, cluster, clock, ledger, ids, clock.now() + timedelta(hours=1)
        )
        assert most == 0 and big not in cluster.claims
        assert all(p.node != big_node for p in await ledger.placements())


async def test_a_drain_is_held_while_its_surge_is_too_small_until_a_node_is_added(
    backend: Backend,
) -> None:
    """The pool launches small nodes: ``big``'s surge joins the ledger with 12 vCPU, and 8 of
    its 20 still have nowhere to go. The drain is held (Event with the deadline, gauges, the
    old node untouched), judged again every pass; an operator adds a node, and it drains."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=True, launches=SMALL)
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        await sync.sync()
        ids = await load_placements(ledger, cluster, big, small)
        registry = CollectorRegistry()
        controller = _controller(cluster, ledger, clock, registry)
        held_for = clock.now() + timedelta(minutes=8)
        await drive(controller, sync, cluster, clock, ledger, ids, held_for)
        assert big in cluster.claims and cluster.claims[big].deleting_at is None
        (event,) = await ledger.events(kind=HELD)  # once per shortfall
        message = event.event.data["message"]
        assert "held before its drain" in message and "cpus 8" in message, message
        assert "Karpenter force-expires node" in message and "add a node" in message
        assert _gauge(registry, "ledger_held") == 1
        left = _gauge(registry, "ledger_hold_expires_in_seconds")
        expires = T0 - timedelta(hours=3) + timedelta(days=14)
        assert left is not None and 0 < left <= (expires - T0).total_seconds()
        cluster.add_node("general", allocatable=BIG, workload={"cpu": 3_000})  # the way out
        most = await drive(controller, sync, cluster, clock, ledger, ids, T0 + timedelta(hours=1))
        assert most == 0 and big not in cluster.claims
        assert _gauge(registry, "ledger_held") == 0
        await check_ledger(ledger, ids)


FALLBACK = RotationPolicy(
    name=POLICY.name,
    node_pool_selector=POLICY.node_pool_selector,
    age_threshold=POLICY.age_threshold,
    maintenance_windows=POLICY.maintenance_windows,
    surge=Surge(
        cooldown_after=timedelta(minutes=2),
        retry_backoff=timedelta(minutes=1),
        failure_pause=timedelta(minutes=2),
        forceful_fallback=ForcefulFallback(enabled=True),
    ),
)


async def _scenario(backend: Backend, name: str, gate: bool) -> tuple[int, int]:
    """Two hours of issue 41's scenario ``name``: the most one sync left stranded, and how
    many held events the gate announced."""
    clock = VirtualClock(T0)
    policy, until = POLICY, T0 + timedelta(hours=2)
    if name == "surge never Ready":
        # big expires in 1h30m: after one failed surge, too close for another (the forceful
        # fallback drains it without one). Run until just before Karpenter's forced expiry.
        cluster, big, small = rig(clock, young=True, big_age=timedelta(days=14, minutes=-90))
        cluster.fail_provisioning("general")
        policy, until = FALLBACK, T0 + timedelta(minutes=85)
    else:
        cluster, big, small = rig(clock, young=True)
        # A neighbour with room for big's placeholder among its Pods: Karpenter launches nothing.
        spare = cluster.add_node("general", allocatable=BIG, workload={"cpu": 1_000})
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        await sync.sync()
        if name == "placeholder on a node that existed":
            ids = await load_placements(ledger, cluster, big, small)
            ids |= await place(ledger, node_of(cluster, spare), 5)  # 4 vCPU free
        elif name == "fragmented room":
            # 8 + 2 + 2 on big; 6 free on each small node: 12 in all, none for the 8.
            ids = await place(ledger, node_of(cluster, big), 1, Resources(8, 1024, 5))
            ids |= await place(ledger, node_of(cluster, big), 2, Resources(2, 512, 5))
            for s in small:
                ids |= await place(ledger, node_of(cluster, s), 1, Resources(6, 1024, 5))
            ids |= await place(ledger, node_of(cluster, spare), 6)  # full
        else:
            ids = await load_placements(ledger, cluster, big, small, per_small=2)
        controller = _controller(cluster, ledger, clock, CollectorRegistry(), gate, policy)
        most = await drive(controller, sync, cluster, clock, ledger, ids, until)
        held = len(await ledger.events(kind=HELD))
        await check_ledger(ledger, ids)
        return most, held


SCENARIOS = ["placeholder on a node that existed", "fragmented room", "surge never Ready"]


@pytest.mark.parametrize("name", SCENARIOS)
async def test_issue_41s_scenarios_strand_nothing_with_the_gate_and_strand_without_it(
    backend: Backend, name: str
) -> None:
    on, held_on = await _scenario(backend, name, gate=True)
    assert on == 0 and held_on, f"{name}: gate on stranded {on} (held: {held_on})"
    off, held_off = await _scenario(backend, name, gate=False)
    assert off > 0 and not held_off, f"{name}: gate off stranded nothing; the test tests nothing"


#: Admits ``SIZE`` for namespace ``team`` onto a node; the id of the placement made, if any.
Admit = Callable[[SqlLedger, str], Awaitable[str | None]]


async def _admit_in_process(ledger: SqlLedger, node: str) -> str | None:
    made = await ledger.admit(AdmitRequest("team", node, SIZE))
    return None if made.placement is None else made.placement.id


def _admit_over_http(client: httpx.AsyncClient) -> Admit:
    """Admissions as a tenant makes them: POSTs to the API, 201 or 507."""

    async def admit(_ledger: SqlLedger, node: str) -> str | None:
        body = {"cpus": SIZE.cpus, "memory_mb": SIZE.memory_mb, "disk_gb": SIZE.disk_gb}
        r = await client.post(
            "/v1/namespaces/team/placements", json={**body, "node": node}, headers=ADMIN
        )
        assert r.status_code in (201, 507), r.text
        return str(r.json()["id"]) if r.status_code == 201 else None

    return admit


async def _admissions_during_the_drain(
    backend: Backend, gate: bool, admit: Admit = _admit_in_process
) -> int:
    """The plan fits when the drain begins (big's surge is in the ledger); then admissions try
    to fill the surge before the node sync carries the plan out. How many the sync stranded."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=True)
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        await sync.sync()
        ids = await load_placements(ledger, cluster, big, small)
        controller = _controller(cluster, ledger, clock, CollectorRegistry(), gate)
        before = set(cluster.claims)
        while cluster.claims[big].deleting_at is None:  # stop as the drain begins
            assert clock.now() < T0 + timedelta(hours=1), "big's drain never began"
            await sync.sync()
            await controller.run_due()
            due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
            if cluster.claims[big].deleting_at is None:
                cluster.advance_to(min(due))
        (surge,) = set(cluster.claims) - before
        surge_node = node_of(cluster, surge)
        for _ in range(5):  # the planned room, wanted: refused where it is reserved
            made = await admit(ledger, surge_node)
            if made is not None:
                ids.add(made)
        await check_ledger(ledger, ids)
        stranded = (await sync.sync()).stranded
        await check_ledger(ledger, ids)
        if gate:
            assert await ledger.reservations() == []  # every one consumed by its move
        return stranded


async def test_admissions_during_the_drain_cannot_take_the_planned_room(backend: Backend) -> None:
    """Issue 41, reserve before you drain: with the gate, the drain's room is reserved before
    the old NodeClaim is deleted, the admissions that want it are refused, and the node sync
    moves every placement into its reservation; without it they take the room and the planned
    moves are refused (stranded), so the test can fail."""
    assert await _admissions_during_the_drain(backend, gate=True) == 0
    assert await _admissions_during_the_drain(backend, gate=False) > 0


async def test_admissions_over_http_during_the_drain_cannot_take_the_planned_room(
    backend: Backend,
) -> None:
    """The same race, black-box: the admissions are POSTs to the real API app, its own
    container and ledger on the same database, as a tenant's would be. 201 or 507, never a
    placement in the reserved room; without the gate they take it and strand the planned moves."""
    # The admin token: the scenario's ledger starts empty, namespace tokens included.
    async for api in running_api(api_settings(backend)):
        over_http = _admit_over_http(api.client)
        on = await _admissions_during_the_drain(backend, gate=True, admit=over_http)
        off = await _admissions_during_the_drain(backend, gate=False, admit=over_http)
        assert (on, off > 0) == (0, True)


class _Racing(RelocationCheck):
    """The gate's ledger side, with admissions landing on the planned room of ``source``'s
    drain right after the plans were read (once): what a reserve then finds taken."""

    def __init__(self, ledger: SqlLedger, source: str) -> None:
        super().__init__(ledger, DemandPolicy())
        self._admitting = ledger
        self.source = source
        self.taken: set[str] = set()

    async def judge_nodes(self, names: list[str]) -> dict[str, Verdict]:
        verdicts = await super().judge_nodes(names)
        verdict = verdicts.get(self.source)
        if not self.taken and verdict is not None and verdict.fits and verdict.moves:
            target = verdict.moves[0].target
            while (
                made := await self._admitting.admit(AdmitRequest("team", target, SIZE))
            ).placement:
                self.taken.add(made.placement.id)
        return verdicts


async def test_a_drain_whose_room_is_taken_before_it_is_reserved_does_not_begin(
    backend: Backend,
) -> None:
    """The plan fits when the drain would begin; admissions take the room before the reserve:
    the reserve is refused, nothing is written, the plan is judged again (it no longer fits) and
    the drain is held. The NodeClaim is not deleted and nothing is stranded."""
    clock = VirtualClock(T0)
    cluster, big, small = rig(clock, young=True)
    async with open_ledger(backend, clock) as ledger:
        sync = NodeSync(ledger, cluster, clock, ledger.event_sink(), DemandPolicy())
        await sync.sync()
        ids = await load_placements(ledger, cluster, big, small)
        racing = _Racing(ledger, node_of(cluster, big))
        controller = RotationController(
            cluster,
            _policies,
            clock,
            ledger.event_sink(),
            RotationMetrics(CollectorRegistry()),
            relocation=racing,
        )
        while not racing.taken:
            assert clock.now() < T0 + timedelta(hours=1), "the drain was never judged to fit"
            await sync.sync()
            await controller.run_due()
            due = [t for t in (controller.next_due(), cluster.next_event_at()) if t is not None]
            if not racing.taken:
                cluster.advance_to(min(due))
        assert cluster.claims[big].deleting_at is None  # the drain did not begin
        assert await ledger.reservations() == []
        assert await ledger.events(kind=HELD)  # judged again: held before its drain
        assert (await sync.sync()).stranded == 0
        await check_ledger(ledger, ids | racing.taken)
