"""run.py, the README's entry point.

What ``run.py test`` installs before the tests is decided with fakes of the machine (what is
found, who we are, apt-get), installing nothing; one test checks the real machine's answer.

A long command it starts stops when run.py's PID is signalled: the real ``python3 run.py up``
(which syncs the locked environment first) is started, and once the dashboard link is printed
SIGINT or SIGTERM goes to run.py's own PID; the exit status is 0 and nothing serves the port any
more (no orphaned ``fleetgate`` left behind).
"""

from __future__ import annotations

import io
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import run
from run import TEST_NEEDS, Need, apt_commands, bring

ROOT = Path(__file__).resolve().parents[1]
STARTUP = 240.0  # seconds: run.py syncs the environment, then `up` imports everything
SERVING = re.compile(r"dashboard\s+http://[^:/]+:(\d+)/")


class Machine:
    """A fake machine: what is found on it, who we are, and an apt-get that installs packages
    (those in ``broken`` install nothing)."""

    def __init__(self, found: set[str], *, root: bool = True, broken: frozenset[str] = frozenset()):
        self.found = set(found)
        self.root = root
        self.broken = broken
        self.commands: list[list[str]] = []
        self.out = io.StringIO()

    def bring(self, needs: tuple[Need, ...] = TEST_NEEDS) -> bool:
        return bring(needs, found=self.has, euid=self.euid, apt=self.apt, out=self.out)

    def has(self, found_at: str) -> bool:
        return found_at in self.found

    def euid(self) -> int:
        return 0 if self.root else 1000

    def apt(self, command: list[str]) -> int:
        self.commands.append(command)
        if command[:2] == ["apt-get", "install"]:
            for need in TEST_NEEDS:
                if need.package in command and need.package not in self.broken:
                    self.found.add(need.found_at)
        return 0

    @property
    def lines(self) -> list[str]:
        return self.out.getvalue().splitlines()


EVERYTHING = {n.found_at for n in TEST_NEEDS} | {"apt-get"}
NEW_MACHINE = EVERYTHING - {"/usr/bin/chromium", "/usr/bin/chromedriver", "promtool", "wrk"}


def test_a_machine_that_has_everything_installs_nothing() -> None:
    machine = Machine(EVERYTHING)
    assert machine.bring()
    assert machine.commands == []
    assert machine.lines == []


def test_as_root_on_debian_what_is_missing_comes_in_one_apt_get_install() -> None:
    machine = Machine(NEW_MACHINE)
    assert machine.bring()
    packages = ["chromium", "chromium-driver", "prometheus", "wrk"]
    assert machine.commands == apt_commands(packages)
    update, install = machine.commands
    assert update == ["apt-get", "update", "-qq"]
    assert install[:2] == ["apt-get", "install"]
    assert "--no-install-recommends" in install and install[-4:] == packages
    assert machine.lines == [f"run.py: installing Debian's {' '.join(packages)} (one time)"]
    assert machine.found == EVERYTHING


def test_a_package_shared_by_two_needs_is_named_once() -> None:
    twice = (Need("a", "/a", "pkg"), Need("b", "/b", "pkg"), Need("c", "/c", "other"))
    machine = Machine({"apt-get"})
    machine.bring(twice)
    assert machine.commands[-1][-2:] == ["pkg", "other"]


def test_what_apt_get_did_not_bring_stops_the_run_with_a_line_each() -> None:
    machine = Machine(NEW_MACHINE, broken=frozenset({"wrk", "prometheus"}))
    assert not machine.bring()
    assert machine.lines[1:] == [
        "run.py: promtool (the chart's alert tests) is missing (promtool): "
        "apt-get install -y prometheus did not install it; see apt-get's output above",
        "run.py: wrk (the HTTP benchmark's load) is missing (wrk): "
        "apt-get install -y wrk did not install it; see apt-get's output above",
    ]


def test_not_root_stops_at_once_saying_how_to_install_each_missing_program() -> None:
    machine = Machine(NEW_MACHINE, root=False)
    assert not machine.bring()
    assert machine.commands == []
    assert len(machine.lines) == 4
    assert machine.lines[0] == (
        "run.py: Chromium (the dashboard's browser tests) is missing (/usr/bin/chromium): "
        "install it as root: apt-get install -y --no-install-recommends chromium"
    )
    for line, package in zip(
        machine.lines, ["chromium", "chromium-driver", "prometheus", "wrk"], strict=True
    ):
        assert line.endswith(f"apt-get install -y --no-install-recommends {package}")


def test_without_apt_get_each_missing_program_is_named_with_its_debian_package() -> None:
    machine = Machine(NEW_MACHINE - {"apt-get"})
    assert not machine.bring()
    assert machine.commands == []
    assert machine.lines[-1] == (
        "run.py: wrk (the HTTP benchmark's load) is missing (wrk): "
        "install it with your system's package manager (Debian's package: wrk)"
    )


def test_run_py_test_stops_before_uv_when_a_program_cannot_be_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run, "present", lambda found_at: found_at != "wrk")
    monkeypatch.setattr(run.os, "geteuid", lambda: 1000)

    def no_uv() -> str:
        raise AssertionError("run.py went on to uv with a program missing")

    monkeypatch.setattr(run, "uv", no_uv)
    assert run.main(["test"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "run.py: wrk (the HTTP benchmark's load) is missing (wrk): "
        "install it as root: apt-get install -y --no-install-recommends wrk"
    ]


def test_this_machine_has_everything_the_tests_need() -> None:
    """The real machine's answer: after ``run.py test`` brought them (or by hand), nothing is
    missing, so every path and command in TEST_NEEDS is where its package puts it."""
    assert [n.package for n in TEST_NEEDS if not run.present(n.found_at)] == []


def test_each_program_is_looked_for_in_a_file_of_its_own_package() -> None:
    """dpkg's answer for each looked-for file is the package run.py would install. Were it a
    file of a dependency (mariadbd is mariadb-server-core's), removing the named package would
    leave the file, run.py would install nothing, and the Galera lanes would lack what only the
    named package brings (wsrep_sst_rsync: a clean clone's CI failed so)."""
    if not run.present("dpkg-query"):
        pytest.skip("no dpkg here: the packages named are Debian's")
    owners = {}
    for need in TEST_NEEDS:
        path = need.found_at if os.path.isabs(need.found_at) else shutil.which(need.found_at)
        assert path, f"{need.found_at} is not on this machine"
        out = subprocess.run(
            ["dpkg-query", "-S", path], capture_output=True, text=True, check=True
        ).stdout
        owners[need.found_at] = sorted(
            {name.strip() for line in out.splitlines() for name in line.split(":")[0].split(",")}
        )
    assert owners == {n.found_at: [n.package] for n in TEST_NEEDS}


def test_ci_runs_the_readmes_test_command_and_nothing_else() -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [
        line.strip()
        for line in script
        if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))
    ]
    assert commands == ["exec python3 run.py test"]
    assert "python3 run.py test" in (ROOT / "README.md").read_text()


def serves(port: int) -> bool:
    """Whether something accepts connections on the loopback port."""
    with socket.socket() as probe:
        probe.settimeout(2.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_run_py_stops_the_server_and_exits_0(sig: signal.Signals) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FLEETGATE_") and k not in {"UV_PROJECT_ENVIRONMENT", "VIRTUAL_ENV"}
    }
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "up", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    assert process.stdout is not None
    pump = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()])
    pump.start()
    try:
        port = None
        deadline = time.monotonic() + STARTUP
        while port is None and time.monotonic() < deadline and process.poll() is None:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            seen.append(line)
            if match := SERVING.search(line):
                port = int(match.group(1))
        assert port is not None, "run.py up never served:\n" + "".join(seen)[-3000:]
        assert serves(port)

        process.send_signal(sig)
        status = process.wait(timeout=90)
        pump.join(timeout=30)
        while not lines.empty():
            seen.append(lines.get())
        assert status == 0, "".join(seen)[-3000:]
        # The server went with it: nobody is left listening on the port.
        deadline = time.monotonic() + 30
        while serves(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not serves(port), f"something still serves port {port} after run.py exited"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        pump.join(timeout=10)
        process.stdout.close()  # the pump has read it to the end
