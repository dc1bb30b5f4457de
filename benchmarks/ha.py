"""Clustered databases (issue 29): Galera single-writer, Galera multi-primary and a plain MariaDB
server side by side in one run, and the time to serve again after a server is killed.

The clusters are the tests' own (``tests/clusters.py``), started here on free local ports. Each
cell runs the same count-bound load: ``WRITERS`` writers each admitting ``PER_WRITER`` unique
request ids onto a fleet with room for all of them. It reports admissions/s, the 503 rate, p50
and p99, and checks what must hold whatever the speed: every admitted request placed exactly
once (unknown outcomes settled by replaying their request ids), counters equal to the
placements, no node over its limits.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from tests.backends import _admin
from tests.clusters import Galera, PostgresPair

from benchmarks import machine
from benchmarks.report import Section, Table, Verdict
from benchmarks.sizes import Sizes
from benchmarks.stats import percentile
from benchmarks.targets import Target
from fleetgate.adapters import plugins
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import ALLOCATION, Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec

WRITERS = 24
PER_WRITER = 25
FLEET = 8
#: The issue's target for multi-primary Galera.
MAX_UNAVAILABLE = 0.01


@dataclass
class Cell:
    """One configuration's load and what the checks found."""

    label: str
    latencies: list[float] = field(default_factory=list)
    unavailable: int = 0
    attempts: int = 0
    elapsed: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def unavailable_share(self) -> float:
        return self.unavailable / max(self.attempts, 1)


def _ledger(url: str, migrate: bool) -> SqlLedger:
    options = {"capacity": {}, "claims": {"enforcement": "advisory"}, "migrate": migrate}
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, options, None)
    assert isinstance(ledger, SqlLedger)
    return ledger


async def _create_database(server_url: str, name: str) -> str:
    await _admin(server_url, f"CREATE DATABASE {name}")
    return server_url.rsplit("/", 1)[0] + f"/{name}"


async def contention(label: str, urls: Sequence[str]) -> Cell:
    """The load, its writers spread round-robin over one ledger per URL."""
    ledgers = [_ledger(url, migrate=i == 0) for i, url in enumerate(urls)]
    for ledger in ledgers:
        await ledger.start()
    cell = Cell(label)
    admitted: dict[str, str] = {}
    unknown: dict[str, AdmitRequest] = {}
    try:
        first = ledgers[0]
        for n in range(FLEET):
            await first.add_node(NodeSpec(f"n{n}", Capacity(1000, 10_000_000, 100_000)))

        async def writer(index: int) -> None:
            ledger = ledgers[index % len(ledgers)]
            rng = random.Random(index)
            for r in range(PER_WRITER):
                request = AdmitRequest(
                    "bench",
                    f"n{rng.randrange(FLEET)}",
                    Resources(1, 1, 1),
                    request_id=f"{index}-{r}",
                )
                cell.attempts += 1
                began = time.perf_counter()
                try:
                    admission = await ledger.admit(request)
                except LedgerUnavailable:
                    cell.unavailable += 1
                    unknown[f"{index}-{r}"] = request
                    continue
                cell.latencies.append(time.perf_counter() - began)
                if admission.placement is not None:
                    admitted[f"{index}-{r}"] = admission.placement.id

        began = time.perf_counter()
        await asyncio.gather(*(writer(i) for i in range(WRITERS)))
        cell.elapsed = time.perf_counter() - began
        for request_id, request in unknown.items():  # settle: applied once or not at all
            admission = await first.admit(request)
            if admission.placement is not None:
                admitted[request_id] = admission.placement.id
        cell.problems += await _check(ledgers[-1], admitted)
    finally:
        for ledger in ledgers:
            await ledger.close()
    return cell


async def _check(ledger: SqlLedger, admitted: dict[str, str]) -> list[str]:
    """Nothing lost or doubled, no drift, nothing over."""
    problems = []
    placements = await ledger.placements("bench")
    if sorted(p.id for p in placements) != sorted(admitted.values()):
        problems.append(f"{len(placements)} placements for {len(admitted)} admitted requests")
    for node in await ledger.nodes():
        used = Resources()
        for p in placements:
            if p.node == node.name:
                used = used.plus(p.resources)
        if node.used != used:
            problems.append(f"{node.name}: counters {node.used} != placements {used}")
        if any(node.used.get(d) > node.limits.get(d) for d in ALLOCATION):
            problems.append(f"{node.name}: over its limits")
    return problems


async def recovery(label: str, url: str, kill: Callable[[], None]) -> tuple[float, float, Cell]:
    """Seconds from the kill to the first admission answered again, and the kill's own time."""
    ledger = _ledger(url, migrate=True)
    await ledger.start()
    cell = Cell(label)
    try:
        await ledger.add_node(NodeSpec("a", Capacity(1000, 10_000_000, 100_000)))
        for n in range(20):
            await ledger.admit(AdmitRequest("bench", "a", Resources(1, 1, 1), request_id=f"p{n}"))
        killed = time.perf_counter()
        await asyncio.to_thread(kill)
        kill_seconds = time.perf_counter() - killed
        n = 0
        while True:
            n += 1
            cell.attempts += 1
            request = AdmitRequest("bench", "a", Resources(1, 1, 1), request_id=f"after{n}")
            try:
                await ledger.admit(request)
                break
            except LedgerUnavailable:
                cell.unavailable += 1
                await asyncio.sleep(0.01)
        return time.perf_counter() - killed, kill_seconds, cell
    finally:
        await ledger.close()


def _row(table: Table, cell: Cell, load: str) -> None:
    table.add(
        cell.label,
        f"{cell.rate:,.0f}",
        f"{100 * cell.unavailable_share:.2f}% ({cell.unavailable}/{cell.attempts})",
        f"{1000 * percentile(cell.latencies, 0.5):.1f}",
        f"{1000 * percentile(cell.latencies, 0.99):.1f}",
        "clean" if not cell.problems else "; ".join(cell.problems),
        load,
    )


async def section(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    """Run every cell and the two recoveries; the report's section."""
    s = Section(
        "ha",
        "Clustered databases: Galera and PostgreSQL failover",
        intro=(
            f"{WRITERS} writers, {PER_WRITER} unique request ids each, onto {FLEET} nodes with "
            "room for all; one run, three local Galera nodes (tests/clusters.py) beside the "
            "machine's own MariaDB. Multi-primary spreads the writers over one API (ledger) "
            "per node; single-writer sends them all to node 1. A 503 here is a transaction "
            "that still lost after the retry budget; its request id is replayed afterwards."
        ),
    )
    table = Table(
        "Admissions under contention",
        ["configuration", "admissions/s", "503", "p50 ms", "p99 ms", "checks", "load (1/5/15)"],
    )
    cells: list[Cell] = []
    plain = [t for t in targets if t.kind == "mariadb" and not t.session_variables]
    if not plain:
        # The clusters are compared with the plain server in the same run, or not at all (a
        # run on SQLite alone, such as the harness's smoke test, starts no cluster).
        s.intro = "Not run: it needs the MariaDB backend (`--backend mariadb`) to compare with."
        return s
    name = f"fgb_{secrets.token_hex(3)}"
    url = await _create_database(plain[0].server_url, name)
    try:
        with console.status("plain MariaDB"):
            cells.append(await contention("MariaDB (one server)", [url]))
        _row(table, cells[-1], machine.load_average())
    finally:
        await _admin(plain[0].server_url, f"DROP DATABASE IF EXISTS {name}")
    with Galera() as cluster:
        assert isinstance(cluster, Galera)
        name = f"fgb_{secrets.token_hex(3)}"
        cluster.sql(0, f"CREATE DATABASE {name}")
        urls = [n.url(name) for n in cluster.nodes]
        with console.status("Galera single-writer"):
            cells.append(await contention("Galera, single writer (node 1)", urls[:1]))
        _row(table, cells[-1], machine.load_average())
        cluster.sql(0, f"DROP DATABASE {name}; CREATE DATABASE {name}")
        with console.status("Galera multi-primary"):
            multi = await contention("Galera, multi-primary (3 nodes)", urls)
            cells.append(multi)
        _row(table, cells[-1], machine.load_average())
        s.verdicts.append(
            Verdict(
                "Galera multi-primary: < 1% 503 under contention",
                f"{100 * multi.unavailable_share:.2f}%",
                multi.unavailable_share < MAX_UNAVAILABLE,
            )
        )
        hosts = "&".join(f"host=127.0.0.1:{n.port}" for n in cluster.nodes)
        with console.status("Galera: kill node 1"):
            galera_recovery = await recovery(
                "Galera node 1 killed",
                f"mysql+aiomysql://root@/{name}?{hosts}",
                lambda: cluster.kill(0),
            )
    s.tables.append(table)
    for cell in cells:
        for problem in cell.problems:
            s.findings.append(f"FAILED {cell.label}: {problem}")
        s.verdicts.append(
            Verdict(
                f"{cell.label}: 0 over-commit, 0 drift, 0 lost, 0 doubled",
                "clean" if not cell.problems else "; ".join(cell.problems),
                not cell.problems,
            )
        )
    with PostgresPair() as pair:
        assert isinstance(pair, PostgresPair)

        def failover() -> None:
            pair.kill_primary()
            pair.promote()

        with console.status("PostgreSQL: kill the primary, promote the standby"):
            pg_recovery = await recovery("PostgreSQL primary killed", pair.url("test"), failover)
    times = Table(
        "Time to serve again after a server is killed (same process, no restart)",
        [
            "what",
            "kill (+ promotion) s",
            "first admission answered after s",
            "503s meanwhile",
            "load",
        ],
    )
    for seconds, kill_seconds, cell in (galera_recovery, pg_recovery):
        times.add(
            cell.label,
            f"{kill_seconds:.2f}",
            f"{seconds:.2f}",
            cell.unavailable,
            machine.load_average(),
        )
    times.notes.append(
        "PostgreSQL's time includes the promotion (pg_ctl promote -w), which a failover manager "
        "would start; Galera's needs none: the URL's next host serves."
    )
    s.tables.append(times)
    return s
