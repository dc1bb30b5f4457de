"""The admission section's tables: ledger against the ceilings, group commit off against on.

Every table is built from the cells of one run, and says the load average each backend's cells
ended with (a shared machine moves every wall-clock figure).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from benchmarks import group_commit
from benchmarks.admission import Cell, find
from benchmarks.pgbench import PgbenchCell
from benchmarks.report import Table, ms, rate
from benchmarks.stats import Load


def _outcomes(load: Load) -> str:
    refused, errors = load.count("refused"), load.count("error")
    return "" if not (refused or errors) else f" ({refused} refused, {errors} errors)"


def _loads(table: Table, loads: Mapping[str, str]) -> Table:
    if loads:
        shown = "; ".join(f"{backend} {value}" for backend, value in loads.items())
        table.notes.append(f"Load average (1/5/15 min) when each backend's cells ended: {shown}.")
    return table


def _configs(cells: Sequence[Cell]) -> list[tuple[str, int, int]]:
    """Every (backend, fleet, writers) with a ledger cell, in the order measured."""
    seen: dict[tuple[str, int, int], None] = {}
    for c in cells:
        if c.path == "ledger":
            seen.setdefault((c.backend, c.fleet, c.writers), None)
    return list(seen)


def _off_and_on(
    cells: Sequence[Cell],
) -> Iterator[tuple[str, int, int, Cell | None, Cell | None]]:
    """Each configuration with its ledger cells, group commit off and on (None: not measured)."""
    for backend, fleet, writers in _configs(cells):
        off = find(list(cells), backend, fleet, writers, "ledger", "off")
        on = find(list(cells), backend, fleet, writers, "ledger", "on")
        yield backend, fleet, writers, off, on


def _rate(cell: Cell | None) -> str:
    return "-" if cell is None else rate(cell.load.throughput) + _outcomes(cell.load)


def _share(top: Cell | None, bottom: Cell | None) -> str:
    if top is None or bottom is None or bottom.load.throughput <= 0:
        return "-"
    return f"{top.load.throughput / bottom.load.throughput:.2f}"


def _p(cell: Cell | None, q: float) -> str:
    return "-" if cell is None else ms(cell.load.p(q) / 1000)


def ceiling_table(cells: Sequence[Cell], loads: Mapping[str, str]) -> Table:
    """The ledger (group commit off and on) beside the replayed ceiling, where one was run."""
    t = Table(
        "Admission at the ledger vs. the raw-driver ceiling",
        [
            "backend",
            "nodes",
            "writers",
            "ledger adm/s (group commit off)",
            "ledger adm/s (on)",
            "ceiling adm/s",
            "p50 ms",
            "p99 ms",
            "ledger/ceiling (off; on)",
            "client CPU ms/op (off; on; ceiling)",
            "over-commit check (off; on; ceiling)",
        ],
    )
    for backend, fleet, writers, off, on in _off_and_on(cells):
        ceiling = find(list(cells), backend, fleet, writers, "ceiling")
        if ceiling is None:
            continue
        measured = [c for c in (off, on, ceiling) if c is not None]
        t.add(
            backend,
            f"{fleet:,}",
            writers,
            _rate(off),
            _rate(on),
            _rate(ceiling),
            _p(ceiling, 0.5),
            _p(ceiling, 0.99),
            f"{_share(off, ceiling)}; {_share(on, ceiling)}",
            "; ".join(f"{c.load.cpu_ms_per_op:.2f}" for c in measured),
            "; ".join(f"{c.check.summary()} ({c.check.placements:,})" for c in measured),
        )
    t.notes.append(
        "The ceiling replays the statements of one admission with group commit off, captured "
        "from the ledger, through the bare driver: one admission per transaction. Group commit "
        "'-' means this build of the ledger has none (nothing was measured)."
    )
    return _loads(t, loads)


def batching_table(cells: Sequence[Cell], loads: Mapping[str, str]) -> Table:
    """Group commit off against on at every measured writer count, with what was batched."""
    t = Table(
        "Group commit: the ledger with it off and on, side by side",
        [
            "backend",
            "nodes",
            "writers",
            "off adm/s",
            "on adm/s",
            "on/off",
            "mean batch",
            "admissions batched",
            "largest batch",
            "solo admissions",
            "split batches",
            "over-commit check (off; on)",
        ],
    )
    for backend, fleet, writers, off, on in _off_and_on(cells):
        b = on.batching if on is not None else None
        checks = [c.check.summary() for c in (off, on) if c is not None]
        t.add(
            backend,
            f"{fleet:,}",
            writers,
            _rate(off),
            _rate(on),
            _share(on, off),
            "-" if b is None else f"{b.mean_batch:.1f}",
            "-" if b is None or on is None else f"{group_commit.share(b, on.load.ops):.0%}",
            "-" if b is None else b.largest_batch,
            "-" if b is None else f"{b.solo_admissions:,}",
            "-" if b is None else b.split_batches,
            "; ".join(checks),
        )
    t.notes.append(
        "Mean batch: batched admissions / batches; admissions batched: batched admissions / the "
        "cell's admit calls; both from SqlLedger.group_commit_stats() over the measured "
        "admissions (the largest batch includes the warm-up)."
    )
    return _loads(t, loads)


def latency_table(cells: Sequence[Cell], loads: Mapping[str, str]) -> Table:
    """What a batch adds: p50 and p99 with group commit on minus off, at the same writers."""
    t = Table(
        "Latency group commit adds (on minus off, same writers)",
        [
            "backend",
            "nodes",
            "writers",
            "off p50 ms",
            "off p99 ms",
            "on p50 ms",
            "on p99 ms",
            "p50 added ms",
            "p99 added ms",
        ],
    )
    for backend, fleet, writers, off, on in _off_and_on(cells):
        added = ["-", "-"]
        if off is not None and on is not None:
            added = [f"{on.load.p(q) - off.load.p(q):+.2f}" for q in (0.5, 0.99)]
        t.add(
            backend,
            f"{fleet:,}",
            writers,
            _p(off, 0.5),
            _p(off, 0.99),
            _p(on, 0.5),
            _p(on, 0.99),
            *added,
        )
    t.notes.append(
        "A negative figure: the batch's shared commit took less time than the queue it saved."
    )
    return _loads(t, loads)


def growth_table(
    cells: Sequence[Cell], fleet: int, writers: Sequence[int], loads: Mapping[str, str]
) -> Table:
    """Throughput against writers at one fleet size, group commit off and on, per backend."""
    t = Table(
        f"Throughput from {writers[0]} to {writers[-1]} writers ({fleet:,} nodes), adm/s",
        ["backend", "group commit", *(str(w) for w in writers)],
    )
    backends = list(dict.fromkeys(c.backend for c in cells if c.fleet == fleet))
    for backend in backends:
        row = {
            mode: [find(list(cells), backend, fleet, w, "ledger", mode) for w in writers]
            for mode in group_commit.MODES
        }
        for mode, found in row.items():
            t.add(backend, mode, *(_rate(c) for c in found))
        pairs = zip(row["off"], row["on"], strict=True)
        t.add(backend, "on/off", *(_share(on, off) for off, on in pairs))
    t.notes.append("No chart: matplotlib is not a dependency of the project.")
    return _loads(t, loads)


def pgbench_table(
    pg: Sequence[PgbenchCell], cells: Sequence[Cell], backend: str, loads: Mapping[str, str]
) -> Table:
    """pgbench's two scripts beside the replayed ceiling and the ledger, per writer count."""
    t = Table(
        "PostgreSQL: the ledger against pgbench (one admission per transaction)",
        [
            "nodes",
            "writers",
            "pgbench, the ledger's statements (tps)",
            "pgbench, the function call (tps)",
            "replayed ceiling adm/s",
            "ledger off adm/s (x statements)",
            "ledger on adm/s (x statements)",
        ],
    )
    for fleet, writers in dict.fromkeys((c.fleet, c.writers) for c in pg):
        tps = {c.script: c.tps for c in pg if (c.fleet, c.writers) == (fleet, writers)}
        base = tps.get("statements", 0.0)

        def against(cell: Cell | None, base: float = base) -> str:
            if cell is None:
                return "-"
            times = f" ({cell.load.throughput / base:.2f}x)" if base > 0 else ""
            return rate(cell.load.throughput) + times

        t.add(
            f"{fleet:,}",
            writers,
            rate(base) if "statements" in tps else "-",
            rate(tps["function"]) if "function" in tps else "-",
            _rate(find(list(cells), backend, fleet, writers, "ceiling")),
            against(find(list(cells), backend, fleet, writers, "ledger", "off")),
            against(find(list(cells), backend, fleet, writers, "ledger", "on")),
        )
    t.notes.append(
        "pgbench (PostgreSQL's own C client) runs the ledger's captured in-process statements "
        "and the function's one call, on a database of its own seeded alike, in the same run."
    )
    return _loads(t, loads)
