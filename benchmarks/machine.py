"""The machine a run measured: CPU, cores, memory, Python, database versions, date, load."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.report import Table


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / (1 << 20):.1f} GiB"
    except (OSError, ValueError):
        pass
    return "unknown"


def commit() -> str:
    """The commit the run measures: every figure names it, and says when the tree differed."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head} with uncommitted changes" if dirty else head


def load_average() -> str:
    """The 1/5/15-minute load averages (other work on the machine skews every number)."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def describe(databases: dict[str, str]) -> dict[str, str]:
    """Everything the report's machine table shows, at the start of a run."""
    return {
        "commit": commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "CPU": _cpu_model(),
        "cores": str(os.cpu_count()),
        "memory": _memory(),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        **{f"database: {name}": version for name, version in databases.items()},
        "load average at start (1/5/15 min)": load_average(),
    }


def table(facts: dict[str, str]) -> Table:
    """The facts as a two-column table."""
    t = Table("Machine", ["", ""])
    for key, value in facts.items():
        t.add(key, value)
    return t
