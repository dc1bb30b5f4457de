"""Run the chosen benchmarks on the reachable backends and assemble the report's sections."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console

from benchmarks import (
    admission,
    admission_tables,
    admission_targets,
    faults,
    ha,
    http_wrk,
    kills,
    machine,
    pgbench,
    ranking,
    reconcile,
    rotation,
    soak,
    startup,
)
from benchmarks.invariants import Check
from benchmarks.report import Section, Table, Verdict, rate
from benchmarks.sizes import Sizes
from benchmarks.targets import Target

#: Every benchmark, in the order a full run does them.
NAMES = (
    "admission",
    "http",
    "ranking",
    "reconcile",
    "simulator",
    "tick",
    "faults",
    "soak",
    "startup",
    "ha",
)
HALF = 0.5
PG_ADMISSIONS = 1000.0
RECONCILE_SECONDS = 1.0


@dataclass
class Outcome:
    """Every section a run produced, and whether the reliability evidence is clean."""

    sections: list[Section] = field(default_factory=list)
    clean: bool = True


async def run(
    names: Sequence[str], targets: Sequence[Target], sizes: Sizes, console: Console
) -> Outcome:
    """Run ``names`` (in the canonical order) over ``targets``."""
    out = Outcome()
    # What each benchmark took, so the next change to the sizes is budgeted from a measurement.
    columns = ["benchmark", "wall s", "load average after (1/5/15 min)", "commit"]
    wall = Table(f"Wall time by benchmark ({sizes.name} profile)", columns)
    commit = machine.commit()
    began = time.perf_counter()
    for name in NAMES:
        if name not in names:
            continue
        console.rule(f"[bold]{name}")
        started = time.perf_counter()
        section = await _SECTIONS[name](targets, sizes, console)
        wall.add(name, f"{time.perf_counter() - started:.0f}", machine.load_average(), commit)
        for t in section.tables:
            t.show(console)
        out.sections.append(section)
    # A narrower run's total is its own row: merged into the full report, it keeps the full
    # run's total (``document.merge`` replaces rows by their first cell).
    ran = [name for name in NAMES if name in names]
    total = "all" if len(ran) == len(NAMES) else " + ".join(ran)
    wall.add(total, f"{time.perf_counter() - began:.0f}", machine.load_average(), commit)
    out.sections.append(Section("wall time", "Wall time", tables=[wall]))
    out.clean = not any(f.startswith("FAILED") for s in out.sections for f in s.findings)
    return out


async def _admission(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    cells: list[admission.Cell] = []
    loads: dict[str, str] = {}
    pg_cells: list[pgbench.PgbenchCell] = []
    missing = pgbench.available()
    postgres = [t for t in targets if t.kind == "postgres"]
    for target in targets:
        cells += await admission.run_target(target, sizes, console)
        loads[target.label] = machine.load_average()
        if target.kind == "postgres" and missing is None:
            # Right after the ledger's own cells, so both ceilings see the same machine.
            with console.status(f"{target.label}: pgbench"):
                pg_cells += await pgbench.ceilings(
                    target, sizes.scaling_fleet, sizes.writers, sizes.pgbench_seconds
                )
            loads[f"{target.label} (pgbench)"] = machine.load_average()
    s = Section("admission", "Admission: the ledger against the raw-driver ceiling")
    s.tables.append(admission_tables.ceiling_table(cells, loads))
    if postgres:
        s.tables.append(admission_tables.pgbench_table(pg_cells, cells, postgres[0].label, loads))
    s.tables.append(admission_tables.batching_table(cells, loads))
    s.tables.append(admission_tables.latency_table(cells, loads))
    growth = admission.cell_writers(sizes, sizes.scaling_fleet)
    s.tables.append(admission_tables.growth_table(cells, sizes.scaling_fleet, growth, loads))
    for target in targets:
        ratios = admission.ratio(cells, target.label)
        if ratios:
            s.verdicts.append(
                Verdict(
                    f"ledger (group commit off) >= 0.5 x ceiling on {target.label} (every cell)",
                    f"ratio {min(ratios):.2f} to {max(ratios):.2f}",
                    min(ratios) >= HALF,
                )
            )
    pg = [c for c in cells if c.backend == "PostgreSQL" and c.path == "ledger"]
    if pg:
        best = max(pg, key=lambda c: c.load.throughput)
        s.verdicts.append(
            Verdict(
                ">= 1,000 admissions/s on PostgreSQL (ledger)",
                f"best {rate(best.load.throughput)}/s ({best.fleet:,} nodes, "
                f"{best.writers} writers, group commit {best.group_commit})",
                best.load.throughput >= PG_ADMISSIONS,
            )
        )
    if postgres:
        s.verdicts += admission_targets.postgres(cells, pg_cells, sizes.scaling_fleet, missing)
    if any(t.kind == "sqlite" for t in targets):
        s.verdicts.append(admission_targets.sqlite(cells, sizes.scaling_fleet))
    _note_checks(s, [c.check for c in cells], "admission")
    return s


async def _http(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    # Driven by wrk on every backend (issue 30 item 4): a Python client cost as much CPU as
    # the server it measured.
    cells: list[http_wrk.WrkCell] = []
    for target in targets:
        cells += await http_wrk.run_target(target, sizes, console)
    s = Section("http", "Admission over HTTP")
    s.intro = http_wrk.INTRO
    s.tables.append(http_wrk.table(cells))
    s.verdicts += http_wrk.verdicts(cells)
    _note_checks(s, [c.check for c in cells], "HTTP")
    return s


async def _ranking(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    table, verdict = ranking.run(sizes)
    return Section("ranking", "Ranking", tables=[table], verdicts=[verdict])


async def _reconcile(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    timings = [await reconcile.run_target(t, sizes, console) for t in targets]
    s = Section("reconcile", "Reconcile", tables=[reconcile.table(timings)])
    for r in timings:
        if r.backend == "PostgreSQL":
            s.verdicts.append(
                Verdict(
                    f"reconcile pass < 1 s on PostgreSQL ({r.nodes:,} nodes, "
                    f"{r.placements:,} placements)",
                    f"best {r.best:.2f} s",
                    r.best < RECONCILE_SECONDS,
                )
            )
    _note_checks(s, [r.check for r in timings], "reconcile")
    return s


async def _simulator(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    with console.status("simulating"):
        tables, verdicts = await rotation.simulator(sizes)
    return Section("simulator", "Simulator", tables=tables, verdicts=verdicts)


async def _tick(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    with console.status("controller ticks"):
        table, verdict = await rotation.tick(sizes)
    return Section("tick", "Controller tick", tables=[table], verdicts=[verdict])


async def _faults(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    results = [await faults.run_target(t, console) for t in targets]
    under_load = [await kills.run_target(t, console, tiny=sizes.name == "tiny") for t in targets]
    s = Section("faults", "Reliability: a connection killed at each statement, and under load")
    s.tables.append(faults.summary(results))
    s.tables.append(kills.table(under_load))
    s.tables += [faults.detail(r) for r in results]
    bad = [r.backend for r in results if r.partial or r.lost or r.doubled]
    if bad:
        s.findings.append(f"FAILED: partial, lost or doubled placements on {', '.join(bad)}")
    stalled = [r.backend for r in under_load if not r.clean]
    if stalled:
        s.findings.append(
            "FAILED: a request failed (after the last kill, or other than by a cut COMMIT), or "
            f"the audit events do not match the committed admissions, on {', '.join(stalled)}"
        )
    return s


async def _soak(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    if sizes.soak_parallel and len(targets) > 1:
        results = await soak.run_parallel(list(targets), sizes.name, console, width=len(targets))
    else:
        results = [await soak.run_target(t, sizes, console) for t in targets]
    s = Section("soak", "Reliability: concurrent admissions and releases")
    s.tables.append(soak.table(results))
    for r in results:
        if not r.clean:
            s.findings.append(
                f"FAILED: {r.backend}: over-commits {r.over_commits}, drift {r.drift}, "
                f"lost {r.lost}, doubled {r.doubled}: {'; '.join(r.notes[:5])}"
            )
    return s


async def _startup(targets: Sequence[Target], sizes: Sizes, console: Console) -> Section:
    with console.status("CLI start-up"):
        tables, verdicts = startup.run(sizes.startup_rounds)
    intro = (
        "Wall time of one command, warm, against a bare `python -c pass` in the same rounds, "
        "and where the import time goes. The install compiles bytecode (pyproject "
        "`compile-bytecode`; run.py compiles the workspace sources)."
    )
    return Section("startup", "CLI start-up", intro, tables=tables, verdicts=verdicts)


def _note_checks(section: Section, checks: list[Check], what: str) -> None:
    bad = [c for c in checks if not c.ok]
    if bad:
        section.findings.append(
            f"FAILED: over-commit check after {len(bad)} {what} run(s): "
            + "; ".join(c.summary() for c in bad[:3])
        )


_SECTIONS = {
    "ha": ha.section,
    "admission": _admission,
    "http": _http,
    "ranking": _ranking,
    "reconcile": _reconcile,
    "simulator": _simulator,
    "tick": _tick,
    "faults": _faults,
    "soak": _soak,
    "startup": _startup,
}
