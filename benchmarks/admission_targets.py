"""Issue 18's admission targets, judged from one run's cells, each miss with what bounds it.

The ledger judged is the one a deployment runs: group commit on (its default) when this build
has it, else the one-admission-per-transaction ledger, and the verdict says which. A target
whose cells were not measured (a profile without that writer count, no pgbench) is "not
measured", with the reason, never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.admission import Cell, find
from benchmarks.group_commit import share
from benchmarks.pgbench import PgbenchCell
from benchmarks.report import Verdict, rate

POSTGRES = "PostgreSQL"
SQLITE = "SQLite"
#: At 1 writer the ledger against pgbench's statements; at 8 and 32 past them.
ONE_WRITER_SHARE = 0.8
BUSY_WRITERS = (8, 32)
BUSY_ADMISSIONS = 1000.0
BUSY_SHARE = 1.5
#: SQLite with group commit on against off, at this many writers.
SQLITE_WRITERS = 8
SQLITE_GAIN = 3.0
#: A client process this busy (share of one core) is what bounds the cell.
CLIENT_BOUND = 0.85


def shipped(cells: Sequence[Cell], backend: str, fleet: int, writers: int) -> Cell | None:
    """The ledger cell as deployed: group commit on if measured, else off."""
    on = find(list(cells), backend, fleet, writers, "ledger", "on")
    return on if on is not None else find(list(cells), backend, fleet, writers, "ledger", "off")


def _which(cell: Cell) -> str:
    return "group commit on" if cell.group_commit == "on" else "group commit not in this build"


def bound(cell: Cell) -> str:
    """What bounds a cell, with the figures that show it: the client's core, and the batches."""
    load = cell.load
    core = load.cpu_ms_per_op * load.throughput / 1000.0
    cpu = f"{load.cpu_ms_per_op:.2f} ms client CPU/adm x {rate(load.throughput)}/s = {core:.0%}"
    if core >= CLIENT_BOUND:
        parts = [f"bound by the benchmark's one client process: {cpu} of its core"]
    else:
        parts = [f"the client is not the bound ({cpu} of a core): the database side is"]
    if cell.batching is None:
        parts.append("group commit off: one transaction per admission")
    else:
        b = cell.batching
        parts.append(f"mean batch {b.mean_batch:.1f}, {share(b, load.ops):.0%} batched")
    return "; ".join(parts)


def _statements(pg: Sequence[PgbenchCell], fleet: int, writers: int) -> float | None:
    for c in pg:
        if (c.fleet, c.writers, c.script) == (fleet, writers, "statements"):
            return c.tps
    return None


def postgres(
    cells: Sequence[Cell], pg: Sequence[PgbenchCell], fleet: int, pgbench_missing: str | None
) -> list[Verdict]:
    """The ledger against pgbench: >= 0.8x at 1 writer; >= 1,000/s and >= 1.5x at 8 and 32."""
    out = []
    asks = [(1, f">= {ONE_WRITER_SHARE} x pgbench")] + [
        (w, f">= {BUSY_ADMISSIONS:,.0f} adm/s and >= {BUSY_SHARE} x pgbench") for w in BUSY_WRITERS
    ]
    for writers, ask in asks:
        target = (
            f"PostgreSQL ledger {ask} (the ledger's statements, one admission per transaction) "
            f"at {writers} writer(s), {fleet:,} nodes"
        )
        cell = shipped(cells, POSTGRES, fleet, writers)
        tps = _statements(pg, fleet, writers)
        if cell is None or tps is None or tps <= 0:
            why = pgbench_missing or f"no {writers}-writer cell in this run"
            out.append(Verdict(target, "-", None, why))
            continue
        share = cell.load.throughput / tps
        if writers == 1:
            met = share >= ONE_WRITER_SHARE
        else:
            met = cell.load.throughput >= BUSY_ADMISSIONS and share >= BUSY_SHARE
        measured = f"{rate(cell.load.throughput)}/s ({_which(cell)}) = {share:.2f}x {rate(tps)} tps"
        out.append(Verdict(target, measured, met, "" if met else bound(cell)))
    return out


def sqlite(cells: Sequence[Cell], fleet: int) -> Verdict:
    """SQLite with group commit >= 3x the same run's ledger without it, at 8 writers."""
    target = (
        f"SQLite ledger >= {SQLITE_GAIN:.0f} x its rate at {SQLITE_WRITERS} writers "
        f"({fleet:,} nodes; the baseline is the same run's ledger with group commit off)"
    )
    off = find(list(cells), SQLITE, fleet, SQLITE_WRITERS, "ledger", "off")
    on = find(list(cells), SQLITE, fleet, SQLITE_WRITERS, "ledger", "on")
    if off is None or on is None or off.load.throughput <= 0:
        why = (
            "group commit not in this build"
            if off is not None
            else f"no {SQLITE_WRITERS}-writer SQLite cell in this run"
        )
        return Verdict(target, "-", None, why)
    gain = on.load.throughput / off.load.throughput
    measured = f"on {rate(on.load.throughput)}/s vs off {rate(off.load.throughput)}/s = {gain:.2f}x"
    met = gain >= SQLITE_GAIN
    return Verdict(target, measured, met, "" if met else bound(on))
