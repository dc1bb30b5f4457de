"""The claim use cases on the in-memory ledger: each write applied, with its audit event."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.adapters.clock import VirtualClock
from fleetgate.apps.services import claims as svc
from fleetgate.apps.services.claims import ClaimService
from fleetgate.domain.capacity.claims import ClaimRequest, ClaimState, ClaimUpdate, RefusalReason
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from fleetgate.domain.events import Level
from tests.fakes.ledger import InMemoryLedger


def service(ledger: InMemoryLedger, clock: VirtualClock) -> ClaimService:
    return ClaimService(ledger, clock, ledger.event_sink())


async def test_create_update_delete_each_leave_an_event_on_the_namespace(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(10, 1000, 100)))
    await ledger.admit(AdmitRequest("ci", "a", Resources(2, 0, 0)))
    claims = service(ledger, clock)
    made = await claims.create(ClaimRequest("ci", Resources(8, 100, 10), 3600))
    assert made.ok and made.claim is not None
    cid = made.claim.id
    clock.advance(timedelta(minutes=1))
    grown = await claims.update(cid, ClaimUpdate(limit_cpus=9, expires_in_seconds=600))
    assert grown.ok
    gone = await claims.delete(cid, namespace="ci")
    assert gone.deleted and gone.returned == Resources(2, 0, 0)

    recorded = [r.event for r in await ledger.events(namespace="ci")]
    assert [e.kind for e in recorded] == [svc.CREATED, svc.UPDATED, svc.DELETED]
    created, updated, deleted = recorded
    assert created.subject == cid and created.data["used"] == {
        "cpus": 2,
        "memory_mb": 0,
        "disk_gb": 0,
    }
    assert created.data["expires_in_seconds"] == 3600
    assert updated.data["fields"] == ["expires_in_seconds", "limit_cpus"]
    assert updated.data["limit"]["cpus"] == 9 and updated.data["expires_in_seconds"] == 600
    assert deleted.data["returned"]["cpus"] == 2


async def test_a_refusal_is_recorded_with_its_reason_and_dimensions(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(1, 1000, 100)))
    claims = service(ledger, clock)
    refused = await claims.create(ClaimRequest("ci", Resources(4, 0, 0), 60))
    assert refused.refusal is not None and refused.refusal.reason is RefusalReason.CAPACITY
    (event,) = [r.event for r in await ledger.events(namespace="ci")]
    assert event.kind == svc.REFUSED and event.level is Level.WARNING
    assert event.data["reason"] == "capacity" and event.data["operation"] == svc.CREATED
    cpus = next(d for d in event.data["dimensions"] if d["dimension"] == "cpus")
    assert cpus["exceeded"] is True and cpus["requested"] == 4.0


async def test_an_update_refused_for_an_unnamed_namespace_is_recorded_on_the_owner(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(10, 1000, 100)))
    claims = service(ledger, clock)
    made = await claims.create(ClaimRequest("ci", Resources(1, 0, 0), 60))
    assert made.claim is not None
    clock.advance(timedelta(seconds=60))
    refused = await claims.update(made.claim.id, ClaimUpdate(limit_cpus=2))
    assert refused.refusal is not None and refused.refusal.reason is RefusalReason.NOT_ACTIVE
    kinds = [r.event.kind for r in await ledger.events(namespace="ci")]
    assert kinds == [svc.CREATED, svc.EXPIRED, svc.REFUSED]  # the update stored the expiry


async def test_reads_pass_through_with_the_effective_state(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    await ledger.add_node(NodeSpec("a", Capacity(10, 1000, 100)))
    claims = service(ledger, clock)
    made = await claims.create(ClaimRequest("ci", Resources(1, 0, 0), 60))
    assert made.claim is not None
    clock.advance(timedelta(seconds=61))
    one = await claims.claim(made.claim.id, namespace="ci")
    assert one is not None and one.state is ClaimState.EXPIRED
    assert [c.id for c in await claims.claims("ci")] == [made.claim.id]
    assert await claims.claim(made.claim.id, namespace="web") is None
    assert not (await claims.delete(made.claim.id, namespace="web")).deleted


async def test_a_write_that_finds_a_claim_due_records_its_expiry_once(
    ledger: InMemoryLedger, clock: VirtualClock
) -> None:
    """An update or a create that stores a due claim's expiry commits its event with it; the
    reconciler, finding the claim already expired, does not report it again (issue 34)."""
    await ledger.add_node(NodeSpec("a", Capacity(10, 1000, 100)))
    claims = service(ledger, clock)
    first = await claims.create(ClaimRequest("ci", Resources(1, 0, 0), 60))
    second = await claims.create(ClaimRequest("qa", Resources(1, 0, 0), 60))
    assert first.claim is not None and second.claim is not None
    clock.advance(timedelta(seconds=61))
    refused = await claims.update(first.claim.id, ClaimUpdate(limit_cpus=2))
    assert refused.refusal is not None and refused.refusal.reason is RefusalReason.NOT_ACTIVE
    assert refused.expired is not None and refused.expired.id == first.claim.id
    renewed = await claims.create(ClaimRequest("qa", Resources(1, 0, 0), 60))
    assert renewed.ok and renewed.expired is not None and renewed.expired.id == second.claim.id
    assert not (await ledger.reconcile()).reconciliation.expired  # nothing left due

    expired = [r.event for r in await ledger.events(kind=svc.EXPIRED)]
    assert sorted(e.subject for e in expired) == sorted([first.claim.id, second.claim.id])
    kinds = [r.event.kind for r in await ledger.events(namespace="ci")]
    assert kinds == [svc.CREATED, svc.EXPIRED, svc.REFUSED]
    kinds = [r.event.kind for r in await ledger.events(namespace="qa")]
    assert kinds == [svc.CREATED, svc.EXPIRED, svc.CREATED]
