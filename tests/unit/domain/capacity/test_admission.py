"""The admission's one sequence: which steps it asks a store for, in which order, and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from fleetgate.domain.capacity import admission
from fleetgate.domain.capacity.charging import Charged, ClaimCounters
from fleetgate.domain.capacity.claims import ClaimCharge, ClaimEnforcement
from fleetgate.domain.capacity.denials import Denial, DimensionDetail, Stage
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import (
    Admission,
    AdmitRequest,
    NodeMetrics,
    NodeState,
    Placement,
)
from fleetgate.domain.events import Event
from fleetgate.domain.ports import AdmissionSteps
from tests.ports import assert_implements

NOW = datetime(2026, 1, 1, tzinfo=UTC)
X = Resources(2, 1024, 10)
NODE = NodeState(
    "n1", "p", {}, Capacity(8, 8192, 100), Resources(8, 8192, 100), X, 0.0, NodeMetrics(), True, NOW
)


def _denial(stage: Stage) -> Denial:
    return Denial(stage, (DimensionDetail("cpus", 8, 7, 2, True),))


@dataclass
class Recorder:
    """A store that answers as told and records the steps it was asked for."""

    claim: Charged[ClaimCounters] | None = None
    cluster: list[Charged[None]] = field(default_factory=list)
    node: Charged[NodeState] = field(default_factory=lambda: Charged[NodeState]())
    appeared: bool = False
    asked: list[str] = field(default_factory=list)
    written: list[Event] = field(default_factory=list)

    @property
    def now(self) -> datetime:
        return NOW

    async def charge_claim(
        self, request: AdmitRequest, rule: ClaimCharge
    ) -> Charged[ClaimCounters] | None:
        self.asked.append("claim")
        return self.claim

    async def charge_cluster(self, amount: Resources, enforce: bool) -> Charged[None]:
        self.asked.append(f"cluster {amount.cpus}")
        return self.cluster.pop(0) if self.cluster else Charged()

    async def claim_appeared(self, namespace: str) -> bool:
        self.asked.append("claim appeared?")
        return self.appeared

    async def charge_node(self, request: AdmitRequest) -> Charged[NodeState]:
        self.asked.append("node")
        return self.node

    async def insert_placement(self, placement: Placement) -> None:
        self.asked.append("placement")

    async def charged_node(self, name: str) -> NodeState:
        self.asked.append("node row")
        return NODE

    async def record_events(self, events: Sequence[Event]) -> None:
        self.asked.append("events")
        self.written += events


def _audit(made: Admission) -> list[Event]:
    assert made.placement is not None
    return [Event("placed", NOW, made.placement.id, made.placement.namespace, {})]


async def _admit(store: Recorder, enforcement: ClaimEnforcement, **kw: object) -> Admission:
    request = AdmitRequest("team", "n1", X, request_id="r1", **kw)  # type: ignore[arg-type]
    return await admission.admit(store, request, "p1", enforcement, _audit)


def test_the_recorder_is_a_store_of_the_port() -> None:
    assert_implements(Recorder(), AdmissionSteps)


async def test_without_a_claim_the_cluster_then_the_claim_check_then_node_placement_events() -> (
    None
):
    store = Recorder()
    made = await _admit(store, ClaimEnforcement.HARD)
    assert made.admitted and made.claim_id is None and made.node == NODE
    assert made.placement is not None and made.placement.admitted_at == NOW
    assert store.asked == [
        "claim",
        "cluster 2",
        "claim appeared?",
        "node",
        "placement",
        "node row",
        "events",
    ]
    assert [e.kind for e in store.written] == ["placed"]


async def test_a_claim_that_committed_meanwhile_stops_the_admission_before_the_node() -> None:
    store = Recorder(appeared=True)
    with pytest.raises(admission.ClaimAppeared):
        await _admit(store, ClaimEnforcement.HARD)
    assert store.asked == ["claim", "cluster 2", "claim appeared?"]


@pytest.mark.parametrize(
    ("store", "asked"),
    [
        (Recorder(claim=Charged(denial=_denial(Stage.CLAIM))), ["claim"]),
        (Recorder(cluster=[Charged(denial=_denial(Stage.CLUSTER))]), ["claim", "cluster 2"]),
        (
            Recorder(node=Charged(denial=_denial(Stage.NODE))),
            ["claim", "cluster 2", "claim appeared?", "node"],
        ),
    ],
)
async def test_a_refusal_ends_the_sequence_with_the_denial(
    store: Recorder, asked: list[str]
) -> None:
    made = await _admit(store, ClaimEnforcement.HARD)
    assert not made.admitted and made.denial is not None
    assert store.asked == asked and store.written == []


async def test_an_advisory_claim_past_its_limit_charges_its_overage_to_the_cluster() -> None:
    # limit 3 cpus, used 2 before, +2: one cpu over the limit, reported and charged.
    after = ClaimCounters("c1", Resources(3, 4096, 40), Resources(4, 1024, 10))
    store = Recorder(claim=Charged(row=after))
    made = await _admit(store, ClaimEnforcement.ADVISORY)
    assert made.claim_id == "c1" and made.placement is not None
    assert made.placement.claim_id == "c1"
    assert [d.dimension for d in made.claim_over_limit] == ["cpus"]
    assert store.asked[:3] == ["claim", "cluster 1", "node"]


async def test_an_unenforced_admission_reports_every_bypassed_stage_in_order() -> None:
    bypassed = [_denial(Stage.CLUSTER), _denial(Stage.NODE)]
    store = Recorder(cluster=[Charged(bypassed=bypassed[0])], node=Charged(bypassed=bypassed[1]))
    made = await _admit(store, ClaimEnforcement.HARD, enforce=False)
    assert made.admitted and list(made.bypassed) == bypassed


async def test_seen_asks_only_for_a_request_with_an_id() -> None:
    looked: list[tuple[str, str]] = []
    earlier = Placement("p0", "team", "n1", X, 0.0, NOW, "r1")

    async def lookup(namespace: str, request_id: str) -> Placement | None:
        looked.append((namespace, request_id))
        return earlier

    assert await admission.seen(lookup, "team", None) is None
    assert looked == []
    replay = await admission.replay_of(lookup, AdmitRequest("team", "n1", X, request_id="r1"))
    assert replay == Admission(placement=earlier, replayed=True)
    assert looked == [("team", "r1")]
