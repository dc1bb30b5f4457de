"""``fleetgate check`` end to end: every example, the reference manifest, JSON shape, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fleetgate.apps.cli import app
from fleetgate.apps.policyfile import load_policy
from fleetgate.apps.services.check import CheckInputs
from fleetgate.apps.services.check import check as check_policy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
H = 3600

INPUT_KEYS = {
    "e",
    "tgp",
    "tgpFallback",
    "p",
    "windowLen",
    "idleGap",
    "buffer",
    "readyTimeout",
    "cooldownAfter",
    "failurePause",
    "retryBackoff",
    "k",
    "m",
    "n",
    "ageThresholdOverride",
}
TOP_KEYS = {
    "inputs",
    "tRot",
    "tRotEst",
    "drainEstimate",
    "provisioningEstimate",
    "leadTime",
    "A",
    "G",
    "C",
    "findings",
}

# Each example with the command line its header documents.
DOCUMENTED = {
    "tokyo-policy.yaml": ["--expire-after", "336h", "--termination-grace-period", "1h"],
    "weekend-policy.yaml": [
        "--expire-after",
        "20d",
        "--termination-grace-period",
        "2h",
        "--nodes",
        "20",
    ],
    "overnight-policy.yaml": [
        "--expire-after",
        "14d",
        "--termination-grace-period",
        "1h",
        "--nodes",
        "20",
    ],
    "auto-mode-policy.yaml": [
        "--expire-after",
        "20d",
        "--termination-grace-period",
        "24h",
        "--nodes",
        "20",
    ],
    "reference-noderotation-policy.yaml": [
        "--expire-after",
        "336h",
        "--termination-grace-period",
        "1h",
    ],
}


def check(*args: str | Path) -> tuple[int, str, str]:
    """Run ``fleetgate check`` in-process: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(app, ["check", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def check_json(*args: str | Path) -> tuple[int, Any]:
    """Run ``fleetgate check --format json`` and parse its output."""
    code, out, err = check(*args, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


ALL_EXAMPLES = sorted(p.name for p in EXAMPLES.glob("*policy*.yaml"))


def test_examples_include_the_documented_ones() -> None:
    assert set(DOCUMENTED) <= set(ALL_EXAMPLES)


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_check_runs_on_every_example(name: str) -> None:
    args = DOCUMENTED.get(name, ["--expire-after", "14d", "--termination-grace-period", "1h"])
    code, report = check_json(EXAMPLES / name, *args)
    reports = report if isinstance(report, list) else [report]
    for one in reports:
        assert set(one) == TOP_KEYS and set(one["inputs"]) == INPUT_KEYS
    fatal = any(f["severity"] == "fatal" for one in reports for f in one["findings"])
    assert code == (1 if fatal else 0)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_example_passes_its_documented_check(name: str) -> None:
    code, report = check_json(EXAMPLES / name, *DOCUMENTED[name])
    assert code == 0
    assert not [f for f in report["findings"] if f["severity"] == "fatal"]


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_example_renders_a_table(name: str) -> None:
    code, out, _ = check(EXAMPLES / name, *DOCUMENTED[name])
    assert code == 0
    for symbol in ("t_rot", "t_rot_est", "leadTime", "readyTimeout + tGP + Buffer"):
        assert symbol in out
    _, report = check_json(EXAMPLES / name, *DOCUMENTED[name])
    assert ("OK:" in out) == (not report["findings"])
    assert ("WARNING:" in out) == bool(report["findings"])


WEEKLY_FORTY = ["--expire-after", "14d", "--termination-grace-period", "1h", "--nodes", "40"]


def test_a_check_that_warns_says_warning_not_ok() -> None:
    # The case: nodes queue up towards their forced expiry (simulate shows 33 of 40
    # outliving expireAfter), so the verdict must not say the windows can rotate the pool.
    code, out, _ = check(EXAMPLES / "policy-weekly.yaml", *WEEKLY_FORTY)
    assert code == 0
    assert "ThroughputBelowArrival" in out
    assert "OK:" not in out
    assert "WARNING: rotations will start, but see the 4 warnings above" in " ".join(out.split())


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_strict_fails_on_a_warning(fmt: str) -> None:
    code, _, _ = check(EXAMPLES / "policy-weekly.yaml", *WEEKLY_FORTY, "--strict", "--format", fmt)
    assert code == 1


def test_strict_passes_a_check_without_findings() -> None:
    code, out, _ = check(
        EXAMPLES / "tokyo-policy.yaml", *DOCUMENTED["tokyo-policy.yaml"], "--strict"
    )
    assert code == 0 and "OK: the windows can rotate the pool" in out


def test_tokyo_is_the_v1_worked_example_in_seconds() -> None:
    _, report = check_json(EXAMPLES / "tokyo-policy.yaml", *DOCUMENTED["tokyo-policy.yaml"])
    assert report == {
        "inputs": {
            "e": 336 * H,
            "tgp": H,
            "tgpFallback": False,
            "p": 96 * H,
            "windowLen": 4 * H,
            "idleGap": 68 * H,
            "buffer": 120,
            "readyTimeout": 900,
            "cooldownAfter": 600,
            "failurePause": 600,
            "retryBackoff": 1800,
            "k": 2,
            "m": 1,
            "n": 0,
            "ageThresholdOverride": None,
        },
        "tRot": H + 17 * 60,
        "tRotEst": 900,
        "drainEstimate": 600,
        "provisioningEstimate": 300,
        "leadTime": 193 * H + 17 * 60,
        "A": 142 * H + 43 * 60,
        "G": 2,
        "C": 10,
        "findings": [],
    }


def test_reference_manifest_loads_unchanged_and_shows_the_split_gap() -> None:
    code, report = check_json(
        EXAMPLES / "reference-noderotation-policy.yaml",
        *DOCUMENTED["reference-noderotation-policy.yaml"],
    )
    assert code == 0
    assert (report["inputs"]["p"], report["inputs"]["windowLen"], report["inputs"]["idleGap"]) == (
        93 * H,
        59 * 60,
        60,
    )
    assert [f["code"] for f in report["findings"]] == ["RotationSpansNextWindow"]
    assert report["findings"][0]["side"] == "forecast"


def test_fatal_finding_exits_1() -> None:
    code, report = check_json(
        EXAMPLES / "weekend-policy.yaml",
        "--expire-after",
        "12d",
        "--termination-grace-period",
        "2h",
    )
    assert code == 1
    fatal = [f for f in report["findings"] if f["severity"] == "fatal"]
    assert [f["code"] for f in fatal] == ["ANonPositive"]
    assert fatal[0]["side"] == "deadline" and "longer expireAfter" in fatal[0]["message"]
    code, out, _ = check(EXAMPLES / "weekend-policy.yaml", "--expire-after", "12d")
    assert code == 1 and "ANonPositive" in out and "FATAL" in out


def test_omitted_grace_period_is_the_unset_fallback() -> None:
    _, report = check_json(EXAMPLES / "tokyo-policy.yaml", "--expire-after", "336h")
    assert report["inputs"]["tgp"] == H and report["inputs"]["tgpFallback"] is True
    assert [f["code"] for f in report["findings"]] == ["TGPUnset"]


def test_never_expiring_pool_derives_nothing() -> None:
    code, report = check_json(EXAMPLES / "tokyo-policy.yaml", "--expire-after", "Never")
    assert code == 0 and report["inputs"]["e"] is None
    assert (report["A"], report["C"], report["findings"]) == (0, 0, [])


def test_gap_is_null_when_always_open(tmp_path: Path) -> None:
    policy = tmp_path / "always.yaml"
    policy.write_text(
        "apiVersion: fleetgate.io/v1alpha1\nkind: RotationPolicy\nspec:\n  nodePoolSelector: {}\n"
        "  maintenanceWindows:\n  - {timezone: UTC, days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun],"
        " start: '00:00', end: '24:00'}\n"
    )
    _, report = check_json(policy, "--expire-after", "14d", "--termination-grace-period", "1h")
    assert report["inputs"]["idleGap"] is None and report["inputs"]["p"] == 60


def test_fractional_seconds_stay_numbers(tmp_path: Path) -> None:
    _, report = check_json(
        EXAMPLES / "tokyo-policy.yaml",
        "--expire-after",
        "336h",
        "--termination-grace-period",
        "1.5s",
    )
    assert report["inputs"]["tgp"] == 1.5


def test_multi_document_file_prints_a_list(tmp_path: Path) -> None:
    both = tmp_path / "both.yaml"
    both.write_text(
        (EXAMPLES / "tokyo-policy.yaml").read_text()
        + "\n---\n"
        + (EXAMPLES / "weekend-policy.yaml").read_text()
    )
    code, reports = check_json(both, "--expire-after", "14d", "--termination-grace-period", "1h")
    assert code == 0 and [r["inputs"]["p"] for r in reports] == [96 * H, 144 * H]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--expire-after", "fortnight"], "--expire-after: invalid duration 'fortnight'"),
        (["--expire-after", "0s"], "--expire-after: must be greater than 0"),
        (
            ["--expire-after", "14d", "--termination-grace-period", "-1h"],
            "--termination-grace-period: must not be negative",
        ),
        (
            ["--expire-after", "14d", "--termination-grace-period", "1 hour"],
            "--termination-grace-period: invalid duration '1 hour'",
        ),
    ],
)
def test_invalid_options_exit_2_naming_the_option(args: list[str], message: str) -> None:
    code, _, err = check(EXAMPLES / "tokyo-policy.yaml", *args)
    assert code == 2 and message in err


def test_invalid_policy_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (EXAMPLES / "tokyo-policy.yaml").read_text()
        + "  surge:\n    failurePause: 0s\n    readyTimout: 5m\n"
    )
    code, _, err = check(bad, "--expire-after", "14d")
    assert code == 2
    assert f"{bad}: spec.surge.readyTimout: unknown field" in err
    assert f"{bad}: spec.surge.failurePause: must be greater than 0" in err


def test_missing_file_and_bad_yaml_exit_2(tmp_path: Path) -> None:
    code, _, err = check(tmp_path / "nope.yaml", "--expire-after", "14d")
    assert code == 2 and "nope.yaml: cannot read" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed\n")
    code, _, err = check(broken, "--expire-after", "14d")
    assert code == 2 and "invalid YAML at line" in err


def test_the_check_result_report_is_what_the_cli_prints() -> None:
    path = EXAMPLES / "overnight-policy.yaml"
    _, printed = check_json(path, *DOCUMENTED["overnight-policy.yaml"])
    inputs = CheckInputs(timedelta(days=14), timedelta(hours=1), 20)
    assert check_policy(load_policy(path), inputs).report() == printed


def test_the_installed_console_script() -> None:
    fleetgate = Path(sys.executable).with_name("fleetgate")
    out = subprocess.run(
        [
            str(fleetgate),
            "check",
            str(EXAMPLES / "weekend-policy.yaml"),
            "--expire-after",
            "12d",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1 and json.loads(out.stdout)["A"] < 0


def test_output_takes_the_client_commands_formats() -> None:
    args = (EXAMPLES / "weekend-policy.yaml", "--expire-after", "12d")
    _, report = check_json(*args)
    code, out, _ = check(*args, "-o", "yaml")
    assert code == 1 and yaml.safe_load(out) == report
    code, out, _ = check(*args, "-o", "name")
    assert code == 1 and out.split() == list(dict.fromkeys(f["code"] for f in report["findings"]))
    _, table, _ = check(*args)
    assert check(*args, "-o", "wide")[1] == table
    # -o wins over --format, so a script can pass both.
    assert json.loads(check(*args, "--format", "table", "-o", "json")[1]) == report


def test_a_nodepools_budgets_are_laid_over_the_windows(tmp_path: Path) -> None:
    args = [EXAMPLES / "tokyo-policy.yaml", *DOCUMENTED["tokyo-policy.yaml"]]
    nodepool = EXAMPLES / "nodepool-budgets.yaml"
    code, report = check_json(*args, "--nodepool", nodepool)
    assert code == 0  # the policy alone is fine; the budgets' findings only warn
    budgets = report["budgets"]
    codes = [f["code"] for f in budgets["findings"]]
    assert "BudgetBlocksWindow" in codes and "BudgetShrinksWindows" in codes
    assert len(budgets["unusableWindows"]) >= 4
    assert len(budgets["effectiveWindows"]) < len(budgets["windows"])
    assert budgets["A"] < report["A"]
    code, out, _ = check(*args, "--nodepool", nodepool)
    assert code == 0 and "BudgetBlocksWindow" in out and "none" in out
    # Without --nodepool the report is what it was.
    assert "budgets" not in check_json(*args)[1]
    # A budget Karpenter's CRD refuses is refused, the file and field named.
    bad = tmp_path / "np.yaml"
    bad.write_text(
        "kind: NodePool\nspec: {disruption: {budgets: [{nodes: '0', schedule: '@every 1h', "
        "duration: 1h}]}}\n"
    )
    code, _, err = check(*args, "--nodepool", bad)
    assert code == 2 and "spec.disruption.budgets[0].schedule: must be a descriptor" in err


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ("\u00b9 * * * *", "(minute)"),  # a superscript one: isdigit(), yet no Go digit
        ("0 \u0663 * * *", "(hour)"),  # an Arabic-Indic three
        ("@hourly2", ""),
    ],
)
def test_a_schedule_karpenter_would_fail_closed_on_is_refused_by_name_not_crashed_on(
    tmp_path: Path, schedule: str, field: str
) -> None:
    # Karpenter's CRD admits these; robfig/cron cannot read them, so Karpenter would allow no
    # disruption of the pool at all. check says so as invalid input (exit 2), never a crash.
    args = [EXAMPLES / "tokyo-policy.yaml", *DOCUMENTED["tokyo-policy.yaml"]]
    bad = tmp_path / "np.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "kind": "NodePool",
                "spec": {
                    "disruption": {
                        "budgets": [{"nodes": "0", "schedule": schedule, "duration": "1h"}]
                    }
                },
            },
            allow_unicode=True,
        )
    )
    code, _, err = check(*args, "--nodepool", bad)
    assert code == 2, err
    assert f"spec.disruption.budgets[0].schedule {field}".strip() in err
    assert "no disruption" in err and "Traceback" not in err and "int()" not in err
