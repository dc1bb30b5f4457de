"""Reliability soak: concurrent admissions and releases, the invariants checked while it runs.

Workers admit random sizes onto a small fleet that fills up (so guards refuse under contention,
which is where an over-commit would show) and release what they hold. One namespace has an
advisory claim smaller than what it uses, so the claim branch and the overage accounting are
exercised too. Every admission carries a request id, so an admission that failed with
``LedgerUnavailable`` is retried idempotently. The client keeps its own book of what it holds:
at the end a placement it holds but the database lacks is *lost*, and a row it does not hold
(or two rows for one request) is *doubled*.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import sqlalchemy as sa
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from benchmarks.invariants import Check, check
from benchmarks.report import Table, rate
from benchmarks.seed import open_ledger
from benchmarks.sizes import PROFILES, Sizes
from benchmarks.targets import Target, all_targets, fresh_database
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import placements
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.errors import LedgerUnavailable
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec

NODES = 24
NODE = Capacity(threads=8, memory_mb=32768, disk_gb=400)
NAMESPACES = ("alpha", "beta", "claimed")
CLAIM = Resources(cpus=40, memory_mb=131072, disk_gb=1600)
RETRIES = 5


@dataclass
class SoakResult:
    """What one backend's soak did and found."""

    backend: str
    ops: int = 0
    admitted: int = 0
    refused: int = 0
    released: int = 0
    retried: int = 0
    seconds: float = 0.0
    checks: int = 0
    over_commits: int = 0
    drift: int = 0
    lost: int = 0
    doubled: int = 0
    unresolved: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No over-commit, no drift, nothing lost or doubled, and the soak ran to the end."""
        return not (
            self.over_commits or self.drift or self.lost or self.doubled or self.unresolved < 0
        )


def _size(rng: random.Random) -> Resources:
    return Resources(rng.randint(1, 4), rng.choice((512, 1024, 2048, 4096)), rng.randint(5, 40))


class Soaker:
    """The workers, their books, and the running checks."""

    def __init__(self, ledger: SqlLedger, names: list[str], result: SoakResult) -> None:
        self.ledger = ledger
        self.names = names
        self.result = result
        self.held: dict[str, str] = {}  # placement id -> request id
        self.requests = 0
        self.stop = False

    async def admit(self, rng: random.Random, worker: int) -> None:
        self.requests += 1
        request = AdmitRequest(
            rng.choice(NAMESPACES),
            rng.choice(self.names),
            _size(rng),
            demand=0.6,
            target_load=0.75,
            request_id=f"w{worker}-r{self.requests}",
        )
        for attempt in range(RETRIES):
            try:
                admission = await self.ledger.admit(request)
            except LedgerUnavailable:
                self.result.retried += 1
                await asyncio.sleep(0.01 * (attempt + 1))
                continue
            if admission.placement is not None:
                if admission.placement.id in self.held:
                    self.result.doubled += 1  # a second admission answered for the same request
                self.held[admission.placement.id] = request.request_id or ""
                self.result.admitted += 1
            else:
                self.result.refused += 1
            return
        self.result.unresolved += 1  # resolved against the database at the end

    async def release(self, rng: random.Random) -> None:
        placement_id = rng.choice(list(self.held))
        request_id = self.held.pop(placement_id)
        errored = False
        for attempt in range(RETRIES):
            try:
                outcome = await self.ledger.release(placement_id)
            except LedgerUnavailable:
                errored = True
                self.result.retried += 1
                await asyncio.sleep(0.01 * (attempt + 1))
                continue
            if outcome.released or errored:  # after an error, "already gone" is our own release
                self.result.released += 1
            else:
                self.result.lost += 1
                self.result.notes.append(f"{placement_id} ({request_id}) vanished before release")
            return
        self.held[placement_id] = request_id
        self.result.unresolved += 1

    async def worker(self, w: int, ops: int, progress: Progress, task: TaskID) -> None:
        rng = random.Random(w * 7919)
        while not self.stop and self.result.ops < ops:
            self.result.ops += 1
            if self.held and rng.random() < 0.4:
                await self.release(rng)
            else:
                await self.admit(rng, w)
            progress.advance(task)

    async def checker(self, every: float) -> None:
        while not self.stop:
            await asyncio.sleep(every)
            await self.record(await check(self.ledger))

    async def record(self, found: Check) -> None:
        self.result.checks += 1
        self.result.over_commits += len(found.over_commits)
        self.result.drift += len(found.drift)
        self.result.notes += (found.over_commits + found.drift)[:5]

    async def reconcile_books(self) -> None:
        """Compare what the client holds with what the database holds."""
        async with self.ledger.store.engine.connect() as conn:
            rows = (await conn.execute(sa.select(placements.c.id, placements.c.request_id))).all()
        in_db = {pid: rid for pid, rid in rows}
        per_request: dict[str, int] = {}
        for rid in in_db.values():
            per_request[rid] = per_request.get(rid, 0) + 1
        self.result.doubled += sum(n - 1 for n in per_request.values() if n > 1)
        self.result.lost += sum(1 for pid in self.held if pid not in in_db)
        unknown = [pid for pid in in_db if pid not in self.held]
        # An admission whose every try failed may still have committed once: that is the one
        # placement a client that gave up must look up by its request id, not a double.
        self.result.doubled += max(0, len(unknown) - self.result.unresolved)


async def run_target(target: Target, sizes: Sizes, console: Console) -> SoakResult:
    """``sizes.soak_ops`` operations on ``sizes.soak_workers`` workers against one backend."""
    result = SoakResult(target.label)
    async with (
        fresh_database(target) as url,
        open_ledger(target, url, pool_size=sizes.soak_workers) as ledger,
    ):
        names = [f"soak-{i:02d}" for i in range(NODES)]
        for name in names:
            await ledger.add_node(NodeSpec(name, NODE, pool="soak"))
        outcome = await ledger.create_claim(ClaimRequest("claimed", CLAIM, 10 * 365 * 86400))
        if outcome.claim is None:
            result.notes.append(f"claim refused: {outcome}")
        soaker = Soaker(ledger, names, result)
        columns = (
            TextColumn(f"{target.label} soak"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("soak", total=sizes.soak_ops)
            checker = asyncio.create_task(soaker.checker(sizes.soak_check_every))
            began = time.perf_counter()
            await asyncio.gather(
                *(
                    soaker.worker(w, sizes.soak_ops, progress, task)
                    for w in range(sizes.soak_workers)
                )
            )
            result.seconds = time.perf_counter() - began
            soaker.stop = True
            checker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await checker
        await soaker.record(await check(ledger))
        await soaker.reconcile_books()
    console.print(
        f"  {target.label}: {result.ops:,} ops in {result.seconds:.1f} s, "
        f"{result.checks} checks, over-commits {result.over_commits}, drift {result.drift}, "
        f"lost {result.lost}, doubled {result.doubled}"
    )
    return result


def table(results: list[SoakResult]) -> Table:
    """One row per backend."""
    t = Table(
        "Reliability soak: concurrent admissions and releases, invariants checked throughout",
        [
            "backend",
            "operations",
            "ops/s",
            "admitted",
            "refused",
            "released",
            "retried after LedgerUnavailable",
            "invariant checks",
            "over-commits",
            "drifted counters",
            "lost",
            "doubled",
        ],
    )
    for r in results:
        t.add(
            r.backend,
            f"{r.ops:,}",
            rate(r.ops / r.seconds if r.seconds else 0.0),
            f"{r.admitted:,}",
            f"{r.refused:,}",
            f"{r.released:,}",
            r.retried,
            r.checks,
            r.over_commits,
            r.drift,
            r.lost,
            r.doubled,
        )
    return t


def _one(key: str, profile: str, out: str) -> None:
    """Soak one backend and write its result as JSON (a worker of :func:`run_parallel`)."""
    (target,) = [t for t in all_targets() if t.key == key]
    quiet = Console(stderr=True, quiet=True)
    result = asyncio.run(run_target(target, PROFILES[profile], quiet))
    Path(out).write_text(json.dumps(asdict(result)), encoding="utf-8")


async def run_parallel(
    targets: list[Target], profile: str, console: Console, width: int = 2
) -> list[SoakResult]:
    """Soak every backend, ``width`` at a time, each in a process of its own.

    One soak is bound by its client process (one core) and by its database's commit latency;
    backends soaking side by side overlap both, so 100,000 operations each fit in one run.
    """
    gate = asyncio.Semaphore(width)
    results: dict[str, SoakResult] = {}

    async def soak(target: Target, tmp: Path) -> None:
        out = tmp / f"{target.key}.json"
        async with gate:
            console.print(f"  {target.label}: soak started")
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "benchmarks.soak", target.key, profile, str(out)
            )
            if await process.wait() != 0 or not out.exists():
                result = SoakResult(target.label, notes=["the soak process failed"])
                result.unresolved = -1
            else:
                result = SoakResult(**json.loads(out.read_text(encoding="utf-8")))
            results[target.key] = result
            console.print(
                f"  {target.label}: {result.ops:,} ops in {result.seconds:.1f} s, "
                f"{result.checks} checks, over-commits {result.over_commits}, drift "
                f"{result.drift}, lost {result.lost}, doubled {result.doubled}"
            )

    with tempfile.TemporaryDirectory(prefix="fgbench-soak-") as tmp:
        await asyncio.gather(*(soak(t, Path(tmp)) for t in targets))
    return [results[t.key] for t in targets]


if __name__ == "__main__":
    _one(*sys.argv[1:4])
