"""Reconcile: one pass of the capacity reconciler over a large, busy ledger, per backend.

The ledger is seeded with bulk INSERTs (nodes, then placements spread over them with admission
times over the last 20 minutes, so the demand decay has rows to read), every counter set to
match, and a few counters then knocked off so the pass has real drift to find and repair. Each
pass is ``SqlLedger.reconcile()``, exactly what ``fleetgate reconciler`` runs; beside its wall
time the table shows the benchmark process's CPU time in it, the client's share of the pass
(the rest is the database server and waiting, both moved by whatever else the machine runs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa
from rich.console import Console

from benchmarks.invariants import Check, check
from benchmarks.report import Table, ms
from benchmarks.seed import open_ledger, seed_nodes, seed_placements
from benchmarks.sizes import Sizes
from benchmarks.targets import Target, fresh_database
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import nodes

DRIFTED = 25


@dataclass
class PassTiming:
    """The passes of one backend."""

    backend: str
    nodes: int
    placements: int
    seconds: list[float]
    cpu_seconds: list[float]
    drifted_first: int
    drifted_second: int
    check: Check

    @property
    def best(self) -> float:
        """The fastest pass."""
        return min(self.seconds)

    @property
    def best_cpu(self) -> float:
        """The benchmark process's CPU time in its least costly pass (the client's share)."""
        return min(self.cpu_seconds)


async def _knock(ledger: SqlLedger, names: list[str]) -> None:
    """Add drift to a few nodes' counters (what a bug or a manual edit would leave)."""
    async with ledger.store.engine.begin() as conn:
        await conn.execute(
            sa.update(nodes)
            .where(nodes.c.name.in_(names[:DRIFTED]))
            .values(used_cpus=nodes.c.used_cpus + 1)
        )


async def run_target(target: Target, sizes: Sizes, console: Console) -> PassTiming:
    """Seed, then time ``sizes.reconcile_passes`` passes (the first repairs the drift)."""
    async with fresh_database(target) as url, open_ledger(target, url) as ledger:
        with console.status(
            f"{target.label}: seeding {sizes.reconcile_nodes:,} nodes and "
            f"{sizes.reconcile_placements:,} placements"
        ):
            names = await seed_nodes(ledger, sizes.reconcile_nodes)
            await seed_placements(ledger, names, sizes.reconcile_placements)
            await _knock(ledger, names)
        seconds, cpu_seconds, drifted = [], [], []
        for i in range(max(2, sizes.reconcile_passes)):
            with console.status(f"{target.label}: reconcile pass {i + 1}"):
                began, cpu = time.perf_counter(), time.process_time()
                report = await ledger.reconcile()
                seconds.append(time.perf_counter() - began)
                cpu_seconds.append(time.process_time() - cpu)
            drifted.append(report.summary.drifted_nodes)
        result = PassTiming(
            target.label,
            sizes.reconcile_nodes,
            sizes.reconcile_placements,
            seconds,
            cpu_seconds,
            drifted[0],
            drifted[1],
            await check(ledger),
        )
    console.print(
        f"  {target.label}: reconcile pass best {ms(result.best)} ms "
        f"(client CPU {ms(result.best_cpu)} ms), "
        f"drifted nodes {result.drifted_first} then {result.drifted_second}, "
        f"check {result.check.summary()}"
    )
    return result


def table(timings: list[PassTiming]) -> Table:
    """One row per backend."""
    t = Table(
        "Reconcile: one pass (lock, recompute, write, commit)",
        [
            "backend",
            "nodes",
            "placements",
            "passes",
            "best ms",
            "worst ms",
            "client CPU ms (least)",
            "drifted nodes found (1st pass; 2nd)",
            "over-commit check",
        ],
    )
    for r in timings:
        t.add(
            r.backend,
            f"{r.nodes:,}",
            f"{r.placements:,}",
            len(r.seconds),
            ms(r.best),
            ms(max(r.seconds)),
            ms(r.best_cpu),
            f"{r.drifted_first} (seeded {DRIFTED}); {r.drifted_second}",
            r.check.summary(),
        )
    return t
