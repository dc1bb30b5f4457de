"""The ``FLEETGATE_*`` variables: the constant list of the settings' ones is the settings model's,
and a misspelt variable is named with its closest by every command, the client's and ``check``
included (through the installed script), the client's own variables among the candidates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetgate.apps import settings, variables

FLEETGATE = Path(sys.executable).with_name("fleetgate")
POLICY = Path(__file__).resolve().parents[2] / "examples" / "policy-weekly.yaml"


def test_the_constant_list_is_the_settings_models() -> None:
    found = tuple(settings.setting_variables())
    listing = "".join(f"    {name!r},\n" for name in found).replace("'", '"')
    assert found == variables.SETTING_VARIABLES, (
        f"a setting was added, renamed or removed: make variables.SETTING_VARIABLES\n(\n{listing})"
    )


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("FLEETGATE_TOKN", "FLEETGATE_TOKEN"),
        ("FLEETGATE_SERVR", "FLEETGATE_SERVER"),
        ("FLEETGATE_DATABSE_URL", "FLEETGATE_DATABASE_URL"),
        ("FLEETGATE_CONFG", "FLEETGATE_CONFIG"),
    ],
)
def test_a_typo_is_named_with_the_closest_variable(typo: str, meant: str) -> None:
    assert variables.unknown_variable_warnings({typo: "x"}) == [
        f"fleetgate: warning: {typo} is not a setting and is ignored; did you mean {meant}?"
    ]


def test_what_is_read_or_the_tests_own_is_not_warned_about() -> None:
    read = dict.fromkeys([*variables.SETTING_VARIABLES, *variables.NOT_SETTINGS], "1")
    assert variables.unknown_variable_warnings(read) == []
    assert variables.unknown_variable_warnings({"FLEETGATE_TEST_DATABASE_URL": "x"}) == []
    assert variables.unknown_variable_warnings({"PATH": "/bin"}) == []


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLEETGATE_")}
    return subprocess.run([str(FLEETGATE), *args], capture_output=True, text=True,
                          env={**clean, **env}, timeout=300, check=False)  # fmt: skip


def test_every_command_names_a_misspelt_variable() -> None:
    typos = {"FLEETGATE_TOKN": "x", "FLEETGATE_SERVR": "http://127.0.0.1:1"}
    expected = [
        "fleetgate: warning: FLEETGATE_SERVR is not a setting and is ignored; "
        "did you mean FLEETGATE_SERVER?",
        "fleetgate: warning: FLEETGATE_TOKN is not a setting and is ignored; "
        "did you mean FLEETGATE_TOKEN?",
    ]
    checked = run("check", str(POLICY), "--expire-after", "14d", "-o", "name", **typos)
    assert checked.returncode in (0, 1) and checked.stderr.splitlines() == expected
    # A client command warns too, then goes on (here to the default server, which is down).
    client = run("nodes", "--server", "http://127.0.0.1:1", **typos)
    assert client.stderr.splitlines()[:2] == expected and client.returncode == 3
    version = run("version", **typos)
    assert version.returncode == 0 and version.stderr.splitlines() == expected


def test_a_misspelt_member_of_a_known_section_is_named_by_a_command_that_reads_no_settings() -> (
    None
):
    # Issue 42: FLEETGATE_CAPACITY__TARGT_LOAD passed client commands in silence.
    client = run("nodes", "--server", "http://127.0.0.1:1", FLEETGATE_CAPACITY__TARGT_LOAD="0.5")
    assert client.stderr.splitlines()[0] == (
        "fleetgate: warning: FLEETGATE_CAPACITY__TARGT_LOAD is not a setting; "
        "did you mean FLEETGATE_CAPACITY__TARGET_LOAD?"
    )


def test_check_refuses_a_bad_setting_value_it_would_not_read() -> None:
    # Issue 42: FLEETGATE_CAPACITY__TARGET_LOAD=abc was silently accepted by a plain check.
    checked = run("check", str(POLICY), "--expire-after", "14d",
                  FLEETGATE_CAPACITY__TARGET_LOAD="abc")  # fmt: skip
    assert checked.returncode == 2, checked.stderr
    assert checked.stderr.startswith("error: FLEETGATE_CAPACITY__TARGET_LOAD"), checked.stderr
    assert checked.stdout == ""
    # A good value changes nothing in what check answers.
    good = run("check", str(POLICY), "--expire-after", "14d", "-o", "json",
               FLEETGATE_CAPACITY__TARGET_LOAD="0.5")  # fmt: skip
    plain = run("check", str(POLICY), "--expire-after", "14d", "-o", "json")
    assert (good.returncode, good.stdout) == (plain.returncode, plain.stdout)
