"""``fleetgate simulate`` end to end through the CLI: formats, report, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from fleetgate.apps.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SPAN = ["--from", "2024-01-01T00:00:00Z", "--to", "2024-02-01T00:00:00Z"]


def simulate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_output_is_the_document_and_is_byte_identical_across_runs(tmp_path: Path) -> None:
    args = [
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-generated.yaml"),
        *SPAN,
        "--format",
        "json",
    ]
    code, out, _ = simulate(*args)
    assert code == 0
    doc = json.loads(out)
    assert set(doc) >= {
        "result",
        "events",
        "generations",
        "rotations",
        "windows",
        "diagnostics",
        "partial",
        "simulatedThrough",
    }
    assert doc["env"] == {"provisioning": "3m", "drain": "8m"}
    assert simulate(*args)[1] == out


def test_the_report_is_a_self_contained_page_with_a_timeline(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    code, out, _ = simulate(
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-listed.yaml"),
        *SPAN,
        "--report",
        str(report),
    )
    assert code == 0 and "no node outlived its expireAfter" in out
    page = report.read_text()
    assert page.count("<svg") == 1 and "ip-10-0-1-14" in page
    assert "<script" not in page and "src=" not in page and "href=" not in page


def test_breaches_exit_with_one_and_are_named(tmp_path: Path) -> None:
    code, out, _ = simulate(
        str(EXAMPLES / "policy-weekly.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-infeasible.yaml"),
        *SPAN,
    )
    assert code == 1
    assert "expire-after-breach" in out and "outlived their expireAfter" in out


def test_the_env_flags_override_the_fleet_file() -> None:
    code, out, _ = simulate(
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-generated.yaml"),
        *SPAN,
        "--format",
        "json",
        "--env-provisioning",
        "4m",
        "--env-drain",
        "12m",
    )
    assert code == 0 and json.loads(out)["env"] == {"provisioning": "4m", "drain": "12m"}


def test_bad_input_exits_with_two_naming_the_input(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("fleet: {generate: {count: 2}}\n")
    code, _, err = simulate(str(EXAMPLES / "policy-simulate.yaml"), "--fleet", str(fleet), *SPAN)
    assert code == 2 and "fleet.expireAfter" in err
    code, _, err = simulate(
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-generated.yaml"),
        "--from",
        "never",
        "--to",
        "2024-02-01T00:00:00Z",
    )
    assert code == 2 and "--from" in err
    code, _, err = simulate(
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-generated.yaml"),
        "--from",
        "2024-02-01T00:00:00Z",
        "--to",
        "2024-01-01T00:00:00Z",
    )
    assert code == 2 and "--to" in err


def test_a_bad_fleet_ledger_or_broken_yaml_is_one_line_exit_two(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    document = yaml.safe_load((EXAMPLES / "fleet-ledger.yaml").read_text(encoding="utf-8"))
    document["fleet"]["ledger"]["nodes"]["small-1"]["placements"][0]["cpu"] = 4
    fleet.write_text(yaml.safe_dump(document))
    policy = str(EXAMPLES / "policy-simulate.yaml")
    code, out, err = simulate(policy, "--fleet", str(fleet), *SPAN)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "fleet.ledger.nodes.small-1.placements[0].cpu: unknown key" in err
    fleet.write_text("fleet:\n  nodes: [{name: a\n  expireAfter: 14d\n")
    code, out, err = simulate(policy, "--fleet", str(fleet), *SPAN)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"--fleet {fleet}: invalid YAML at line 3, column" in err


def test_a_fatal_diagnostic_exits_with_one_even_without_a_breach() -> None:
    # Provisioning slower than readyTimeout is labelled fatal: every surge fails. Two days are
    # too short for any node to reach its deadline, so only the severity can set the status.
    code, out, _ = simulate(
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-listed.yaml"),
        "--from",
        "2024-01-01T00:00:00Z",
        "--to",
        "2024-01-03T00:00:00Z",
        "--env-provisioning",
        "30m",
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert doc["summary"]["breaches"] == 0
    fatal = [d["code"] for d in doc["diagnostics"] if d["severity"] == "fatal"]
    assert fatal == ["EnvProvisioningAboveReadyTimeout"]
    assert code == 1


def test_the_headline_counts_fleet_nodes_and_breaches_apart() -> None:
    code, out, _ = simulate(
        str(EXAMPLES / "policy-weekly.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-infeasible.yaml"),
        *SPAN,
        "--format",
        "json",
    )
    summary = json.loads(out)["summary"]
    assert code == 1 and summary["nodes"] == 40
    # Replacements breach too, so there are more breaches than fleet nodes that breached.
    assert 0 < summary["breachedNodes"] <= summary["nodes"] < summary["breaches"]
    code, table, _ = simulate(
        str(EXAMPLES / "policy-weekly.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-infeasible.yaml"),
        *SPAN,
    )
    assert (
        f"{summary['breachedNodes']} of 40 fleet node(s) outlived their expireAfter: "
        f"{summary['breaches']} breach(es) counting their replacements"
    ) in " ".join(table.split())


def test_the_karpenter_states_example_runs_and_the_table_shows_the_pool_finding() -> None:
    code, out, _ = simulate(
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-karpenter.yaml"),
        *SPAN,
    )
    assert code == 0, out  # Karpenter replaces the drifted and the disrupted node in time
    assert "pool-finding" in out and "NodeLimitReached" in out
    code, out, _ = simulate(
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-karpenter.yaml"),
        *SPAN,
        "--format",
        "json",
    )
    rotated = {r["node"] for r in json.loads(out)["rotations"]}
    assert code == 0 and not rotated & {"ip-10-0-1-11", "ip-10-0-1-12"}  # Karpenter's own


def test_output_yaml_is_the_json_document_and_name_its_codes() -> None:
    args = (
        str(EXAMPLES / "policy-simulate.yaml"),
        "--fleet",
        str(EXAMPLES / "fleet-listed.yaml"),
        "--from",
        "2024-01-01T00:00:00Z",
        "--to",
        "2024-01-03T00:00:00Z",
        "--env-provisioning",
        "30m",
    )
    _, out, _ = simulate(*args, "--format", "json")
    doc = json.loads(out)
    code, as_yaml, _ = simulate(*args, "-o", "yaml")
    assert code == 1 and yaml.safe_load(as_yaml) == doc
    codes = [n["code"] for n in (*doc["result"]["findings"], *doc["diagnostics"])]
    assert simulate(*args, "-o", "name")[1].split() == list(dict.fromkeys(codes))
    assert "EnvProvisioningAboveReadyTimeout" in codes
