"""The machine a run measured: CPU, cores, memory, Python, database versions, date, load."""

from __future__ import annotations

import os
import platform
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
