"""The options every client command takes, through the installed ``fleetgate`` script against a
real API: ``-n/--namespace`` wherever a namespace is meant (the old first-argument form still
works, with a deprecation note), ``--server`` that is no URL is bad input, ``--no-headers``."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.apps.client.seeded import ADMIN_TOKEN, console

DEPRECATED = "fleetgate: warning: the namespace as the first argument is deprecated; use -n "


def one_error_line(run: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """The run failed with ``code`` and printed exactly one line, ``error: ...`` holding each
    needle."""
    lines = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == code and len(lines) == 1, (run.returncode, lines)
    assert lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_every_namespaced_verb_takes_dash_n_and_the_old_argument_with_a_note(base: str) -> None:
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    size = ("--cpus", "1", "--memory-mb", "1", "--node", "hv-1", "-o", "name")
    new = console("place", "-n", "team-n", *size, env=env)
    assert new.returncode == 0 and new.stderr == "", new.stderr
    old = console("place", "team-n", *size, env=env)
    assert old.returncode == 0 and old.stderr == DEPRECATED + "team-n\n"
    released = console("release", "--namespace", "team-n", new.stdout.strip(), env=env)
    assert released.returncode == 0 and released.stderr == ""
    released = console("release", "team-n", old.stdout.strip(), env=env)
    assert released.returncode == 0 and released.stderr == DEPRECATED + "team-n\n"
    claim = ("--cpus", "1", "--memory-mb", "1", "--expires-in", "1h", "-o", "name")
    made = console("claims", "create", "-n", "team-c", *claim, env=env).stdout.strip()
    for verb in (("claims", "update", "-n", "team-c", made, "--cpus", "2"),
                 ("claims", "update", "team-c", made, "--cpus", "3"),
                 ("claims", "delete", "-n", "team-c", made)):  # fmt: skip
        run = console(*verb, env=env)
        assert run.returncode == 0, run.stderr
        assert run.stderr == ("" if "-n" in verb else DEPRECATED + "team-c\n")
    for verb in (("tokens", "list", "-n", "team-c"), ("tokens", "list", "team-c")):
        assert console(*verb, env=env).returncode == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("place", "--cpus", "1", "--memory-mb", "1"), "Missing option '--namespace' / '-n'"),
        (("place", "-n", "web", "web", "--cpus", "1", "--memory-mb", "1"), "expected 0"),
        (("claims", "update", "-n", "web"), "expected 1"),
        (("tokens", "revoke", "web"), "Missing option '--namespace' / '-n'"),
        (("release", "-n", "web"), "Missing the ids"),
        (("placements", "-n", "Not_A_Namespace"), "is not a namespace"),
        (("place", "Not_A_Namespace", "--cpus", "1", "--memory-mb", "1"), "is not a namespace"),
        (("events", "-n", "a/b"), "is not a namespace"),
        (("claims",), "Missing option '--namespace' / '-n'"),
    ],
    ids=" ".join,
)
def test_a_namespace_missing_twice_or_malformed_is_one_error_line(
    base: str, args: tuple[str, ...], needle: str
) -> None:
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    run = console(*args, env=env)
    # (the old form's deprecation note may come first; the verdict is one error line)
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert run.returncode == 2 and len(errors) == 1 and needle in errors[0], run.stderr


@pytest.mark.parametrize(
    "server", ["not a url", "ftp://x", "http://", "127.0.0.1:8000", "http://a b"]
)
def test_a_server_that_is_no_url_is_bad_input_naming_server(server: str) -> None:
    one_error_line(console("nodes", "--server", server, "--token", "t"), 2, "--server")


def test_a_server_refused_never_shows_its_password() -> None:
    run = console(
        "nodes", env={"FLEETGATE_SERVER": "http://u:pw-in-url-7@ host", "FLEETGATE_TOKEN": "t"}
    )
    line = one_error_line(run, 2, "--server", "FLEETGATE_SERVER")
    assert "pw-in-url-7" not in line


def test_no_headers_prints_the_rows_alone(base: str) -> None:
    auth = ("--server", base, "--token", ADMIN_TOKEN)
    with_header = console("nodes", *auth).stdout.splitlines()
    without = console("nodes", *auth, "--no-headers").stdout.splitlines()
    assert with_header[0].split()[0] == "NAME"
    assert [r.split() for r in without] == [r.split() for r in with_header[1:]]
    wide = console("placements", "-n", "team-a", "-o", "wide", "--no-headers", *auth)
    assert wide.returncode == 0 and "NAMESPACE" not in wide.stdout and wide.stdout.strip()
    # Only the tables have a header: json is the same with or without the flag.
    assert json.loads(console("nodes", "-o", "json", "--no-headers", *auth).stdout) == json.loads(
        console("nodes", "-o", "json", *auth).stdout
    )
