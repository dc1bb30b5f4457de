"""CLI start-up: the wall time of one ``fleetgate`` command, from exec to exit, warm.

Each command runs as an operator runs it, the installed console script in a fresh process, with
a bare ``python -c pass`` in the same rounds for the interpreter's own floor; the rounds
interleave the commands so a change in the machine's load touches them all alike. The client
commands talk to a real ``fleetgate api`` on 127.0.0.1 (a SQLite file, one node); ``check``
reads a policy file. ``python -X importtime`` then shows which packages the time goes to, and
how many modules each command imports. The machine's load average is taken before and after the
rounds: the wall time waits for a core, the CPU time (the process's own) much less so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from statistics import median

import httpx

from benchmarks.machine import load_average
from benchmarks.report import Table, Verdict

PYTHON = sys.executable
FLEETGATE = str(Path(sys.executable).with_name("fleetgate"))
TARGET_SECONDS = 0.3
TOKEN = "bench-startup-admin-token"
NS = "bench"
POLICY = """\
apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata: {name: nightly}
spec:
  nodePoolSelector: {matchLabels: {fleetgate.io/rotation: nightly}}
  maintenanceWindows:
    - {timezone: UTC, days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "02:00", end: "04:00"}
"""
#: Packages ``-X importtime`` costs are summed under (the rest is "other").
TOP_IMPORTS = 12


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _api(workdir: Path) -> Iterator[str]:
    """``fleetgate api`` over a SQLite file, with one node: its base URL for the block."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    env |= {"FLEETGATE_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'api.db'}",
            "FLEETGATE_API__ADMIN_TOKEN": TOKEN}  # fmt: skip
    argv = [FLEETGATE, "api", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("fleetgate api did not start")
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        body = {"threads": 8, "memory_mb": 8192, "disk_gb": 100}
        httpx.put(f"{base}/v1/nodes/bench-1", json=body, headers=auth, timeout=10)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def commands(base: str, policy: Path) -> list[tuple[str, list[str]]]:
    """What is timed: a label and the argv, the interpreter's floor first."""
    auth = ["--server", base, "--token", TOKEN]
    check = [FLEETGATE, "check", str(policy), "--expire-after", "14d"]
    dry_run = [FLEETGATE, "place", "-n", NS, "--cpus", "1", "--memory-mb", "1", "--dry-run"]
    return [
        ("python -c pass", [PYTHON, "-c", "pass"]),
        ("fleetgate --help", [FLEETGATE, "--help"]),
        ("fleetgate version", [FLEETGATE, "version"]),
        ("fleetgate check", check),
        ("fleetgate check -o json", [*check, "-o", "json"]),
        ("fleetgate nodes", [FLEETGATE, "nodes", *auth]),
        ("fleetgate placements", [FLEETGATE, "placements", "-n", NS, *auth]),
        ("fleetgate events -o json", [FLEETGATE, "events", "-o", "json", *auth]),
        ("fleetgate status", [FLEETGATE, "status", *auth]),
        ("fleetgate node uncordon", [FLEETGATE, "node", "uncordon", "bench-1", *auth]),
        ("fleetgate place --dry-run", [*dry_run, *auth]),
    ]


#: The commands whose imports the second table breaks down (labels of :func:`commands`).
PROFILED = ("fleetgate check", "fleetgate nodes", "fleetgate place --dry-run")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}


def _wall(argv: Sequence[str]) -> tuple[float, float]:
    """One run: its wall time, and the CPU time (user + system) the process itself used."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=_clean_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


#: The row of the import table that counts modules rather than milliseconds.
MODULES = "modules imported (count)"


def import_costs(argv: Sequence[str]) -> dict[str, float]:
    """Milliseconds of ``-X importtime`` self time per top-level package, for one run, and the
    number of modules imported (under :data:`MODULES`)."""
    run = subprocess.run([PYTHON, "-X", "importtime", *argv], env=_clean_env(),
                         capture_output=True, text=True, check=True)  # fmt: skip
    costs: dict[str, float] = defaultdict(float)
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, _, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        if not self_us.isdigit():
            continue  # the header line
        top = name.split(".")[0]
        key = ".".join(name.split(".")[:2]) if top == "fleetgate" else top
        costs[key] += int(self_us) / 1000
        costs[MODULES] += 1
    return dict(costs)


def run(rounds: int) -> tuple[list[Table], list[Verdict]]:
    """Time every command ``rounds`` times (after one warm-up), and the import costs."""
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        policy = workdir / "policy.yaml"
        policy.write_text(POLICY)
        with _api(workdir) as base:
            timed = commands(base, policy)
            walls: dict[str, list[float]] = {label: [] for label, _ in timed}
            cpus: dict[str, list[float]] = {label: [] for label, _ in timed}
            load = [load_average()]
            for round_ in range(rounds + 1):
                for label, argv in timed:
                    wall, cpu = _wall(argv)
                    if round_:  # the first round only warms the page cache
                        walls[label].append(wall)
                        cpus[label].append(cpu)
            load.append(load_average())
            argvs = dict(timed)
            costs = {label.removeprefix("fleetgate "): import_costs(argvs[label])
                     for label in PROFILED}  # fmt: skip
    tables = [_wall_table(walls, cpus, rounds, load), _import_table(costs)]
    return tables, [_verdict(walls, cpus)]


def _wall_table(
    walls: dict[str, list[float]], cpus: dict[str, list[float]], rounds: int, load: list[str]
) -> Table:
    floor = median(walls["python -c pass"])
    cpu_floor = median(cpus["python -c pass"]) or 0.001
    table = Table(
        f"CLI start-up, warm: wall time per command ({rounds} runs each, interleaved)",
        ["command", "median s", "best s", "x python -c pass", "CPU s (median)",
         "CPU x python -c pass"],
    )  # fmt: skip
    for label, seconds in walls.items():
        mid, cpu = median(seconds), median(cpus[label])
        table.add(label, f"{mid:.3f}", f"{min(seconds):.3f}", f"{mid / floor:.1f}",
                  f"{cpu:.3f}", f"{cpu / cpu_floor:.1f}")  # fmt: skip
    table.notes.append(
        "Each run is a fresh process (the installed console script), exec to exit; client "
        "commands include their HTTP round trip to a local `fleetgate api` over SQLite. CPU s "
        "is the process's own user + system time: on a machine shared with other work it moves "
        "far less than the wall time, which waits for a core."
    )
    table.notes.append(f"Load average (1/5/15 min) before the rounds {load[0]}, after {load[1]}.")
    return table


def _import_table(costs: dict[str, dict[str, float]]) -> Table:
    names = sorted({n for c in costs.values() for n in c if n != MODULES},
                   key=lambda n: -max(c.get(n, 0.0) for c in costs.values()))  # fmt: skip
    table = Table(
        "CLI start-up: import time by package (`python -X importtime`, self ms, one run)",
        ["package", *(f"fleetgate {c} ms" for c in costs)],
    )
    for name in names[:TOP_IMPORTS]:
        table.add(name, *(f"{c.get(name, 0.0):.1f}" for c in costs.values()))
    total = (sum(v for n, v in c.items() if n != MODULES) for c in costs.values())
    table.add("all imports", *(f"{t:.1f}" for t in total))
    table.add(MODULES, *(f"{c.get(MODULES, 0):.0f}" for c in costs.values()))
    table.notes.append(
        "Self time summed per top-level package (fleetgate per subpackage), one run each, "
        "inflated by -X importtime itself. The client runs on the standard library's HTTP and "
        "reads the answers into dataclasses; the command is click's, its option values read by "
        "types of its own (cli/params.py); a write sends its request body as given and the "
        "API's 422 is the one check of it, so no command imports pydantic; check loads the "
        "ledger forecast (asyncio, "
        "the capacity domain) only with --ledger/--ledger-snapshot, and rich only for a table."
    )
    return table


def _verdict(walls: dict[str, list[float]], cpus: dict[str, list[float]]) -> Verdict:
    measured = {k: median(v) for k, v in walls.items() if k.startswith("fleetgate")}
    slowest = max(measured, key=lambda k: measured[k])
    cpu = {k: median(v) for k, v in cpus.items() if k.startswith("fleetgate")}
    hungriest = max(cpu, key=lambda k: cpu[k])
    return Verdict(
        f"client commands and check start in < {TARGET_SECONDS} s warm (median wall time)",
        f"slowest: {slowest} {measured[slowest]:.3f} s wall; most CPU: {hungriest} "
        f"{cpu[hungriest]:.3f} s",
        measured[slowest] < TARGET_SECONDS,
        "wall time includes the interpreter and waits for a core: read it with the load average "
        "and the CPU column",
    )
