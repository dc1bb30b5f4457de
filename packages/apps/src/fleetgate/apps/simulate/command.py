"""``fleetgate simulate``: read the inputs, run the simulation, print it, write the report.

Exit codes: 0 no fatal finding or diagnostic, 1 at least one (a node outlived its expireAfter,
the environment cannot meet readyTimeout, a fatal policy finding, a run cut short), 2 invalid
input. The severity column and the exit status always agree. The JSON output is
byte-identical for identical inputs (sorted keys, fixed separators).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from fleetgate.apps.client.output import dump_yaml
from fleetgate.apps.heap import settle_heap
from fleetgate.apps.policyfile import PolicyFileError, load_policy
from fleetgate.apps.redaction import error_markup
from fleetgate.apps.services.simulation import SimulationError, SimulationInputs, SimulationResult
from fleetgate.apps.simulate.fleet import FleetError, load_fleet, parse_instant
from fleetgate.apps.simulate.report import headline, render_html
from fleetgate.apps.simulate.world import simulator as make_simulator
from fleetgate.apps.yamlfile import YamlFileError, read_yaml
from fleetgate.domain.durations import parse_duration
from fleetgate.domain.rotation.constants import FIRST_YEAR, LAST_YEAR

_err = Console(stderr=True)


def _fail(message: str) -> int:
    _err.print(error_markup(message), highlight=False, soft_wrap=True)  # one line, never wrapped
    return 2


def _simulated_instant(value: str, option: str) -> datetime:
    """``value`` as an instant a simulation can start or end at: in the years the API takes."""
    at = parse_instant(value, option)
    try:
        year = at.astimezone(UTC).year
    except OverflowError:  # an offset that takes the year 1 or 9999 off the calendar
        year = at.year
    if not FIRST_YEAR <= year <= LAST_YEAR:
        raise FleetError(f"{option}: must be in the years {FIRST_YEAR} to {LAST_YEAR} (UTC)")
    return at


def build_inputs(
    policy: Path,
    fleet: Path,
    start: str,
    end: str,
    env_provisioning: str | None,
    env_drain: str | None,
) -> SimulationInputs:
    """Read and check every input; raises ValueError naming the bad one."""
    begin = _simulated_instant(start, "--from")
    finish = _simulated_instant(end, "--to")
    try:
        document = read_yaml(fleet)
    except YamlFileError as exc:  # one line: cannot read, or where the YAML is broken
        raise FleetError(f"--fleet {fleet}: {exc}") from None
    durations: dict[str, timedelta | None] = {}
    for flag, value in (("--env-provisioning", env_provisioning), ("--env-drain", env_drain)):
        if value is None:
            durations[flag] = None
            continue
        try:
            parsed = parse_duration(value)
        except ValueError as exc:
            raise FleetError(f"{flag}: {exc}") from exc
        if parsed < timedelta(0):
            raise FleetError(f"{flag}: must not be negative")
        durations[flag] = parsed
    return SimulationInputs(
        policy=load_policy(policy),
        fleet=load_fleet(document, begin),
        start=begin,
        end=finish,
        env_provisioning=durations["--env-provisioning"],
        env_drain=durations["--env-drain"],
    )


def to_json(doc: dict[str, Any]) -> str:
    """The canonical JSON text of a simulation document."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def print_table(result: SimulationResult, console: Console) -> None:
    """The human summary: derivation, outcome, diagnostics and the notable events."""
    doc = result.document()
    r, s = doc["result"], doc["summary"]
    head = Table(title="Derivation", show_header=False)
    for label, value in [
        ("A (age threshold)", r["ageThreshold"]),
        ("t_rot", r["tRot"]),
        ("t_rot_est", r["tRotEst"]),
        ("G (chances)", r["guaranteedChances"]),
        ("C (per window)", r["throughputCapacity"]),
        ("P", r["inputs"]["p"]),
        ("env provisioning", doc["env"]["provisioning"]),
        ("env drain", doc["env"]["drain"]),
    ]:
        head.add_row(label, str(value))
    console.print(head)
    outcome = Table(
        title=f"Simulated {doc['simulatedFrom']} → {doc['simulatedThrough']}"
        + (" (partial)" if doc["partial"] else ""),
        show_header=False,
    )
    for key in (
        "nodes",
        "rotations",
        "succeeded",
        "failed",
        "surgeless",
        "breaches",
        "controllerPasses",
    ):
        outcome.add_row(key, str(s[key]))
    console.print(outcome)
    notes = [*r["findings"], *doc["diagnostics"]]
    if notes:
        diag = Table(title="Findings and diagnostics")
        diag.add_column("severity")
        diag.add_column("code")
        diag.add_column("message")
        for n in notes:
            diag.add_row(n["severity"], n["code"], n["message"])
        console.print(diag)
    shown = [
        e
        for e in doc["events"]
        if e["type"]
        in (
            "expire-after-breach",
            "rotation-failed",
            "estimate-disagrees",
            "rotation-expired",
            "pool-finding",
        )
    ]
    if shown:
        events = Table(title="Notable events")
        events.add_column("at")
        events.add_column("event")
        events.add_column("detail")
        for e in shown[:50]:
            detail = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("at", "type"))
            events.add_row(e["at"], e["type"], detail)
        console.print(events)
    colour = "green" if s["breaches"] == 0 else "red"
    console.print(f"[{colour}]{headline(s)}[/{colour}]")


def run_simulate(
    policy: Path,
    fleet: Path,
    start: str,
    end: str,
    env_provisioning: str | None,
    env_drain: str | None,
    fmt: str,
    report: Path | None,
) -> int:
    """Entry point of ``fleetgate simulate`` (see the module docstring for exit codes)."""
    try:
        inputs = build_inputs(policy, fleet, start, end, env_provisioning, env_drain)
    except (FleetError, PolicyFileError) as exc:
        return _fail(str(exc))
    try:
        result = _run_with_progress(inputs)
    except SimulationError as exc:
        return _fail(str(exc))
    if fmt == "json":
        sys.stdout.write(to_json(result.document()))
    elif fmt == "yaml":
        sys.stdout.write(dump_yaml(result.document()) + "\n")
    elif fmt == "name":  # the finding and diagnostic codes, one a line
        sys.stdout.writelines(f"{code}\n" for code in result.codes)
    else:  # table and wide: one report either way
        print_table(result, Console())
    if report is not None:
        report.write_text(render_html(result.document()), encoding="utf-8")
        _err.print(f"report written to {report}", highlight=False)
    return 1 if result.fatal else 0


def _run_with_progress(inputs: SimulationInputs) -> SimulationResult:
    """The simulation, with a progress bar on a terminal; no wall-clock bound (Ctrl-C stops it)."""
    simulator = make_simulator()
    # The process's start-up and the inputs live until it ends: out of the collector's way
    # while the run steps the controller some ten thousand times a simulated month.
    settle_heap()
    if not _err.is_terminal:
        return asyncio.run(simulator.run_bounded(inputs))
    total = (inputs.end - inputs.start).total_seconds()
    columns = (
        TextColumn("simulating"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=_err, transient=True) as bar:
        task = bar.add_task("", total=total)

        def advance(instant: datetime) -> None:
            bar.update(
                task,
                completed=(instant - inputs.start).total_seconds(),
                description=instant.strftime("%Y-%m-%d"),
            )

        return asyncio.run(simulator.run_bounded(inputs, progress=advance))
