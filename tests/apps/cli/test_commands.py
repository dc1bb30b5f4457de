"""The offline commands refuse bad input before any work, naming the option, exit 2 (through
the installed ``fleetgate`` script): ``check --nodes`` past the bound the API takes,
``simulate --report`` where nothing can be written, ``simulate --from`` out of the years a
simulation takes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetgate.apps.api.schemas.fleet import FIRST_YEAR, LAST_YEAR
from fleetgate.domain.rotation.constants import MAX_POOL_NODES

FLEETGATE = Path(sys.executable).with_name("fleetgate")
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
POLICY = str(EXAMPLES / "policy-simulate.yaml")
FLEET = str(EXAMPLES / "fleet-listed.yaml")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    return subprocess.run([str(FLEETGATE), *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)  # fmt: skip


def error_line(out: subprocess.CompletedProcess[str]) -> str:
    """The one line printed, which must be an ``error:`` line (nothing on stdout)."""
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("error: "), out.stderr
    return out.stderr.strip()


@pytest.mark.parametrize("nodes", ["99999999999999999999999", str(MAX_POOL_NODES + 1), "-1"])
def test_check_refuses_a_node_count_past_the_apis_bound(nodes: str) -> None:
    out = run("check", str(EXAMPLES / "policy-weekly.yaml"), "--expire-after", "14d",
              "--nodes", nodes)  # fmt: skip
    assert out.returncode == 2 and "'--nodes'" in error_line(out)


def test_check_takes_the_largest_count_the_api_takes() -> None:
    out = run("check", str(EXAMPLES / "policy-weekly.yaml"), "--expire-after", "14d",
              "--nodes", str(MAX_POOL_NODES), "-o", "json")  # fmt: skip
    assert out.returncode in (0, 1) and f'"n": {MAX_POOL_NODES}' in out.stdout, out.stderr


@pytest.mark.parametrize("report", ["/proc/nope/r.html", "/nonexistent-dir/r.html", "/"])
def test_simulate_refuses_a_report_it_could_not_write_before_it_runs(report: str) -> None:
    out = run("simulate", POLICY, "--fleet", FLEET, "--from", "2024-01-01T00:00:00Z",
              "--to", "2024-03-01T00:00:00Z", "--report", report)  # fmt: skip
    line = error_line(out)  # no table, no progress: the simulation never ran
    assert out.returncode == 2 and "'--report'" in line and repr(report) in line


def test_simulate_writes_a_report_where_it_can(tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    out = run("simulate", POLICY, "--fleet", FLEET, "--from", "2024-01-01T00:00:00Z",
              "--to", "2024-01-03T00:00:00Z", "--report", str(report), "-o", "name")  # fmt: skip
    assert out.returncode in (0, 1) and report.read_text().startswith("<!")


@pytest.mark.parametrize("flag", ["--from", "--to"])
@pytest.mark.parametrize("instant", ["0001-01-01T00:00:00Z", "3000-01-01T00:00:00Z"])
def test_simulate_refuses_an_instant_out_of_the_simulated_years(flag: str, instant: str) -> None:
    span = {"--from": "2024-01-01T00:00:00Z", "--to": "2024-01-08T00:00:00Z", flag: instant}
    out = run("simulate", POLICY, "--fleet", FLEET, "--from", span["--from"], "--to", span["--to"])
    line = error_line(out)
    assert out.returncode == 2
    assert line == f"error: {flag}: must be in the years {FIRST_YEAR} to {LAST_YEAR} (UTC)"
