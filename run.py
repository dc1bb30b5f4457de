#!/usr/bin/env python3
"""Bootstrap and run fleetgate from a fresh clone with nothing but Python 3.11+.

    python3 run.py up      # the whole system on SQLite + the fake cluster, with a dashboard
    python3 run.py test    # the whole test suite (every backend), exactly as CI runs it
    python3 run.py ARGS    # any other `fleetgate` command, e.g. `python3 run.py check ...`

It installs uv into ./.tools when uv is not on PATH, then lets uv create ./.venv from uv.lock.
Before the tests it installs, as root on Debian, the programs they drive (``TEST_NEEDS``); where
it cannot, it stops at once with one line per missing program saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import venv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent
TOOLS = ROOT / ".tools"
UV_VERSION = "0.9.9"
STOP_SIGNALS = tuple(
    getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGBREAK") if hasattr(signal, n)
)


def uv() -> str:
    """Path to a uv executable: the one running us ($UV), PATH's, or one installed into ./.tools."""
    # `uv run` and nox export the uv they use as $UV; honour it before searching PATH.
    found = os.environ.get("UV") or shutil.which("uv")
    if found and Path(found).exists():
        return found
    bindir = TOOLS / ("Scripts" if os.name == "nt" else "bin")
    local = bindir / "uv"
    if not local.exists():
        print("run.py: installing uv into ./.tools (one time)", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(TOOLS)
        subprocess.run(
            [str(bindir / "python"), "-m", "pip", "install", "--quiet", f"uv>={UV_VERSION}"],
            check=True,
        )
    return str(local)


def main(argv: list[str]) -> int:
    """Sync the locked environment, then run the test suite or a fleetgate command."""
    if sys.version_info < (3, 11):  # noqa: UP036 - run.py must explain itself on old Pythons
        print("run.py: fleetgate needs Python 3.11 or newer", file=sys.stderr)
        return 2
    if argv[:1] == ["test"] and not bring(TEST_NEEDS):
        return 2
    exe = uv()
    subprocess.run([exe, "sync", "--locked", "--all-packages", "--quiet"], cwd=ROOT, check=True)
    bindir = ROOT / ".venv" / ("Scripts" if os.name == "nt" else "bin")
    compile_workspace(bindir / ("python.exe" if os.name == "nt" else "python"))
    script = bindir / "fleetgate"
    if argv[:1] == ["test"]:
        cmd = [exe, "run", "--locked", "nox", "-s", "ci", *argv[1:]]
    elif script.exists() and "UV_PROJECT_ENVIRONMENT" not in os.environ:
        # The environment was just synced: run fleetgate itself, not under `uv run`, so that a
        # Ctrl-C reaches it alone and its own exit code (0 after a clean stop) is ours.
        cmd = [str(script), *(argv or ["--help"])]
    else:
        cmd = [exe, "run", "--locked", "fleetgate", *(argv or ["--help"])]
    return hand_over(cmd)


@dataclass(frozen=True)
class Need:
    """A program the tests drive, where it is found, and the Debian package that installs it."""

    what: str
    found_at: str  # an absolute path, or a command looked up on PATH
    package: str


#: What the test suite needs beyond Python and uv (the clients mariadb and psql come with the
#: servers). The test sessions start MariaDB and PostgreSQL servers of their own, on free
#: ports, where the machine's do not serve or do not let them in.
TEST_NEEDS = (
    Need("Chromium (the dashboard's browser tests)", "/usr/bin/chromium", "chromium"),
    Need("ChromeDriver (drives Chromium)", "/usr/bin/chromedriver", "chromium-driver"),
    Need("promtool (the chart's alert tests)", "promtool", "prometheus"),
    Need("wrk (the HTTP benchmark's load)", "wrk", "wrk"),
    # mariadbd itself is mariadb-server-core's: the server package (which Galera's rsync state
    # transfer script comes with) is known by a file of its own.
    Need(
        "MariaDB's server (with Galera's state transfer)",
        "/usr/bin/wsrep_sst_rsync",
        "mariadb-server",
    ),
    Need("Galera (the cluster lanes)", "/usr/lib/galera/libgalera_smm.so", "galera-4"),
    Need("rsync (Galera's state transfers)", "rsync", "rsync"),
    Need("PostgreSQL 15", "/usr/lib/postgresql/15/bin/initdb", "postgresql-15"),
)


def present(found_at: str) -> bool:
    """Whether an absolute path exists, or a command is on PATH."""
    return Path(found_at).exists() if os.path.isabs(found_at) else bool(shutil.which(found_at))


def apt_commands(packages: Sequence[str]) -> list[list[str]]:
    """The apt-get commands that install ``packages``: the lists refreshed once, then one install.

    Recommended packages are left out (prometheus would bring and start a node exporter); the
    install waits for another apt or dpkg holding the lock instead of failing at once.
    """
    return [
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
         "-o", "DPkg::Lock::Timeout=600", *packages],
    ]  # fmt: skip


def bring(
    needs: Sequence[Need],
    *,
    found: Callable[[str], bool] | None = None,
    euid: Callable[[], int] | None = None,
    apt: Callable[[list[str]], int] | None = None,
    out: TextIO | None = None,
) -> bool:
    """Install what ``needs`` lacks (as root, with apt-get); False, after one line per missing
    program saying how to install it, when that cannot be done or did not bring it.

    ``found``, ``euid`` and ``apt`` default to the machine's (``present``, ``os.geteuid``,
    ``run_apt``).
    """
    found = found or present
    euid = euid or getattr(os, "geteuid", lambda: -1)  # no geteuid (Windows): never root
    apt = apt or run_apt
    out = out or sys.stderr
    absent = [n for n in needs if not found(n.found_at)]
    if not absent:
        return True
    packages = list(dict.fromkeys(n.package for n in absent))
    can_install = euid() == 0 and found("apt-get")
    if can_install:
        print(f"run.py: installing Debian's {' '.join(packages)} (one time)", file=out, flush=True)
        for command in apt_commands(packages):
            apt(command)  # the check below decides, whatever apt-get said
        absent = [n for n in absent if not found(n.found_at)]
        if not absent:
            return True
    for n in absent:
        if can_install:
            how = f"apt-get install -y {n.package} did not install it; see apt-get's output above"
        elif found("apt-get"):
            how = f"install it as root: apt-get install -y --no-install-recommends {n.package}"
        else:
            how = f"install it with your system's package manager (Debian's package: {n.package})"
        print(f"run.py: {n.what} is missing ({n.found_at}): {how}", file=out)
    return False


def run_apt(command: list[str]) -> int:
    """Run an apt-get command non-interactively; its exit status."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(command, env=env, check=False).returncode


def compile_workspace(python: Path) -> None:
    """Write the bytecode of the workspace's own sources (quick when it is up to date).

    The sync compiles what it installs (pyproject's ``compile-bytecode``), but the workspace
    packages are installed editable, imported from packages/*/src: where PYTHONDONTWRITEBYTECODE
    is set nothing else writes their bytecode, and every command would compile them again.
    """
    if "UV_PROJECT_ENVIRONMENT" in os.environ or not python.exists():
        return  # another environment than ./.venv: its owner decides
    sources = [str(p) for p in sorted((ROOT / "packages").glob("*/src"))]
    subprocess.run([str(python), "-m", "compileall", "-q", *sources], cwd=ROOT, check=False,
                   stdout=subprocess.DEVNULL)  # fmt: skip


def hand_over(cmd: list[str]) -> int:
    """Run ``cmd`` in ROOT as if it were this process, so signals sent to run.py's PID reach it.

    On POSIX run.py becomes the command (exec): SIGINT/SIGTERM to our PID stop the server itself,
    and its exit status is ours. Elsewhere the child runs beside us and we forward the signals.
    """
    os.chdir(ROOT)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(cmd[0], cmd)
    child = subprocess.Popen(cmd)
    forward = {sig: signal.signal(sig, lambda s, _f: child.send_signal(s)) for sig in STOP_SIGNALS}
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:  # a Ctrl-C in the console reached the child as well
                continue
    finally:
        for sig, previous in forward.items():
            signal.signal(sig, previous)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
