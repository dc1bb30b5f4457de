"""The place/release/move use cases (in-memory ledger): ranking, the walk, the waiver, events."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from random import Random

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.container import build_container
from fleetgate.apps.eventsink import FanOutEventSink
from fleetgate.apps.services import placement as svc
from fleetgate.apps.services.placement import PlacementService
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.apps.settings import load_settings
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable, NodeNotFound, PlacementNotFound
from fleetgate.domain.capacity.model import (
    Admission,
    AdmitRequest,
    NodeMetrics,
    NodeSpec,
    PlacementRequest,
)
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import Audit
from tests.fakes.ledger import InMemoryLedger

SMALL = Resources(1, 1024, 10)


def service(ledger: InMemoryLedger, clock: VirtualClock, seed: int = 7) -> PlacementService:
    return PlacementService(ledger, clock, ledger.event_sink(), DemandPolicy(), Random(seed))


async def kinds(ledger: InMemoryLedger, subject: str) -> list[str]:
    return [r.event.kind for r in await ledger.events(subject=subject)]


async def node(
    ledger: InMemoryLedger, name: str, threads: int = 4, load: float | None = None
) -> None:
    await ledger.add_node(NodeSpec(name, Capacity(threads, 16384, 200)))
    if load is not None:
        await ledger.publish_metrics(name, NodeMetrics(cpu_load_1=load, cpu_schedulable=threads))


async def test_an_idle_cluster_places_and_records_why(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a", load=0.0)
    out = await service(ledger, clock).place(PlacementRequest("team", SMALL))
    assert out.placed and out.placement is not None and not out.waived
    assert out.placement.node == "a" and out.subject == out.placement.id
    assert out.placement.demand == pytest.approx(0.6)
    assert await kinds(ledger, out.subject) == [svc.FINAL_CANDIDATES, svc.PLACED]
    placed = (await ledger.events(kind=svc.PLACED))[0].event
    assert placed.namespace == "team" and placed.data["placement_attempts"] == 1
    assert placed.data["node_used_cpus"] == 1 and placed.data["enforce_demand"] is True


async def test_a_busy_node_is_tried_after_an_idle_one(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "busy", load=3.5)
    await node(ledger, "idle", load=0.0)
    for seed in range(5):  # the bucket decides, whatever the shuffle draws
        out = await service(ledger, clock, seed).place(PlacementRequest("team", SMALL))
        assert out.candidates == ("idle",)  # drawn lazily: "busy" was never needed
        assert out.placement is not None and out.placement.node == "idle"
        final = (await ledger.events(subject=out.subject, kind=svc.FINAL_CANDIDATES))[0].event
        assert final.data["candidates"] == ["idle"] and final.data["buckets"] == {"idle": 0}
        assert final.data["candidate_count"] == 2 and final.data["lowest_bucket"] == 0
        await ledger.release(out.placement.id)


async def test_a_failed_walk_records_every_candidate_in_the_order_tried(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "busy", threads=1, load=0.9)
    await node(ledger, "idle", threads=1, load=0.0)
    out = await service(ledger, clock).place(PlacementRequest("team", Resources(4, 1, 1)))
    assert not out.placed and out.candidates == ("idle", "busy")
    final = (await ledger.events(subject=out.subject, kind=svc.FINAL_CANDIDATES))[0].event
    assert final.data["candidates"] == ["idle", "busy"]
    assert final.data["buckets"] == {"idle": 0, "busy": 3}
    assert final.data["weights"] == {"idle": 0.75, "busy": 0.1}
    assert final.data["candidate_count"] == 2 and final.data["lowest_bucket"] == 0
    failed = (await ledger.events(subject=out.subject, kind=svc.FAILED))[0].event
    assert failed.data["candidates"] == ["idle", "busy"]


async def test_a_node_gone_since_the_snapshot_is_a_refusal_not_an_error(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "gone", load=0.0)
    await node(ledger, "other", load=2.0)  # a higher bucket: "gone" is always drawn first
    snapshot = NodeSnapshot(ledger, clock, DemandPolicy().target_load, max_age=60)
    place = PlacementService(
        ledger, clock, ledger.event_sink(), DemandPolicy(), Random(1), snapshot
    ).place
    assert len(await snapshot.candidates()) == 2
    await ledger.remove_node("gone")
    out = await place(PlacementRequest("team", SMALL))
    assert out.placement is not None and out.placement.node == "other"
    assert out.candidates == ("gone", "other") and out.denials == {}
    refused = (await ledger.events(subject=out.subject, kind=svc.REFUSED))[0].event
    assert refused.data["node"] == "gone" and refused.data["reason"] == "node left the ledger"


async def test_when_only_demand_refuses_the_waiver_pass_places(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    # Both nodes are over 0.75 x 4 = 3 load: the spreader refuses, the waiver must not.
    await node(ledger, "a", load=3.5)
    await node(ledger, "b", load=3.9)
    out = await service(ledger, clock).place(PlacementRequest("team", SMALL))
    assert out.placed and out.waived
    assert set(out.denials) == {"a", "b"} and all(d.demand_only for d in out.denials.values())
    events = await kinds(ledger, out.subject)
    assert events == [svc.FINAL_CANDIDATES, svc.REFUSED, svc.REFUSED, svc.WAIVING, svc.PLACED]
    placed = (await ledger.events(kind=svc.PLACED))[0].event
    assert placed.data["enforce_demand"] is False and placed.data["placement_attempts"] == 3


async def test_the_waiver_pass_retries_only_the_demand_only_refusals(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "full", threads=1, load=0.0)  # 3 vCPUs: a 4-vCPU request cannot fit
    await node(ledger, "hot", threads=4, load=3.9)
    out = await service(ledger, clock).place(PlacementRequest("team", Resources(4, 1024, 10)))
    assert out.placement is not None and out.placement.node == "hot" and out.waived
    assert not out.denials["full"].demand_only and out.denials["hot"].demand_only
    refusals = [r.event for r in await ledger.events(kind=svc.REFUSED)]
    # "full" was never tried (its read showed no room): named, and detailed by the waiver.
    assert [e.data["node"] for e in refusals] == ["hot"]
    final = (await ledger.events(kind=svc.FINAL_CANDIDATES))[0].event
    assert final.data["presumed_full"] == ["full"]
    waiver = (await ledger.events(kind=svc.WAIVING))[0].event
    assert waiver.level is Level.WARNING and set(waiver.data["denials"]) == {"full", "hot"}


async def test_real_refusals_everywhere_fail_without_a_waiver(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a", threads=1)
    await node(ledger, "b", threads=1)
    out = await service(ledger, clock).place(PlacementRequest("team", Resources(4, 1, 1)))
    assert not out.placed and not out.waived
    assert {n: sorted(d.exceeded) for n, d in out.denials.items()} == {
        "a": ["cpus"],
        "b": ["cpus"],
    }
    assert (await kinds(ledger, out.subject))[-1] == svc.FAILED
    assert await ledger.placements() == []


def counting_admits(ledger: InMemoryLedger, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The nodes the ledger was asked to admit on (each one guarded transaction)."""
    tried: list[str] = []
    admit = ledger.admit

    async def counted(request: AdmitRequest, **kwargs: Audit | None) -> Admission:
        tried.append(request.node)
        return await admit(request, **kwargs)

    monkeypatch.setattr(ledger, "admit", counted)
    return tried


async def test_a_full_fleet_refuses_after_one_guarded_attempt_naming_every_node(
    ledger: InMemoryLedger, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in "abcdef":
        await node(ledger, name, threads=1)  # 3 vCPUs each
    snapshot = NodeSnapshot(ledger, clock, DemandPolicy().target_load, max_age=60)
    place = PlacementService(
        ledger, clock, ledger.event_sink(), DemandPolicy(), Random(3), snapshot
    ).place
    for name in "abcdef":
        assert (await place(PlacementRequest("team", Resources(3, 1, 1), node=name))).placed
    tried = counting_admits(ledger, monkeypatch)
    out = await place(PlacementRequest("team", SMALL))
    assert not out.placed and len(tried) == 1
    assert {n: sorted(d.exceeded) for n, d in out.denials.items()} == {
        n: ["cpus"] for n in "abcdef"
    }
    # One refusal event for the one try; the failure details every node; the rest are named.
    refusals = [r.event.data for r in await ledger.events(subject=out.subject, kind=svc.REFUSED)]
    assert [e["node"] for e in refusals] == tried
    failed = (await ledger.events(subject=out.subject, kind=svc.FAILED))[0].event.data
    assert sorted(failed["denials"]) == list("abcdef")
    final = (await ledger.events(subject=out.subject, kind=svc.FINAL_CANDIDATES))[0].event.data
    assert sorted(final["presumed_full"]) == sorted(set("abcdef") - {*tried})


async def test_a_stale_snapshot_never_refuses_a_node_that_has_room_again(
    ledger: InMemoryLedger, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    await node(ledger, "a", threads=1)
    await node(ledger, "b", threads=1)
    snapshot = NodeSnapshot(ledger, clock, DemandPolicy().target_load, max_age=60)
    place = PlacementService(
        ledger, clock, ledger.event_sink(), DemandPolicy(), Random(3), snapshot
    ).place
    full = [await place(PlacementRequest("team", Resources(3, 1, 1), node=n)) for n in "ab"]
    assert len(await snapshot.candidates()) == 2  # read with both nodes full
    assert full[1].placement is not None
    await ledger.release(full[1].placement.id)  # "b" has room again; the snapshot says not
    reads = snapshot.reads
    tried = counting_admits(ledger, monkeypatch)
    out = await place(PlacementRequest("team", SMALL))
    assert out.placement is not None and out.placement.node == "b"
    assert snapshot.reads == reads + 1 and tried == ["b"]  # one read confirmed "a", not "b"


async def test_no_candidates_is_a_refusal_not_an_error(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    out = await service(ledger, clock).place(PlacementRequest("team", SMALL))
    assert not out.placed and out.candidates == () and out.denials == {}


async def test_a_repeated_request_id_returns_the_first_placement(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a")
    place = service(ledger, clock).place
    first = await place(PlacementRequest("team", SMALL, request_id="job-1"))
    again = await place(PlacementRequest("team", SMALL, request_id="job-1"))
    assert again.replayed and again.placement == first.placement
    other_ns = await place(PlacementRequest("other", SMALL, request_id="job-1"))
    assert not other_ns.replayed
    assert len(await ledger.placements()) == 2
    assert (await ledger.node("a")).used.cpus == 2  # type: ignore[union-attr]


async def test_a_request_id_costs_a_first_request_no_read_of_earlier_placements(
    ledger: InMemoryLedger, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The admission's own INSERT (the UNIQUE request id) finds a repeat: no look-up before it.
    await node(ledger, "a")
    looked_up: list[str] = []
    read = ledger.placement_by_request

    async def counted(namespace: str, request_id: str) -> object:
        looked_up.append(request_id)
        return await read(namespace, request_id)

    monkeypatch.setattr(ledger, "placement_by_request", counted)
    place = service(ledger, clock).place
    first = await place(PlacementRequest("team", SMALL, request_id="job-1"))
    assert first.placed and not first.replayed and looked_up == []
    again = await place(PlacementRequest("team", SMALL, request_id="job-1"))
    assert again.replayed and again.placement == first.placement
    with pytest.raises(svc.RequestIdReused):
        await place(PlacementRequest("team", Resources(2, 1024, 10), request_id="job-1"))
    assert len(await ledger.placements()) == 1


async def test_a_replay_answers_even_when_its_node_and_every_candidate_left(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a")
    place = service(ledger, clock).place
    first = await place(PlacementRequest("team", SMALL, request_id="job-1"))
    await ledger.cordon("a")
    # No candidate reaches the ledger: the walk's end reads the earlier placement.
    again = await place(PlacementRequest("team", SMALL, request_id="job-1"))
    assert again.replayed and again.placement == first.placement
    forced = await place(PlacementRequest("team", SMALL, request_id="job-1", node="a"))
    assert forced.replayed and forced.placement == first.placement
    assert len(await ledger.placements()) == 1


async def test_a_forced_node_is_the_only_candidate(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a")
    await node(ledger, "b")
    await ledger.cordon("b")
    place = service(ledger, clock).place
    out = await place(PlacementRequest("team", SMALL, node="b"))
    assert not out.placed and out.denials["b"].cordoned
    assert not out.denials["b"].demand_only
    with pytest.raises(NodeNotFound):
        await place(PlacementRequest("team", SMALL, node="ghost"))
    out = await place(PlacementRequest("team", SMALL))
    assert out.candidates == ("a",)  # a cordoned node is not a candidate


async def test_pool_restricts_the_candidates(ledger: InMemoryLedger, clock: VirtualClock) -> None:
    await ledger.add_node(NodeSpec("g1", Capacity(4, 4096, 40), pool="gpu"))
    await ledger.add_node(NodeSpec("c1", Capacity(4, 4096, 40), pool="cpu"))
    out = await service(ledger, clock).place(PlacementRequest("team", SMALL, pool="gpu"))
    assert out.candidates == ("g1",)


async def test_an_unenforced_placement_over_the_guard_is_loud(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a", threads=1)
    out = await service(ledger, clock).place(
        PlacementRequest("team", Resources(5, 1, 1), enforce=False)
    )
    assert out.placement is not None
    events = [r.event for r in await ledger.events(subject=out.subject)]
    assert [e.level for e in events if e.kind == svc.UNGUARDED] == [Level.ERROR]
    over = [e.data["failing_stage"] for e in events if e.kind == svc.OVER_GUARD]
    assert over == ["cluster", "node"]  # 5 vCPUs fit neither the 3-vCPU cluster nor the node
    assert (await ledger.node("a")).used.cpus == 5  # type: ignore[union-attr]


async def test_an_advisory_claim_overrun_is_reported(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a", threads=8)
    await ledger.admit(AdmitRequest("team", "a", Resources(1, 0, 0)))  # migrates into the claim
    made = await ledger.create_claim(ClaimRequest("team", Resources(2, 10_000, 100), 3600))
    assert made.claim is not None and made.claim.used.cpus == 1
    out = await service(ledger, clock).place(PlacementRequest("team", Resources(2, 1, 1)))
    assert out.placement is not None and out.placement.claim_id == made.claim.id
    assert [d.dimension for d in out.claim_over_limit] == ["cpus"]
    over = (await ledger.events(kind=svc.OVER_CLAIM))[0].event
    assert over.level is Level.WARNING and over.data["claim"] == made.claim.id
    assert over.data["claim_dimensions"][0]["limit"] == 2.0


async def test_release_is_recorded_once(ledger: InMemoryLedger, clock: VirtualClock) -> None:
    await node(ledger, "a")
    s = service(ledger, clock)
    out = await s.place(PlacementRequest("team", SMALL))
    assert out.placement is not None
    assert not (await s.release("other", out.placement.id)).released
    assert (await s.release("team", out.placement.id)).released
    assert not (await s.release("team", out.placement.id)).released
    assert [r.event.kind for r in await ledger.events(kind=svc.RELEASED)] == [svc.RELEASED]


async def test_move_goes_through_the_target_guard(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a")
    await node(ledger, "b", load=3.9)
    s = service(ledger, clock)
    out = await s.place(PlacementRequest("team", SMALL, node="a"))
    assert out.placement is not None
    moved = await s.move("team", out.placement.id, "b")  # demand alone refuses: waived once
    assert moved.placement is not None and moved.placement.node == "b"
    assert (await ledger.node("a")).used.cpus == 0  # type: ignore[union-attr]
    assert svc.MOVED in await kinds(ledger, out.placement.id)
    with pytest.raises(PlacementNotFound):
        await s.move("other", out.placement.id, "a")


class _Unreachable:
    """A ledger whose database is down: every admission raises LedgerUnavailable."""

    def __init__(self, real: InMemoryLedger) -> None:
        self._real = real

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)

    async def admit(self, request: AdmitRequest, *, audit: Audit | None = None) -> Admission:
        raise LedgerUnavailable("admit: cannot reach the database")


class _Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, events: Sequence[Event]) -> None:
        self.events.extend(events)


async def test_a_database_failure_is_reported_and_raised(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a")
    sink = _Recorder()
    s = PlacementService(_Unreachable(ledger), clock, sink)  # type: ignore[arg-type]
    with pytest.raises(LedgerUnavailable):
        await s.place(PlacementRequest("team", SMALL))
    assert sink.events[-1].kind == svc.WRITE_FAILED and sink.events[-1].level is Level.ERROR


def test_the_container_builds_the_service_from_settings(tmp_path: Path) -> None:
    settings = load_settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'c.db'}",
        capacity={"target_load": 0.5, "demand_per_vcpu": 0.3, "demand_decay_seconds": 60},
    )
    container = build_container(settings)
    built = container.placement_service()
    assert isinstance(built, PlacementService)
    assert built.policy == DemandPolicy(0.5, 0.3, 60.0)
    assert built.snapshot is container.node_snapshot() and built.snapshot.max_age == 1.0


async def test_the_walk_s_audit_commits_with_the_admission(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a", threads=1, load=0.0)  # drawn first, full since the read: refused
    await node(ledger, "b", load=2.0)
    sink = _Recorder()  # not the ledger's sink: what reaches the table came with the admission
    snapshot = NodeSnapshot(ledger, clock, DemandPolicy().target_load, max_age=60)
    s = PlacementService(ledger, clock, sink, DemandPolicy(), Random(7), snapshot)
    await snapshot.candidates()  # read while "a" has room, so the walk tries it
    await ledger.admit(AdmitRequest("team", "a", Resources(3, 1024, 10)))
    out = await s.place(PlacementRequest("team", Resources(1, 1024, 10)))
    assert out.placement is not None and out.placement.node == "b"
    committed = [r.event for r in await ledger.events(subject=out.subject)]
    kinds_ = [e.kind for e in committed]
    assert kinds_[0] == svc.FINAL_CANDIDATES and kinds_[-1] == svc.PLACED
    assert out.candidates == ("a", "b") and kinds_.count(svc.REFUSED) == 1
    assert sink.events == committed  # the other sinks get the very same events


async def test_a_fan_out_through_the_ledger_sink_records_each_event_once(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await node(ledger, "a", load=0.0)
    sink = FanOutEventSink(_Recorder(), ledger.event_sink())
    out = await PlacementService(ledger, clock, sink, DemandPolicy()).place(
        PlacementRequest("team", SMALL)
    )
    assert await kinds(ledger, out.subject) == [svc.FINAL_CANDIDATES, svc.PLACED]
