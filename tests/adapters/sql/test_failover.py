"""Failover without a restart: the database server under a running ledger is killed (SIGKILL)
under load, and the same ledger, through a URL that lists every host, serves again.

PostgreSQL 15: a primary with a synchronous standby; the standby is promoted and the URL's
``target_session_attrs=read-write`` finds it. Galera: one node of three is killed; the URL's
next host serves at once, and the killed node rejoins. Either way every admission that was
answered exists exactly once, and those whose outcome was unknown at the kill (a 503) are
settled by replaying their request ids: each was applied once or not at all.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.adapters.sql.galera_support import Outcomes, assert_exact, logs_kept_on_failure
from tests.clusters import Galera, PostgresPair
from tests.conftest import Backend
from tests.ledgers import START, open_ledger
from tests.servers import running_api
from tests.waiting import HANG_SECONDS, until

pytestmark = pytest.mark.failover

#: Admissions answered before the server is killed, and by each writer after it is back.
BEFORE_KILL = 30
AFTER_RECOVERY = 5
WRITERS = 6


@pytest.fixture
def pg_pair(request: pytest.FixtureRequest) -> Iterator[PostgresPair]:
    with PostgresPair() as pair, logs_kept_on_failure(request, pair):
        assert isinstance(pair, PostgresPair)
        yield pair


@pytest.fixture
def galera(request: pytest.FixtureRequest) -> Iterator[Galera]:
    with Galera() as cluster, logs_kept_on_failure(request, cluster):
        assert isinstance(cluster, Galera)
        yield cluster


async def run_through_a_kill(ledger: SqlLedger, kill: Callable[[], None]) -> Outcomes:
    """Writers admit until the server was killed and replaced and each has been answered
    ``AFTER_RECOVERY`` times since; ``kill`` (blocking) runs once ``BEFORE_KILL`` were placed."""
    await ledger.add_node(NodeSpec("a", Capacity(1000, 10_000_000, 100_000)))
    outcomes = Outcomes()
    recovered = asyncio.Event()

    async def writer(index: int) -> None:
        answered_after = 0
        n = 0
        while answered_after < AFTER_RECOVERY:
            n += 1
            request = AdmitRequest("team", "a", Resources(1, 1, 1), request_id=f"w{index}-{n}")
            await outcomes.try_admit(ledger, request)
            if request.request_id in outcomes.unknown:
                await asyncio.sleep(0.05)  # the outage: ask again soon, not in a hot loop
            elif recovered.is_set():
                answered_after += 1

    async def killer() -> None:
        await until(lambda: len(outcomes.admitted) >= BEFORE_KILL)
        await asyncio.to_thread(kill)
        recovered.set()

    async with asyncio.timeout(4 * HANG_SECONDS):
        await asyncio.gather(killer(), *(writer(i) for i in range(WRITERS)))
    return outcomes


async def test_postgres_primary_killed_under_load_and_the_standby_promoted(
    pg_pair: PostgresPair,
) -> None:
    backend = Backend(url=pg_pair.url("test"), kind="postgres")
    async with open_ledger(backend) as ledger:

        def kill() -> None:
            pg_pair.kill_primary()
            pg_pair.promote()

        outcomes = await run_through_a_kill(ledger, kill)
        # The same ledger (no restart) now writes to the promoted standby.
        assert await ledger.store.read(_server_port, what="port") == pg_pair.standby.port
        await outcomes.settle(ledger)
        await outcomes.assert_exactly_once(ledger, "team")
        assert len(outcomes.admitted) >= BEFORE_KILL + WRITERS * AFTER_RECOVERY
        await assert_exact(ledger)


@asynccontextmanager
async def ledger_as_it_is(backend: Backend) -> AsyncIterator[SqlLedger]:
    """A started ledger over the tables as they are (``open_ledger`` would empty them)."""
    options = {**backend.ledger_options(), "migrate": False}
    ledger = plugins.make_ledger(
        plugins.plugin_manager(), backend.url, options, VirtualClock(START)
    )
    assert isinstance(ledger, SqlLedger)
    await ledger.start()
    try:
        yield ledger
    finally:
        await ledger.close()


async def _server_port(conn: object) -> int:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import AsyncConnection

    assert isinstance(conn, AsyncConnection)
    return int((await conn.execute(text("SELECT inet_server_port()"))).scalar_one())


async def test_a_galera_node_killed_under_load_and_rejoined(galera: Galera) -> None:
    name = f"fgf_{secrets.token_hex(3)}"
    galera.sql(0, f"CREATE DATABASE {name}")
    hosts = "&".join(f"host=127.0.0.1:{node.port}" for node in galera.nodes)
    backend = Backend(url=f"mysql+aiomysql://root@/{name}?{hosts}", kind="mariadb")
    async with open_ledger(backend) as ledger:
        outcomes = await run_through_a_kill(ledger, lambda: galera.kill(0))
        await outcomes.settle(ledger)
        await outcomes.assert_exactly_once(ledger, "team")
        await assert_exact(ledger)
        # The killed node rejoins (IST/SST) and holds exactly the same placements.
        await asyncio.to_thread(galera.rejoin, 0)
        direct = Backend(url=galera.nodes[0].url(name), kind="mariadb")
        async with ledger_as_it_is(direct) as node0:
            await outcomes.assert_exactly_once(node0, "team")
            await assert_exact(node0)


def test_the_api_process_follows_a_promoted_standby_without_a_restart(
    pg_pair: PostgresPair,
) -> None:
    """The same ``fleetgate api`` process, over HTTP: 201s before the kill, 503s (or 201s)
    while the primary is gone, and once the standby is promoted every request answered again
    — the unknown ones replayed by request id — with each 201 placed exactly once."""
    token = "failover-admin-token"
    admin = {"Authorization": f"Bearer {token}"}
    url = "/v1/namespaces/team/placements"
    with (
        running_api(pg_pair.url("test"), token=token) as base,
        httpx.Client(base_url=base, headers=admin, timeout=HANG_SECONDS) as client,
    ):
        node = {"threads": 256, "memory_mb": 1_000_000, "disk_gb": 100_000}
        assert client.put("/v1/nodes/a", json=node).status_code == 201
        placed: dict[str, str] = {}
        unknown: set[str] = set()

        def post(request_id: str) -> None:
            body = {"cpus": 1, "memory_mb": 1, "disk_gb": 1, "node": "a", "request_id": request_id}
            r = client.post(url, json=body)
            if r.status_code == 503:
                unknown.add(request_id)
                return
            assert r.status_code in (200, 201), r.text
            unknown.discard(request_id)
            assert placed.setdefault(request_id, r.json()["id"]) == r.json()["id"]

        for n in range(10):
            post(f"before-{n}")
        assert len(placed) == 10

        def kill_and_promote() -> None:
            pg_pair.kill_primary()
            pg_pair.promote()

        failover = threading.Thread(target=kill_and_promote)
        failover.start()
        n = 0
        while failover.is_alive():
            n += 1
            post(f"during-{n}")
            time.sleep(0.05)
        failover.join()
        for request_id in sorted(unknown):
            post(request_id)  # the outcome was unknown: replaying settles it
        assert not unknown
        for n in range(5):
            post(f"after-{n}")
        listed = client.get(url, params={"limit": 500})
        assert listed.status_code == 200
        by_request = {p["request_id"]: p["id"] for p in listed.json()}
        assert by_request == placed  # every 201 exactly once, nothing else


def test_a_galera_node_whose_port_was_taken_while_it_was_down_rejoins_on_new_ports(
    galera: Galera,
) -> None:
    """A program that takes a dead node's SQL port (here a client connection's local end, as
    any outgoing connection could get it) makes the restarted node abort (-6); the rejoin
    starts it again on newly reserved ports, and every node is synced in a cluster of three."""
    node = galera.nodes[0]
    galera.sql(0, "CREATE DATABASE fgf_before; CREATE TABLE fgf_before.t (n INT PRIMARY KEY)")
    galera.sql(1, "INSERT INTO fgf_before.t VALUES (1)")
    galera.kill(0)
    galera.wait_ready(galera.nodes[1:])
    taken = node.port
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.socket()
        client.bind(("127.0.0.1", taken))
        client.connect(listener.getsockname())
        try:
            galera.rejoin(0)
        finally:
            client.close()
    assert node.port != taken
    assert (node.home / "data.failed-1").is_dir()  # the failed attempt's datadir, kept
    assert galera.sql(0, "SELECT n FROM fgf_before.t").split() == ["1"]
    assert all(galera.status(n, "wsrep_cluster_size") == "3" for n in galera.nodes)
    galera.failed = False  # the retry was this test's point: no logs to keep
