"""The fleetgate command: help, version, and exit 2 with a message for invalid arguments."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from fleetgate.apps.cli.main import debug_first, fleetgate

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


def run_in(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The real command in ``cwd`` with extra environment (no FLEETGATE_* from outside)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    return subprocess.run(
        [str(FLEETGATE), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**base, "COLUMNS": "80", **env},
        timeout=300,
    )


def test_version_flag_prints_the_version() -> None:
    out = run("--version")
    assert out.returncode == 0 and out.stdout.startswith("fleetgate 0.")


def every_command(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group`` (the root included)."""
    found = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += every_command(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def test_help_fits_80_columns_without_bool_metavars_or_markup() -> None:
    root = fleetgate
    for path in every_command(root):
        command: Any = root
        for name in path:
            command = command.commands[name]
        out = CliRunner().invoke(fleetgate, [*path, "--help"], env={"COLUMNS": "80"})
        where = " ".join(("fleetgate", *path))
        assert out.exit_code == 0, where
        assert "<bool>" not in out.stdout, where
        assert "``" not in out.stdout and ":func:" not in out.stdout, where
        assert max(map(len, out.stdout.splitlines())) <= 80, where
        for param in command.params:
            for opt in (*param.opts, *param.secondary_opts):
                if opt.startswith("-"):
                    assert opt in out.stdout.split() or f"{opt}," in out.stdout, (where, opt)


def test_api_help_describes_host_and_port_with_their_defaults(tmp_path: Path) -> None:
    text = " ".join(run_in(tmp_path, "api", "--help").stdout.split())
    assert "--host TEXT Address to listen on. [default: the api.host setting, 127.0.0.1]" in text
    assert "[default: the api.port setting, 8000]" in text


def test_a_start_up_failure_is_one_error_line_and_debug_shows_the_traceback(
    tmp_path: Path,
) -> None:
    # Karpenter without any kubeconfig: the client library raises deep inside start-up.
    env = {"FLEETGATE_CLUSTER": "karpenter", "HOME": str(tmp_path), "KUBECONFIG": ""}
    out = run_in(tmp_path, "controller", "--once", **env)
    assert out.returncode != 0
    # (the Kubernetes client may log its own warning first; fleetgate's verdict is one line)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and out.stderr.rstrip().endswith(errors[0]), out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    debug = run_in(tmp_path, "--debug", "controller", "--once", **env)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


#: A server nothing listens on (port 1), with a password that must never be printed.
REFUSING_URL = "postgresql+asyncpg://fleet:pw-Refused-31@127.0.0.1:1/x"


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    """The single line the command printed (it must be the only one, and an ``error:``)."""
    printed = (out.stdout + out.stderr).strip().splitlines()
    assert len(printed) == 1 and printed[0].startswith("error: "), out.stdout + out.stderr
    return printed[0]


@pytest.mark.parametrize(
    "args",
    [("api", "--port", "0"), ("api", "--port", "0", "--workers", "2"), ("reconciler", "--once")],
    ids=" ".join,
)
def test_an_unreachable_database_is_one_error_line_and_exit_1(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    # (with a configured admin token: a generated one is printed first, by design)
    out = run_in(
        tmp_path, *args, FLEETGATE_DATABASE_URL=REFUSING_URL, FLEETGATE_API__ADMIN_TOKEN="tok-x1"
    )
    line = one_error_line(out)
    assert out.returncode == 1
    assert line.startswith("error: cannot start the ledger at postgresql+asyncpg://fleet:***@")


def test_a_database_scheme_nobody_serves_is_invalid_configuration(tmp_path: Path) -> None:
    out = run_in(tmp_path, "api", "--port", "0", FLEETGATE_DATABASE_URL="oracle://u:pw-o-1@db/x")
    assert out.returncode == 2
    assert one_error_line(out).startswith("error: database_url: no installed plugin serves")


@pytest.mark.parametrize(
    ("workers", "holder_shares"),
    [("1", False), ("2", False), ("2", True)],
    ids=["one worker", "workers", "workers, port held by SO_REUSEPORT sockets"],
)
def test_a_port_in_use_is_one_error_line_and_exit_1(
    tmp_path: Path, workers: str, holder_shares: bool
) -> None:
    # Workers listen on sockets of their own with SO_REUSEPORT; a port another server holds the
    # same way (another fleetgate with workers) is refused all the same, never shared.
    with socket.socket() as taken:
        if holder_shares:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        url = f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
        out = run_in(
            tmp_path,
            "api",
            "--port",
            str(port),
            "--workers",
            workers,
            FLEETGATE_DATABASE_URL=url,
            FLEETGATE_API__ADMIN_TOKEN="tok-port-in-use",
        )
    assert out.returncode == 1
    assert one_error_line(out).startswith(f"error: cannot listen on 127.0.0.1:{port}: ")


def test_debug_after_the_command_shows_the_traceback(tmp_path: Path) -> None:
    out = run_in(tmp_path, "api", "--port", "0", "--debug", FLEETGATE_DATABASE_URL=REFUSING_URL)
    assert out.returncode == 1 and "Traceback" in out.stderr
    assert "cannot start the ledger" in out.stderr and "pw-Refused-31" not in out.stderr


def test_debug_is_moved_before_the_command_but_not_past_a_double_dash() -> None:
    assert debug_first(["api", "--debug", "--port", "0"]) == ["--debug", "api", "--port", "0"]
    assert debug_first(["api", "--port", "0"]) == ["api", "--port", "0"]
    assert debug_first(["check", "--", "--debug"]) == ["check", "--", "--debug"]


def test_db_current_and_history_name_the_revisions(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    before = run_in(tmp_path, "db", "current", FLEETGATE_DATABASE_URL=url)
    assert before.returncode == 0 and f"{url}: database at revision (empty" in before.stdout
    upgraded = run_in(tmp_path, "db", "upgrade", FLEETGATE_DATABASE_URL=url)
    assert upgraded.returncode == 0
    assert f"{url}: database at revision 0006_reservations" in upgraded.stdout
    after = run_in(tmp_path, "db", "current", FLEETGATE_DATABASE_URL=url)
    assert f"{url}: database at revision 0006_reservations" in after.stdout
    history = run_in(tmp_path, "db", "history", FLEETGATE_DATABASE_URL=url).stdout.splitlines()
    assert history[0] == f"{url}:"
    assert history[1].split()[0] == "0001_initial"
    assert history[2].split()[0] == "0002_placements_by_namespace"
    assert history[3].split()[0] == "0003_admit_function"
    assert history[4].split()[0] == "0004_admit_batch_function"
    assert history[5].split()[0] == "0005_function_repeat_check"
    assert history[6].split()[:2] == ["0006_reservations", "(current)"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("events", "--limit", "0"), ("'--limit'", "greater than or equal to 1")),
        (("nodes", "--bogus"), ("'--bogus'",)),
        (("nodes", "-o", "xml"), ("'--output' / '-o'", "'xml'")),
        (("frobnicate",), ("'frobnicate'",)),
        (("check",), ("'policy'",)),
        (("check", "p.yaml"), ("'--expire-after'",)),
        (("api", "--port", "70000"), ("'--port'",)),
        (("up", "--nodes", "0"), ("'--nodes'",)),
        (("--config", "/nonexistent/fleetgate.yaml", "version"), ("'--config'",)),
        (("nodes", "extra"), ("extra",)),
    ],
    ids=" ".join,
)
def test_an_option_error_is_one_line_naming_the_option_exit_2(
    tmp_path: Path, args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    out = run_in(tmp_path, *args)
    assert out.returncode == 2
    line = one_error_line(out)
    for needle in needles:
        assert needle in line, line
    assert line.endswith("--help')")  # where to read more, on the same line


def test_a_bare_group_still_prints_its_help(tmp_path: Path) -> None:
    out = run_in(tmp_path, "node")
    assert out.returncode == 2 and out.stderr.startswith("Usage: fleetgate node")


def test_dash_h_is_help_as_for_kubectl(tmp_path: Path) -> None:
    assert run_in(tmp_path, "-h").stdout == run_in(tmp_path, "--help").stdout
    assert run_in(tmp_path, "nodes", "-h").stdout.startswith("Usage: fleetgate nodes")


KUBECTL_PLUGIN = FLEETGATE.with_name("kubectl-fleetgate")


def test_the_client_installs_as_a_kubectl_plugin(tmp_path: Path) -> None:
    # kubectl finds kubectl-fleetgate on PATH and execs it with the arguments after
    # "fleetgate" as given, argv[0] the plugin's path: its help and errors say
    # "kubectl fleetgate", as kubectl's plugin guide asks.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    env["PATH"] = f"{KUBECTL_PLUGIN.parent}{os.pathsep}{env.get('PATH', '')}"

    def plugin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl-fleetgate", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300, check=False)  # fmt: skip

    assert KUBECTL_PLUGIN.is_file() and os.access(KUBECTL_PLUGIN, os.X_OK)
    usage = plugin("--help")
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: kubectl fleetgate [OPTIONS]")
    assert plugin("-h").stdout == usage.stdout
    assert plugin("nodes", "-h").stdout.startswith("Usage: kubectl fleetgate nodes")
    assert plugin("version").stdout.startswith("fleetgate 0.")
    wrong = plugin("nodes", "--bogus")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == (
        "error: No such option '--bogus'. (see 'kubectl fleetgate nodes --help')"
    )
    policy = Path(__file__).resolve().parents[3] / "examples" / "policy-weekly.yaml"
    checked = plugin("check", str(policy), "--expire-after", "14d", "-o", "json")
    assert checked.returncode == 0 and '"findings"' in checked.stdout, checked.stderr
