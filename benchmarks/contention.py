"""Contention over HTTP (issue 45): many writers against one real ``fleetgate api``.

Each writer places 1 vCPU in one of two namespaces and, holding more than ``KEEP`` placements,
releases its oldest; the run ends when ``admissions`` placements were made (a count, not a
time). It runs twice per backend: writers alone, and with claim churn (each namespace's claim
created and deleted every 0.15 s) and a reconcile pass every 0.5 s, all over HTTP as an operator's
tools would. Measured: admissions per second, the client's p50 and p99 per request, the 5xx
answers, the server's deadlock retries (its log lines ``retrying …``) and the lock waits seen
(sessions waiting for a row lock, sampled every 50 ms on the database), both per 1,000 writes;
then whether any placement was lost (answered 201, not in the table) or doubled (in the table,
never answered), and the machine's load average. A run in which a request got no answer at all
(a dropped connection, say) stops there: its server log is kept (``KEPT_LOGS``) and printed, and
the error is a finding that fails the section, so the next rows still run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import sqlalchemy as sa
from rich.console import Console
from sqlalchemy.ext.asyncio import create_async_engine

from benchmarks import http
from benchmarks.report import Section, Table, ms
from benchmarks.seed import open_ledger, seed_nodes
from benchmarks.sizes import Sizes
from benchmarks.stats import percentile
from benchmarks.targets import Target, fresh_database

NAMESPACES = ("bench-a", "bench-b")
#: Placements a writer holds before it releases its oldest.
KEEP = 3
NODES = 16
CLAIM_INTERVAL = 0.15
RECONCILE_INTERVAL = 0.5
SAMPLE_INTERVAL = 0.05
#: (writers, admissions) by profile: the issue's 32 writers and 2,000 admissions in full.
SIZES = {"full": (32, 2000), "quick": (8, 300), "tiny": (4, 100)}
COLUMNS = [
    "backend",
    "churn",
    "writers",
    "admissions",
    "admissions/s",
    "p50 ms",
    "p99 ms",
    "5xx",
    "deadlock retries /1k writes",
    "retries /1k writes",
    "lock waits /1k writes",
    "lost",
    "doubled",
    "load",
]
#: Messages of the ledger's transaction retries that name a deadlock (MariaDB 1213, PG 40P01).
_DEADLOCK = re.compile(r"1213|40P01|deadlock", re.IGNORECASE)
#: This database's sessions waiting for a lock, per server kind.
LOCK_WAITS = {
    "mariadb": "SELECT count(*) FROM information_schema.innodb_trx t"
    " JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id"
    " WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()",
    "postgres": "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    " AND datname = current_database()",
}
#: Where the server log of a failed run is kept (under the temporary directory, ``$TMPDIR``).
KEPT_LOGS = "fleetgate-bench-logs"
#: Lines of a kept log printed with the failure (its end, and every warning or error).
TAIL_LINES = 30
_NOTEWORTHY = re.compile(r'"level": ?"(warning|error|critical)"|Traceback', re.IGNORECASE)


@dataclass
class Run:
    """What one run measured."""

    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    admitted: set[str] = field(default_factory=set)
    released: set[str] = field(default_factory=set)
    writes: int = 0
    lock_waits: int = 0
    elapsed: float = 0.0
    #: The 5xx answers: what was asked and what the server said (printed with the row).
    errors: list[str] = field(default_factory=list)
    #: Why the run stopped early (a request without an answer), with when it happened.
    failure: str | None = None

    def fail(self, exc: BaseException) -> None:
        """Keep the first error that stopped the run: the request, the time (UTC), the error."""
        if self.failure is not None:
            return
        asked = ""
        # ``request`` raises RuntimeError on an error raised before any request was made.
        with contextlib.suppress(RuntimeError):
            if isinstance(exc, httpx.RequestError):
                asked = f"{exc.request.method} {exc.request.url.path}: "
        when = datetime.now(UTC).isoformat(timespec="milliseconds")
        # The chain says what the socket saw (httpx's ReadError wraps httpcore's, which wraps
        # the OSError: a reset, an end of file).
        chain: list[str] = []
        cause: BaseException | None = exc
        while cause is not None and len(chain) < 5:
            chain.append(f"{type(cause).__module__}.{type(cause).__name__}: {cause!r}")
            cause = cause.__cause__ or cause.__context__
        self.failure = f"{when} {asked}{' <- '.join(chain)}"

    def answer(self, response: httpx.Response, seconds: float) -> None:
        """Count one answered placement or release, and its latency."""
        self.latencies.append(seconds)
        self.count(response)

    def count(self, response: httpx.Response) -> None:
        """Count one answered write; keep what a 5xx said."""
        status = response.status_code
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.writes += 1
        if status >= 500:
            self.errors.append(f"{response.request.method} {response.request.url.path}: "
                               f"{status} {response.text[:300]}")  # fmt: skip

    @property
    def server_errors(self) -> int:
        """Answers 5xx."""
        return sum(n for status, n in self.statuses.items() if status >= 500)


def limits(writers: int) -> httpx.Limits:
    """The client's pool: a connection for each writer and side task, none kept idle too long.

    The pool hands out its first free connection, so those at its end sit idle whenever fewer
    requests are in flight (the server closed 3 to 21 per run at its 5 s keep-alive); one reused
    just as the server closed it was the ``httpx.ReadError`` of issue 45
    (``http.CLIENT_KEEP_ALIVE``).
    """
    return httpx.Limits(max_connections=writers + 4, keepalive_expiry=http.CLIENT_KEEP_ALIVE)


def headers() -> dict[str, str]:
    """The admin token the benchmark server was started with."""
    return {"Authorization": f"Bearer {http.TOKEN}"}


async def _writer(client: httpx.AsyncClient, ns: str, run: Run, left: list[int]) -> None:
    held: list[str] = []
    # What a writer holds at the end stays: the table must then hold exactly those placements.
    while left[0] > 0:
        if len(held) <= KEEP:
            left[0] -= 1
            body = {"cpus": 1, "memory_mb": 64, "disk_gb": 1, "request_id": uuid.uuid4().hex}
            started = time.perf_counter()
            r = await client.post(f"/v1/namespaces/{ns}/placements", json=body)
            run.answer(r, time.perf_counter() - started)
            if r.status_code == 201:
                held.append(r.json()["id"])
                run.admitted.add(held[-1])
            elif r.status_code < 500:
                raise RuntimeError(f"placement answered {r.status_code}: {r.text}")
            continue
        placement = held.pop(0)
        started = time.perf_counter()
        r = await client.delete(f"/v1/namespaces/{ns}/placements/{placement}")
        run.answer(r, time.perf_counter() - started)
        if r.status_code == 204:
            run.released.add(placement)
        else:
            held.append(placement)  # a 5xx: released later, or counted as held at the end


async def _claims(client: httpx.AsyncClient, ns: str, run: Run, done: asyncio.Event) -> None:
    body = {"cpus": 512, "memory_mb": 1 << 22, "disk_gb": 1 << 16, "expires_in_seconds": 3600}
    while not done.is_set():
        r = await client.post(f"/v1/namespaces/{ns}/claims", json=body)
        run.count(r)
        await asyncio.sleep(CLAIM_INTERVAL)
        if r.status_code == 201:
            r = await client.delete(f"/v1/namespaces/{ns}/claims/{r.json()['id']}")
            run.count(r)
        await asyncio.sleep(CLAIM_INTERVAL)


async def _reconciles(client: httpx.AsyncClient, run: Run, done: asyncio.Event) -> None:
    while not done.is_set():
        r = await client.post("/v1/admin/reconcile")
        run.count(r)
        await asyncio.sleep(RECONCILE_INTERVAL)


async def _sample_lock_waits(target: Target, url: str, run: Run, done: asyncio.Event) -> None:
    query = LOCK_WAITS.get(target.kind)
    if query is None:  # SQLite: one writer, no row locks to wait for
        return
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            while not done.is_set():
                run.lock_waits += int((await conn.execute(sa.text(query))).scalar_one())
                await asyncio.sleep(SAMPLE_INTERVAL)
    finally:
        await engine.dispose()


def retries_in(log: Path) -> tuple[int, int]:
    """(retries, deadlock retries) the server logged."""
    retries = deadlocks = 0
    for line in log.read_text(errors="replace").splitlines():
        if "retrying " in line:
            retries += 1
            deadlocks += bool(_DEADLOCK.search(line))
    return retries, deadlocks


async def _in_table(target: Target, url: str) -> set[str]:
    async with open_ledger(target, url, migrate=False) as ledger:
        return {p.id for p in await ledger.placements(limit=100_000)}


async def one_run(
    target: Target, writers: int, admissions: int, churn: bool, console: Console
) -> tuple[list[str], str | None]:
    """One row of the table (a fresh database, a fresh server, one run), and why it failed."""
    async with fresh_database(target) as url:
        async with open_ledger(target, url) as ledger:
            await seed_nodes(ledger, NODES)
        with tempfile.TemporaryDirectory(prefix="fgbench-log-") as tmp:
            log = Path(tmp) / "server.log"
            async with http.serve(target, url, log=log) as server:
                run = Run()
                done = asyncio.Event()
                left = [admissions]
                async with httpx.AsyncClient(
                    base_url=server.base, headers=headers(), timeout=60.0, limits=limits(writers)
                ) as client:
                    side = [asyncio.ensure_future(_sample_lock_waits(target, url, run, done))]
                    if churn:
                        side += [
                            asyncio.ensure_future(_claims(client, ns, run, done))
                            for ns in NAMESPACES
                        ]
                        side.append(asyncio.ensure_future(_reconciles(client, run, done)))
                    tasks = [
                        asyncio.ensure_future(
                            _writer(client, NAMESPACES[w % len(NAMESPACES)], run, left)
                        )
                        for w in range(writers)
                    ]
                    started = time.perf_counter()
                    try:
                        await asyncio.gather(*tasks)
                    except Exception as exc:  # kept as the run's failure, its log with it
                        run.fail(exc)
                    finally:
                        run.elapsed = time.perf_counter() - started
                        done.set()
                        for task in tasks:
                            task.cancel()
                        await asyncio.gather(*tasks, return_exceptions=True)
                        for failed in await asyncio.gather(*side, return_exceptions=True):
                            if isinstance(failed, Exception):  # a sampler that saw nothing
                                run.fail(failed)
            retries, deadlocks = retries_in(log)
            kept = None if run.failure is None else keep_log(log, target, churn, run.failure)
        table = await _in_table(target, url)
    for error in run.errors:
        console.print(f"  5xx: {error}")
    if kept is not None:
        show_failure(run, kept, console)
    still_held = run.admitted - run.released
    lost = len(still_held - table)
    doubled = len(table - still_held)
    placed = len(run.admitted)
    per_k = 1000.0 / max(run.writes, 1)
    row = [
        target.label,
        "claims + reconcile" if churn else "none",
        str(writers),
        str(placed),
        f"{placed / run.elapsed:.1f}" if run.elapsed else "0",
        ms(percentile(run.latencies, 0.5)),
        ms(percentile(run.latencies, 0.99)),
        str(run.server_errors),
        f"{deadlocks * per_k:.1f}",
        f"{retries * per_k:.1f}",
        f"{run.lock_waits * per_k:.1f}",
        # Requests cut off without an answer may or may not have been done: not counted.
        str(lost) if run.failure is None else "n/a",
        str(doubled) if run.failure is None else "n/a",
        f"{os.getloadavg()[0]:.2f}",
    ]
    console.print(
        f"  {target.label}, churn {churn}: {dict(zip(COLUMNS[4:], row[4:], strict=True))}"
    )
    if run.failure is None:
        return row, None
    return row, f"FAILED: {target.label}, churn {churn}: {run.failure}; server log kept: {kept}"


def keep_log(log: Path, target: Target, churn: bool, failure: str) -> Path:
    """Copy a failed run's server log out of its temporary directory, the failure beside it.

    Returns the copy's path.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    kept = Path(tempfile.gettempdir(), KEPT_LOGS, f"contention-{target.key}-{churn=}-{stamp}")
    kept.mkdir(parents=True, exist_ok=True)
    if log.exists():
        shutil.copy2(log, kept / "server.log")
    (kept / "failure.txt").write_text(f"{failure}\n", encoding="utf-8")
    return kept / "server.log"


def show_failure(run: Run, kept: Path, console: Console) -> None:
    """Print why a run stopped and the kept server log's warnings, errors and last lines."""
    console.print(f"  [red]FAILED[/red]: {run.failure}", markup=True, highlight=False)
    console.print(f"  server log kept: {kept}", highlight=False)
    lines = kept.read_text(errors="replace").splitlines() if kept.exists() else []
    noteworthy = [line for line in lines[:-TAIL_LINES] if _NOTEWORTHY.search(line)]
    for line in [*noteworthy, *lines[-TAIL_LINES:]]:
        console.print(f"  | {line}", markup=False, highlight=False)


async def section(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    """The contention table over ``targets``, with and without churn."""
    writers, admissions = SIZES.get(sizes.name, SIZES["quick"])
    table = Table(f"Contention: {writers} writers over HTTP, {admissions} admissions", COLUMNS)
    failures: list[str] = []
    for target in targets:
        for churn in (False, True):
            row, failed = await one_run(target, writers, admissions, churn, console)
            table.add(*row)
            failures += [failed] if failed else []
    table.notes.append(
        "writes: every answered placement, release, claim create/delete and reconcile request; "
        "lock waits: sessions seen waiting for a lock, sampled every 50 ms"
    )
    s = Section("contention", "Contention (issue 45)", intro=__doc__.split("\n\n", 1)[1].strip())
    s.tables.append(table)
    s.findings += failures
    if any(
        row[COLUMNS.index("lost")] not in ("0", "n/a")
        or row[COLUMNS.index("doubled")] not in ("0", "n/a")
        for row in table.rows
    ):
        s.findings.append("FAILED: a placement was lost or doubled under contention")
    return s
