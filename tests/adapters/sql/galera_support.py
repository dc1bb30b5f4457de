"""What the Galera and failover tests share: the cluster's URLs, a ledger per node, the ledger's
exactness checks, and a load that records each request's outcome.

The cluster tests run only in the lanes that start clusters (``FLEETGATE_TEST_CLUSTERS=on``,
``nox -s tests_galera tests_failover``); elsewhere they are deselected, never skipped. A lane
that cannot start its cluster fails.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field

import pytest

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest
from tests.adapters.sql.test_concurrency import assert_counters_match_placements
from tests.backends import create_database
from tests.clusters import Cluster, Galera
from tests.conftest import Backend
from tests.ledgers import open_ledger

#: Set by the nox lane that started a cluster: its nodes' server URLs, comma-separated.
URLS_VARIABLE = "FLEETGATE_TEST_GALERA_URLS"


def galera_server_urls(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The lane's cluster, or one started here (and stopped afterwards) when none was given."""
    given = os.environ.get(URLS_VARIABLE, "")
    if given:
        yield given.split(",")
        return
    with Galera() as cluster, logs_kept_on_failure(request, cluster):
        assert isinstance(cluster, Galera)
        yield cluster.urls


@contextmanager
def logs_kept_on_failure(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[None]:
    """Keep ``cluster``'s directory (its path printed when it stops) if a test failed meanwhile.

    A fixture's teardown does not see its test's failure; the session's count of failed tests
    does (a test's own report is counted before its fixtures are torn down).
    """
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        cluster.failed = True


def node_backends(server_urls: list[str], name: str) -> list[Backend]:
    """A new database ``name`` (created through the first node) as seen through each node."""
    create_database(server_urls[0], name)
    return [Backend(url=url.rsplit("/", 1)[0] + f"/{name}", kind="mariadb") for url in server_urls]


@asynccontextmanager
async def ledgers_on(
    backends: list[Backend], enforcement: str = "advisory"
) -> AsyncIterator[list[SqlLedger]]:
    """One started ledger per node, all over the same (emptied) tables."""
    async with AsyncExitStack() as stack:
        opened = []
        for backend in backends:
            opened.append(
                await stack.enter_async_context(open_ledger(backend, enforcement=enforcement))
            )
        yield opened


async def assert_exact(ledger: SqlLedger, *, claims: bool = False) -> None:
    """No drift: counters equal the placements; a reconcile pass finds nothing to correct.

    With ``claims``, the cluster row's split between claimed and unclaimed usage is left to the
    reconcile pass (the claims' own counters are its business).
    """
    if claims:
        placements = await ledger.placements()
        for node in await ledger.nodes():
            used = Resources()
            for p in placements:
                if p.node == node.name:
                    used = used.plus(p.resources)
            assert node.used == used, node.name
    else:
        await assert_counters_match_placements(ledger)
    summary = (await ledger.reconcile()).summary
    assert summary.clean, summary


@dataclass
class Outcomes:
    """What each request id came to: admitted (with its placement), denied, or unknown (503)."""

    admitted: dict[str, str] = field(default_factory=dict)
    denied: set[str] = field(default_factory=set)
    unknown: dict[str, AdmitRequest] = field(default_factory=dict)
    attempts: int = 0

    @property
    def unavailable_rate(self) -> float:
        return len(self.unknown) / max(self.attempts, 1)

    async def try_admit(self, ledger: SqlLedger, request: AdmitRequest) -> None:
        """Admit once; record the outcome (a 503 is recorded as unknown, to settle later)."""
        assert request.request_id is not None
        self.attempts += 1
        try:
            admission = await ledger.admit(request)
        except LedgerUnavailable:
            self.unknown[request.request_id] = request
            return
        self.record(request.request_id, admission.placement.id if admission.placement else None)

    def record(self, request_id: str, placement_id: str | None) -> None:
        self.unknown.pop(request_id, None)
        if placement_id is None:
            self.denied.add(request_id)
        else:
            assert self.admitted.setdefault(request_id, placement_id) == placement_id
            self.denied.discard(request_id)

    async def settle(self, ledger: SqlLedger) -> None:
        """Replay every unknown request by its request id: it was applied once or not at all."""
        for request_id, request in list(self.unknown.items()):
            admission = await ledger.admit(request)
            self.record(request_id, admission.placement.id if admission.placement else None)

    async def assert_exactly_once(self, ledger: SqlLedger, namespace: str) -> None:
        """Every admitted request's placement exists, once; nothing else was placed."""
        assert not self.unknown
        placements = await ledger.placements(namespace)
        assert sorted(p.id for p in placements) == sorted(self.admitted.values())
        for request_id, placement_id in self.admitted.items():
            found = await ledger.placement_by_request(namespace, request_id)
            assert found is not None and found.id == placement_id, request_id
        for request_id in self.denied:
            assert await ledger.placement_by_request(namespace, request_id) is None


async def admit_load(
    ledgers: list[SqlLedger],
    outcomes: Outcomes,
    *,
    namespace: str,
    nodes: list[str],
    writers_per_ledger: int,
    requests_per_writer: int,
    size: Resources,
    seed: int,
    stop: asyncio.Event | None = None,
) -> None:
    """Writers on every ledger, each admitting ``requests_per_writer`` unique request ids."""

    async def writer(index: int, ledger: SqlLedger) -> None:
        rng = random.Random(seed * 1000 + index)
        for n in range(requests_per_writer):
            if stop is not None and stop.is_set():
                return
            request = AdmitRequest(namespace, rng.choice(nodes), size, request_id=f"w{index}-r{n}")
            await outcomes.try_admit(ledger, request)

    await asyncio.gather(
        *(
            writer(i * writers_per_ledger + w, ledger)
            for i, ledger in enumerate(ledgers)
            for w in range(writers_per_ledger)
        )
    )


async def assert_never_over(ledger: SqlLedger) -> None:
    """No node holds more than its limit in any dimension."""
    for node in await ledger.nodes():
        assert all(node.used.get(d) <= node.limits.get(d) for d in ALLOCATION), node.name
