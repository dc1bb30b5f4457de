"""``python -m benchmarks [--quick] [--only NAME ...] [--backend KEY ...] [--output PATH]``.

A full run (no ``--quick``, ``--only`` or ``--backend``) rewrites ``docs/performance.md``; any
narrower run writes ``.fleetgate/bench/performance.md`` unless ``--output`` says otherwise. Exits
1 when the reliability evidence is not clean (an over-commit, a lost or doubled placement, a
partial state), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog
from rich.console import Console

from benchmarks import document, machine, runner, wrk
from benchmarks.sizes import PROFILES
from benchmarks.targets import all_targets, reachable, server_version

ROOT = Path(__file__).resolve().parent.parent
FULL_OUTPUT = ROOT / "docs" / "performance.md"
PARTIAL_OUTPUT = ROOT / ".fleetgate" / "bench" / "performance.md"


def _split(values: Sequence[str] | None) -> list[str]:
    return [v for value in values or () for v in value.split(",") if v]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line."""
    keys = [t.key for t in all_targets()]
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a small smoke run (minutes, not tens)")
    p.add_argument("--profile", choices=sorted(PROFILES), help="sizes by name (overrides --quick)")
    p.add_argument(
        "--only", action="append", metavar="NAME", help=f"run only these: {', '.join(runner.NAMES)}"
    )
    p.add_argument("--backend", action="append", metavar="KEY", help=f"only: {', '.join(keys)}")
    p.add_argument("--output", type=Path, help="where to write the Markdown report")
    p.add_argument(
        "--into",
        type=Path,
        help="merge a narrower run into this report (docs/performance.md): its sections, "
        "target rows and wall times replace those it measured, the rest keep their commits",
    )
    args = p.parse_args(argv)
    args.only = _split(args.only) or list(runner.NAMES)
    args.backend = _split(args.backend) or keys
    for name in args.only:
        if name not in runner.NAMES:
            p.error(f"--only: unknown benchmark {name!r} (choose from {', '.join(runner.NAMES)})")
    for key in args.backend:
        if key not in keys:
            p.error(f"--backend: unknown backend {key!r} (choose from {', '.join(keys)})")
    args.profile = args.profile or ("quick" if args.quick else "full")
    if args.output is None:
        narrow = args.profile != "full" or args.only != list(runner.NAMES) or args.backend != keys
        args.output = PARTIAL_OUTPUT if narrow else FULL_OUTPUT
    return args


def _quiet() -> None:
    """The controller and the services log every decision; a benchmark wants only warnings."""
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


async def main(argv: Sequence[str]) -> int:
    """Run, print, write; the exit code says whether the reliability evidence is clean."""
    args = parse(argv)
    console = Console()
    if "http" in args.only:
        try:
            wrk.require()
        except RuntimeError as exc:
            console.print(f"[red]{exc}[/red] (or leave it out: --only with the others)")
            return 2
    sizes = PROFILES[args.profile]
    targets, versions = [], {}
    for target in all_targets():
        if target.key not in args.backend:
            continue
        why = await reachable(target)
        if why is not None:
            console.print(f"[yellow]skipping {target.label}: {why}[/yellow]")
            continue
        targets.append(target)
        versions[target.label] = await server_version(target)
    facts = machine.describe(versions)
    facts["profile"] = args.profile
    machine.table(facts).show(console)
    outcome = await runner.run(args.only, targets, sizes, console)
    shown = " ".join(argv)
    text = document.render(
        facts, outcome.sections, f" {shown}" if shown else "", outcome.clean, machine.load_average()
    )
    document.write(args.output, text)
    console.print(f"wrote {args.output}")
    if args.into is not None:
        merged = document.merge(args.into.read_text(encoding="utf-8"), text)
        document.write(args.into, merged)
        console.print(f"merged into {args.into}")
    if not outcome.clean:
        console.print("[red]reliability evidence is NOT clean[/red]")
        return 1
    return 0


def cli() -> int:
    """The command: quiet logging, then :func:`main`."""
    _quiet()
    return asyncio.run(main(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(cli())
