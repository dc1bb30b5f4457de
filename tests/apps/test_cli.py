"""The fleetgate command: help, version, and exit 2 with a message for invalid arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FLEETGATE = Path(sys.executable).with_name("fleetgate")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FLEETGATE), *args], capture_output=True, text=True, check=False)


def test_help_lists_every_subcommand() -> None:
    out = run("--help")
    assert out.returncode == 0
    for command in ["version", "check", "simulate", "api", "controller", "reconciler", "up", "db"]:
        assert command in out.stdout


def test_version_prints_the_distribution_version() -> None:
    out = run("version")
    assert out.returncode == 0
    assert out.stdout.startswith("fleetgate 0.")


def test_an_unknown_option_exits_2_naming_it() -> None:
    out = run("check", "p.yaml", "--expire-after", "14d", "--bogus")
    assert out.returncode == 2
    assert "--bogus" in out.stderr


def test_an_out_of_range_value_exits_2_naming_the_option() -> None:
    out = run("up", "--nodes", "0")
    assert out.returncode == 2
    assert "--nodes" in out.stderr


def test_a_missing_config_file_exits_2() -> None:
    out = run("--config", "/nonexistent/fleetgate.yaml", "version")
    assert out.returncode == 2
    assert "--config" in out.stderr
