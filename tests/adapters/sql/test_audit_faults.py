"""Every change's audit events commit with it: a lost connection never splits them (issue 34).

For each kind of change that reports itself in the audit trail, a fault-free run first counts
the statements and COMMITs the change makes. The change is then made again, on fresh objects,
once per statement with the connection killed right after it (MariaDB ``KILL``, PostgreSQL
``pg_terminate_backend``; on SQLite the connection is closed under the transaction), once per
COMMIT with the server session killed just before it, and once per COMMIT with the answer lost
after the server committed (the worst case: reported unknown, yet done). After each, the change
either is in the ledger and its events are in the table exactly once, or it is not and none of
its events is. The changes are made through the services that own their events, over the
ledger's own sink, as the API, node sync and the reconciler make them (the admin's node writes
and namespace tokens included).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from random import Random
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.fakecluster.cluster import FakeCluster
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import claims as claims_table
from fleetgate.adapters.sql.schema import nodes as nodes_table
from fleetgate.apps.reconciler import loop
from fleetgate.apps.reconciler.metrics import ReconcilerMetrics
from fleetgate.apps.services import audit as node_events
from fleetgate.apps.services import claims as claim_events
from fleetgate.apps.services import nodesync as relocation_events
from fleetgate.apps.services import placement as placement_events
from fleetgate.apps.services import tokens as token_events
from fleetgate.apps.services.claims import ClaimService
from fleetgate.apps.services.nodes import NodeAdmin
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.placement import PlacementService
from fleetgate.apps.services.tokens import TokenService
from fleetgate.domain import nodesync as rules
from fleetgate.domain.capacity.claims import ClaimRequest, ClaimUpdate
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from fleetgate.domain.capacity.relocation import Move, Verdict
from fleetgate.domain.tokens import digest
from tests.adapters.sql.test_faults import (
    after_first,
    first_commit_answer_lost,
    killed_at_first_commit,
    killer_of,
)
from tests.conftest import Backend

VM = Resources(1, 64, 1)
ROOMY = Capacity(1024, 1 << 22, 1 << 16)  # room for every claim and placement a test makes


@dataclass(frozen=True)
class Change:
    """One kind of change: how to set one up, make it, see whether it is in, count its events.

    ``audit(subject, after_id)`` counts, for each event the change owes, how many of it were
    recorded after ``after_id``: each must be 1 if the change is in, 0 if not.
    """

    prepare: Callable[[int], Awaitable[str]]
    make: Callable[[str], Awaitable[object]]
    made: Callable[[str], Awaitable[bool]]
    audit: Callable[[str, int], Awaitable[list[int]]]


async def counted(ledger: SqlLedger, kind: str, after_id: int, **where: str) -> int:
    return len(await ledger.events(kind=kind, after_id=after_id, limit=1000, **where))


async def stored_state(ledger: SqlLedger, claim_id: str) -> str | None:
    """The claim's state as stored (a due claim reads as expired before any pass sweeps it)."""
    query = sa.select(claims_table.c.state).where(claims_table.c.id == claim_id)

    async def work(conn: AsyncConnection) -> str | None:
        state: str | None = (await conn.execute(query)).scalar()
        return state

    return await ledger.store.read(work, what="read a claim's stored state")


def fake_cluster(clock: VirtualClock) -> FakeCluster:
    cluster: FakeCluster = plugins.make_cluster(
        plugins.plugin_manager(allow={"fake"}), "fake", {}, clock
    )
    cluster.add_pool("p", expire_after="14d", termination_grace_period="1h", drain_time="5m")
    return cluster


def changes(ledger: SqlLedger, clock: VirtualClock, name: str) -> Change:
    """The change ``name``, made by its service over the ledger's own event sink."""
    sink = ledger.event_sink()
    placements = PlacementService(ledger, clock, sink, DemandPolicy(), Random(1))
    claims = ClaimService(ledger, clock, sink)
    cluster = fake_cluster(clock)
    sync = NodeSync(ledger, cluster, clock, sink, DemandPolicy())
    metrics = ReconcilerMetrics(CollectorRegistry())
    reconciler = loop.Reconciler(ledger, clock, sink, metrics)
    admin = NodeAdmin(ledger, clock, sink)
    token_service = TokenService(ledger, clock, sink)

    async def placed(_: int) -> str:
        admission = await ledger.admit(AdmitRequest("team", "a", VM))
        assert admission.placement is not None
        return admission.placement.id

    async def on_node(pid: str) -> str | None:
        placement = await ledger.placement(pid)
        return None if placement is None else placement.node

    def by_subject(kind: str) -> Callable[[str, int], Awaitable[list[int]]]:
        async def audit(subject: str, after_id: int) -> list[int]:
            return [await counted(ledger, kind, after_id, subject=subject)]

        return audit

    async def relocate(pid: str) -> object:
        # One planned move off node a (the sync carries out a plan move by move).
        return await sync.carry_out("a", Verdict("a", 1, moves=(Move(pid, "b"),)))

    async def claimed(i: int) -> str:
        made = await ledger.create_claim(ClaimRequest(f"ns{i}", Resources(1, 0, 0), 3600))
        assert made.claim is not None
        return made.claim.id

    async def claim_limit(cid: str) -> int | None:
        claim = await ledger.claim(cid)
        return None if claim is None else claim.limit.cpus

    async def claimed_namespace(i: int) -> str:
        return f"ns{i}"

    async def created(ns: str) -> object:
        return await claims.create(ClaimRequest(ns, Resources(1, 0, 0), 3600))

    async def creation_audit(ns: str, after_id: int) -> list[int]:
        return [await counted(ledger, claim_events.CREATED, after_id, namespace=ns)]

    async def due_and_drifted(i: int) -> str:
        # A claim that expires in a minute, a minute from now, and a counter off by one.
        made = await ledger.create_claim(ClaimRequest(f"ns{i}", Resources(1, 0, 0), 60))
        assert made.claim is not None
        clock.advance(timedelta(seconds=61))
        drifted = nodes_table.c.used_cpus + 1
        off_by_one = sa.update(nodes_table).where(nodes_table.c.name == "c")

        async def drift(conn: AsyncConnection) -> None:
            await conn.execute(off_by_one.values(used_cpus=drifted))

        await ledger.store.write(drift, what="drift a counter")
        return made.claim.id

    async def due(i: int) -> str:
        made = await ledger.create_claim(ClaimRequest(f"ns{i}", Resources(1, 0, 0), 60))
        assert made.claim is not None
        clock.advance(timedelta(seconds=61))
        return made.claim.id

    async def swept(cid: str) -> bool:
        return await stored_state(ledger, cid) != "active"

    async def pass_audit(cid: str, after_id: int) -> list[int]:
        return [
            await counted(ledger, loop.CLAIM_EXPIRED, after_id, subject=cid),
            await counted(ledger, loop.NODE_DRIFTED, after_id, subject="c"),
        ]

    async def joining(i: int) -> str:
        return cluster.add_node("p", f"j{i}")

    async def synced(_: str) -> object:
        return await sync.sync()

    async def cordoned_in_cluster(i: int) -> str:
        name = cluster.add_node("p", f"k{i}")
        await sync.sync()  # joined, fault-free
        await cluster.set_unschedulable(name, True)
        return name

    async def is_cordoned(name: str) -> bool:
        node = await ledger.node(name)
        return node is not None and not node.schedulable

    async def gone_from_cluster(i: int) -> str:
        labels = {rules.SOURCE: rules.TRUE}
        await ledger.add_node(NodeSpec(f"g{i}", Capacity(4, 4096, 40), "p", labels))
        return f"g{i}"

    async def node_named(i: int) -> str:
        return f"n{i}"

    async def declared(i: int) -> str:
        await ledger.add_node(NodeSpec(f"n{i}", Capacity(4, 4096, 40)))
        return f"n{i}"

    async def declared_cordoned(i: int) -> str:
        name = await declared(i)
        await ledger.cordon(name)
        return name

    async def threads(name: str) -> int | None:
        node = await ledger.node(name)
        return None if node is None else node.capacity.threads

    async def token_namespace(i: int) -> str:
        return f"ns{i}"

    async def create_token(ns: str) -> object:
        return await token_service.create(ns, digest(f"fgt_{ns}"))

    async def token_creation_audit(ns: str, after_id: int) -> list[int]:
        return [await counted(ledger, token_events.CREATED, after_id, namespace=ns)]

    async def a_token(i: int) -> str:
        return (await ledger.create_token("team", digest(f"fgt_{i}"), clock.now())).id

    async def revoked(token_id: str) -> bool:
        return any(t.id == token_id and not t.active for t in await ledger.list_tokens("team"))

    table = {
        "release": Change(
            placed,
            lambda pid: placements.release("team", pid),
            lambda pid: _is(on_node(pid), None),
            by_subject(placement_events.RELEASED),
        ),
        "move": Change(
            placed,
            lambda pid: placements.move("team", pid, "b"),
            lambda pid: _is(on_node(pid), "b"),
            by_subject(placement_events.MOVED),
        ),
        "relocation": Change(
            placed,
            relocate,
            lambda pid: _not(_is(on_node(pid), "a")),
            by_subject(relocation_events.REDIRECTED),
        ),
        "claim create": Change(
            claimed_namespace,
            created,
            lambda ns: _true(ledger.claims(ns)),
            creation_audit,
        ),
        "claim update": Change(
            claimed,
            lambda cid: claims.update(cid, ClaimUpdate(limit_cpus=2)),
            lambda cid: _is(claim_limit(cid), 2),
            by_subject(claim_events.UPDATED),
        ),
        "claim delete": Change(
            claimed,
            claims.delete,
            lambda cid: _is(ledger.claim(cid), None),
            by_subject(claim_events.DELETED),
        ),
        "claim expiry on update": Change(
            due,
            lambda cid: claims.update(cid, ClaimUpdate(limit_cpus=2)),
            swept,
            by_subject(claim_events.EXPIRED),
        ),
        "reconcile pass": Change(
            due_and_drifted, lambda _: reconciler.run_pass(), swept, pass_audit
        ),
        "node join": Change(
            joining,
            synced,
            lambda name: _not(_is(ledger.node(name), None)),
            by_subject(node_events.NODE_JOINED),
        ),
        "node cordon": Change(
            cordoned_in_cluster, synced, is_cordoned, by_subject(node_events.NODE_CORDONED)
        ),
        "node leave": Change(
            gone_from_cluster,
            synced,
            lambda name: _is(ledger.node(name), None),
            by_subject(node_events.NODE_LEFT),
        ),
        "node add": Change(
            node_named,
            lambda name: admin.put(NodeSpec(name, Capacity(4, 4096, 40))),
            lambda name: _not(_is(ledger.node(name), None)),
            by_subject(node_events.NODE_JOINED),
        ),
        "node update": Change(
            declared,
            lambda name: admin.put(NodeSpec(name, Capacity(8, 4096, 40), "q")),
            lambda name: _is(threads(name), 8),
            by_subject(node_events.NODE_UPDATED),
        ),
        "node remove": Change(
            declared,
            admin.remove,
            lambda name: _is(ledger.node(name), None),
            by_subject(node_events.NODE_LEFT),
        ),
        "node admin cordon": Change(
            declared, admin.cordon, is_cordoned, by_subject(node_events.NODE_CORDONED)
        ),
        "node admin uncordon": Change(
            declared_cordoned,
            admin.uncordon,
            lambda name: _not(is_cordoned(name)),
            by_subject(node_events.NODE_UNCORDONED),
        ),
        "token create": Change(
            token_namespace,
            create_token,
            lambda ns: _true(ledger.list_tokens(ns)),
            token_creation_audit,
        ),
        "token revoke": Change(
            a_token,
            lambda token_id: token_service.revoke("team", token_id),
            revoked,
            by_subject(token_events.REVOKED),
        ),
    }
    return table[name]


async def _is(value: Awaitable[Any], expected: object) -> bool:
    return bool(await value == expected)


async def _not(value: Awaitable[bool]) -> bool:
    return not await value


async def _true(value: Awaitable[Any]) -> bool:
    return bool(await value)


class Counter:
    """Counts the statements and COMMITs the ledger's engine runs while it is listening."""

    def __init__(self, ledger: SqlLedger) -> None:
        self.engine = ledger.store.engine.sync_engine
        self.statements = self.commits = 0

    def _statement(self, *args: Any) -> None:
        self.statements += 1

    def _commit(self, *args: Any) -> None:
        self.commits += 1

    def __enter__(self) -> Counter:
        sa.event.listen(self.engine, "after_cursor_execute", self._statement)
        sa.event.listen(self.engine, "commit", self._commit)
        return self

    def __exit__(self, *exc: object) -> None:
        sa.event.remove(self.engine, "after_cursor_execute", self._statement)
        sa.event.remove(self.engine, "commit", self._commit)


async def newest_id(ledger: SqlLedger) -> int:
    newest = await ledger.events(newest_first=True, limit=1)
    return newest[0].id if newest else 0


async def attempt(make: Awaitable[object]) -> None:
    # Lost before its COMMIT and out of retries, or lost at it (unknown): checked after.
    with contextlib.suppress(LedgerUnavailable):
        await make


@pytest.mark.parametrize(
    "name",
    [
        "release",
        "move",
        "relocation",
        "claim create",
        "claim update",
        "claim delete",
        "claim expiry on update",
        "reconcile pass",
        "node join",
        "node cordon",
        "node leave",
        "node add",
        "node update",
        "node remove",
        "node admin cordon",
        "node admin uncordon",
        "token create",
        "token revoke",
    ],
)
async def test_a_change_and_its_events_commit_together_wherever_the_connection_dies(
    ledger: SqlLedger, backend: Backend, clock: VirtualClock, name: str
) -> None:
    for node in ("a", "b", "c"):
        await ledger.add_node(NodeSpec(node, ROOMY))
    change = changes(ledger, clock, name)
    subjects: list[str] = []
    faults = 0

    async def check(subject: str, mark: int) -> None:
        made = await change.made(subject)
        audit = await change.audit(subject, mark)
        assert audit == [int(made)] * len(audit), (name, subject, made, audit)

    async def fresh() -> tuple[str, int]:
        subject = await change.prepare(len(subjects))
        subjects.append(subject)
        return subject, await newest_id(ledger)

    # Fault-free: the change is made and audited once, in so many statements and COMMITs.
    subject, mark = await fresh()
    with Counter(ledger) as counter:
        await change.make(subject)
    assert await change.made(subject), name
    await check(subject, mark)
    assert counter.statements > 0 and counter.commits > 0

    killer, cut = killer_of(backend)
    try:
        for nth in range(1, counter.statements + 1):
            subject, mark = await fresh()
            hook = after_first(ledger, "", cut, nth=nth)
            try:
                await attempt(change.make(subject))
            finally:
                sa.event.remove(ledger.store.engine.sync_engine, "after_cursor_execute", hook)
            await check(subject, mark)
            faults += 1
    finally:
        if killer is not None:
            await killer.dispose()

    for nth in range(1, counter.commits + 1):
        if backend.kind != "sqlite":  # SQLite has no server session to kill
            subject, mark = await fresh()
            async with killed_at_first_commit(ledger, backend, nth=nth) as victims:
                await attempt(change.make(subject))
            assert victims, (name, nth)  # the fault did happen
            await check(subject, mark)
            faults += 1
        subject, mark = await fresh()
        with first_commit_answer_lost(ledger, lost=True, nth=nth) as commits:
            await attempt(change.make(subject))
        await check(subject, mark)
        faults += 1
        assert True in commits, (name, nth, commits)  # the fault did happen

    # Over the whole run too (a change a fault left undone may be made by a later one): each
    # subject's own event is there exactly once if its change is in, else not at all.
    for subject in subjects:
        made = await change.made(subject)
        assert (await change.audit(subject, 0))[0] == int(made), (name, subject, made)
    assert faults >= counter.statements + counter.commits
