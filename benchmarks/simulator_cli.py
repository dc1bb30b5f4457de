"""The simulator as a user runs it: ``fleetgate simulate … -o json``, one process per run.

The issue's targets are through the CLI with JSON output (start-up, reading the inputs, the run,
the document and its 9 MB of JSON): each run is a fresh ``fleetgate`` process whose wall time,
CPU time and peak resident memory (``wait4``) are measured, its JSON read back for the counts.
A run past the cap is killed and reported as such: the verdict needs no more than that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from benchmarks.report import Table, Verdict

POLICY = """\
apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata:
  name: bench
spec:
  nodePoolSelector:
    matchLabels:
      fleetgate.io/rotate: "true"
  maintenanceWindows:
    - timezone: UTC
      days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun]
      start: "20:00"
      end: "04:00"
  surge:
    readyTimeout: 15m
    cooldownAfter: 1m
"""
"""``rotation.policy()`` as the manifest a user would write."""

START = datetime(2024, 1, 1, tzinfo=UTC)
LARGE_TARGET_SECONDS = 30.0
LARGE_TARGET_MB = 300.0
"""10,000 nodes over 90 days: wall seconds and peak resident memory (issue 44)."""


@dataclass(frozen=True)
class CliRun:
    """One ``fleetgate simulate`` process."""

    nodes: int
    days: int
    seconds: float
    cpu: float
    """User and system CPU seconds of the process."""
    peak_mb: float
    summary: dict[str, Any] | None
    """The document's summary (None: killed at the cap, or failed)."""
    output_mb: float


def _fleetgate() -> str:
    """The ``fleetgate`` console script of the environment running the benchmarks."""
    return str(Path(sys.executable).with_name("fleetgate"))


def run_cli(nodes: int, days: int, cap: float, fleet: dict[str, Any]) -> CliRun:
    """Run ``fleetgate simulate`` over ``fleet`` for ``days`` from 2024-01-01; kill it past
    ``cap`` seconds."""
    with tempfile.TemporaryDirectory(prefix="fleetgate-bench-sim-") as tmp:
        policy, fleet_file, out = Path(tmp, "policy.yaml"), Path(tmp, "fleet.yaml"), Path(tmp, "o")
        policy.write_text(POLICY, encoding="utf-8")
        fleet_file.write_text(yaml.safe_dump(fleet), encoding="utf-8")
        end = (START + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
        command = [
            _fleetgate(),
            "simulate",
            str(policy),
            "--fleet",
            str(fleet_file),
            "--from",
            "2024-01-01T00:00:00Z",
            "--to",
            end,
            "-o",
            "json",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
        with out.open("wb") as sink:
            began = time.perf_counter()
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL, env=env)
            killed = False
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - began > cap and not killed:
                    process.send_signal(signal.SIGKILL)
                    killed = True
                time.sleep(0.05)
            seconds = time.perf_counter() - began
        process.returncode = os.waitstatus_to_exitcode(status)
        summary = None
        if not killed and process.returncode in (0, 1):  # 1: the run found breaches
            summary = json.loads(out.read_text(encoding="utf-8"))["summary"]
        return CliRun(
            nodes,
            days,
            seconds,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024,
            summary,
            out.stat().st_size / 1e6,
        )


def table(runs: list[CliRun], cap: float) -> Table:
    """The runs as one table."""
    t = Table(
        "Simulator through the CLI: `fleetgate simulate … -o json`, one process a run",
        [
            "nodes",
            "days",
            "rotations",
            "breaches",
            "controller passes",
            "JSON MB",
            "CPU s",
            "peak MB",
            "wall s",
        ],
    )
    for run in runs:
        s = run.summary
        if s is None:
            t.add(
                f"{run.nodes:,}",
                run.days,
                "-",
                "-",
                "-",
                "-",
                f"{run.cpu:.1f}",
                f"{run.peak_mb:.0f}",
                f"> {cap:.0f} (stopped)",
            )
            continue
        t.add(
            f"{run.nodes:,}",
            run.days,
            f"{s['rotations']:,}",
            f"{s['breaches']:,}",
            f"{s['controllerPasses']:,}",
            f"{run.output_mb:.1f}",
            f"{run.cpu:.2f}",
            f"{run.peak_mb:.0f}",
            f"{run.seconds:.2f}",
        )
    t.notes.append(
        "Wall time includes the interpreter's start-up, the imports, reading the inputs, the run, "
        "the document and writing its JSON; CPU and peak memory are the process's own (wait4)."
    )
    return t


def verdicts(main: CliRun, large: CliRun, target: float) -> list[Verdict]:
    """The issue's two CLI targets (``target``: seconds for the main run)."""
    shape = f"{main.nodes:,} nodes, {main.days} days"
    out = [
        Verdict(
            f"simulator through the CLI <= {target:.0f} s ({shape}, JSON output)",
            f"{main.seconds:.2f} s" if main.summary is not None else f"> {main.seconds:.0f} s",
            main.summary is not None and main.seconds <= target,
        )
    ]
    shape = f"{large.nodes:,} nodes, {large.days} days"
    measured = (
        f"{large.seconds:.1f} s, {large.peak_mb:.0f} MB"
        if large.summary is not None
        else f"> {large.seconds:.0f} s (stopped), {large.peak_mb:.0f} MB by then"
    )
    out.append(
        Verdict(
            f"simulator through the CLI <= {LARGE_TARGET_SECONDS:.0f} s and <= "
            f"{LARGE_TARGET_MB:.0f} MB peak ({shape})",
            measured,
            large.summary is not None
            and large.seconds <= LARGE_TARGET_SECONDS
            and large.peak_mb <= LARGE_TARGET_MB,
        )
    )
    return out
