"""pgbench, PostgreSQL's own client, running the ledger's own statements: a second ceiling.

The replayed ceiling (``admission.ceiling_cell``) sends the captured statements through asyncpg
from Python; pgbench sends them from C, so it shows what the database itself sustains for the
same work. Two scripts are captured from the real ledger, one admission per transaction: the
in-process path's statements (the five of the canonical order, ``one_call`` off) and the
PostgreSQL function's one call. Beside them, the ledger itself on both paths, on the same
database, reset between runs. ``python -m benchmarks.pgbench [--seconds S] [--writers 1 8 32]``
prints one Markdown table on its own; the full report runs :func:`ceilings` (pgbench alone,
on a database of its own) and sets it beside the admission section's ledger cells.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import make_url

from benchmarks import group_commit
from benchmarks.admission import ledger_cell
from benchmarks.capture import Script, Slot, capture_admission
from benchmarks.machine import load_average
from benchmarks.seed import open_ledger, reset, seed_nodes
from benchmarks.targets import DEFAULT_POSTGRES, Target, fresh_database

PGBENCH_PATHS = ("/usr/lib/postgresql/15/bin/pgbench",)
_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)


def pgbench() -> str:
    """The pgbench binary: on PATH, or PostgreSQL 15's."""
    found = shutil.which("pgbench") or next((p for p in PGBENCH_PATHS if Path(p).exists()), None)
    if found is None:
        raise SystemExit("pgbench not found (Debian: postgresql-client)")
    return found


def _literal(value: Any, fleet: int) -> str:
    width = max(5, len(str(fleet)))
    if isinstance(value, Slot):
        return {
            "node": f"('node-' || lpad(:i::text, {width}, '0'))",
            "namespace": "'bench'",
            "placement_id": "gen_random_uuid()::text",
            "now": "extract(epoch from clock_timestamp())::float8",
        }[value.name]
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def script_text(script: Script, fleet: int) -> str:
    """``script`` as a pgbench script: a random node per transaction, the values inlined."""
    lines = [f"\\set i random(0, {fleet - 1})", "BEGIN;"]
    for statement in script.statements:
        sql = statement.sql
        if sql.strip().upper() in {"BEGIN", "COMMIT"}:
            continue
        # $10 before $1, so a longer placeholder is never cut by a shorter one.
        for n in sorted(range(1, len(statement.params) + 1), reverse=True):
            sql = sql.replace(f"${n}", _literal(statement.params[n - 1], fleet))
        lines.append(" ".join(sql.split()) + ";")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def run_pgbench(url: str, text: str, writers: int, seconds: float) -> float:
    """Transactions per second of ``text`` on ``writers`` clients for ``seconds``."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(text)
    try:
        done = subprocess.run(
            [pgbench(), "-n", "-f", f.name, "-c", str(writers), "-j", str(min(writers, 2)),
             "-T", str(int(seconds)), dsn],
            capture_output=True, text=True, timeout=seconds + 120, check=False,
        )  # fmt: skip
    finally:
        os.unlink(f.name)
    found = _TPS.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"pgbench failed: {done.stderr.strip()[-500:]}")
    return float(found.group(1))


def available() -> str | None:
    """None when pgbench can run here, else why not."""
    try:
        pgbench()
    except SystemExit as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class PgbenchCell:
    """pgbench's rate for one script at one writer count (one admission per transaction)."""

    fleet: int
    writers: int
    script: str  # "statements" | "function"
    tps: float


async def ceilings(
    target: Target, fleet: int, writers: Sequence[int], seconds: float
) -> list[PgbenchCell]:
    """pgbench on both captured scripts at every writer count, on a freshly seeded database.

    The function script is measured only when the ledger admits through the function (else it
    would be the statements again). The database is reset before every run.
    """
    cells = []
    off = group_commit.SETTINGS["off"]
    async with (
        fresh_database(target) as url,
        open_ledger(target, url, pool_size=2, group_commit=off) as ledger,
    ):
        names = await seed_nodes(ledger, fleet)
        scripts = {"statements": await capture_admission(target, url, names[0], one_call=False)}
        if ledger.one_call:
            await reset(ledger)  # the captures admit the same placement id
            scripts["function"] = await capture_admission(target, url, names[0])
        for w in writers:
            for name, script in scripts.items():
                await reset(ledger)
                tps = await asyncio.to_thread(
                    run_pgbench, url, script_text(script, fleet), w, seconds
                )
                cells.append(PgbenchCell(fleet, w, name, tps))
    return cells


async def measure(writers: Sequence[int], seconds: float, fleet: int) -> list[str]:
    """The table's rows: per writer count, pgbench on both scripts, the ledger on both paths."""
    server = os.environ.get("FLEETGATE_POSTGRES_URL", DEFAULT_POSTGRES)
    target = Target("postgres", "PostgreSQL", "postgres", server)
    off = group_commit.SETTINGS["off"]  # this table compares one admission per transaction
    rows = []
    async with (
        fresh_database(target) as url,
        open_ledger(target, url, pool_size=max(writers), group_commit=off) as ledger,
    ):
        names = await seed_nodes(ledger, fleet)
        function_script = await capture_admission(target, url, names[0])
        await reset(ledger)  # the captures admit the same placement id
        statements_script = await capture_admission(target, url, names[0], one_call=False)
        for w in writers:
            cells = []
            for script in (statements_script, function_script):
                await reset(ledger)
                cells.append(run_pgbench(url, script_text(script, fleet), w, seconds))
            for one_call in (False, True):
                await reset(ledger)
                ledger.one_call = one_call
                ops = int(max(200, min(20_000, cells[1] * seconds)))
                load = await ledger_cell(ledger, names, w, ops, seconds * 2)
                cells.append(load.throughput)
            rows.append(
                f"| {w} | {cells[0]:,.0f} | {cells[1]:,.0f} | {cells[2]:,.0f} "
                f"({cells[2] / cells[0]:.2f}x) | {cells[3]:,.0f} ({cells[3] / cells[0]:.2f}x) |"
            )
    return rows


def main() -> None:
    """Print the pgbench-beside-the-ledger table (PostgreSQL only)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--fleet", type=int, default=100)
    args = parser.parse_args()
    started = time.time()
    rows = asyncio.run(measure(args.writers, args.seconds, args.fleet))
    print(
        f"{args.fleet} nodes, {args.seconds:.0f} s per pgbench cell; load average at the end "
        f"{load_average()}; {time.time() - started:.0f} s in all\n"
    )
    print(
        "| writers | pgbench, the ledger's statements (tps) | pgbench, the function call (tps) "
        "| ledger in-process (adm/s, x statements) | ledger, function (adm/s, x statements) |"
    )
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
