"""One definition of a valid policy (:mod:`fleetgate.domain.rotation.fields`), one answer at every
entry point: ``fleetgate check`` on a file, ``fleetgate simulate``'s policy file, the API's check
with the manifest as an object and as YAML text, and the CRD's schema. Manifests are drawn inside
and beyond the bounds; every entry point must accept or refuse each alike, and a refusal must name
the fields that are out of bounds (issue 27.3; the durations as NRC reads them, issue 31.3).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings

from fleetgate.apps.cli.main import fleetgate
from fleetgate.apps.policyfile import PolicyFileError
from fleetgate.apps.simulate.command import build_inputs
from tests.apps.api.conftest import ADMIN, Api
from tests.deploy.test_chart import _openapi_to_jsonschema, crd
from tests.strategies import policy_manifests_near_bounds

CRD_SCHEMA = _openapi_to_jsonschema(crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
FLEET = "fleet: {labels: {team: web}, expireAfter: 14d, generate: {count: 1}}\n"
#: (accepted, the drawn fields a refusal names) per entry point.
Answer = tuple[bool, frozenset[str]]


def _named(text: str, drawn: set[str]) -> frozenset[str]:
    return frozenset(field for field in drawn if field in text)


def cli_check(path: Path, drawn: set[str]) -> Answer:
    """``fleetgate check --format json``: exit 0 or 1 with a report, or 2 naming the field."""
    result = CliRunner().invoke(
        fleetgate, ["check", str(path), "--expire-after", "14d", "--format", "json"]
    )
    if result.exit_code in (0, 1):
        assert "findings" in json.loads(result.stdout), result.output  # a report, not a crash
        return True, frozenset()
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    return False, _named(result.stderr, drawn)


def simulate_policy(path: Path, fleet: Path, drawn: set[str]) -> Answer:
    """``fleetgate simulate``'s reading of its inputs (the run itself is not the subject)."""
    try:
        build_inputs(path, fleet, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", None, None)
    except PolicyFileError as exc:
        return False, _named(str(exc), drawn)
    return True, frozenset()


async def api_check(api: Api, policy: dict[str, Any] | str, drawn: set[str]) -> Answer:
    """``POST /v1/rotation/check``: 200, or 422 naming the field (``policy.spec...``)."""
    body = {"policy": policy, "expire_after": "14d"}
    r = await api.client.post("/v1/rotation/check", json=body, headers=ADMIN)
    if r.status_code == 200:
        return True, frozenset()
    assert r.status_code == 422, r.text
    return False, _named(" ".join(f["field"] for f in r.json()["fields"]), drawn)


def crd_admission(manifest: dict[str, Any], drawn: set[str]) -> Answer:
    """The CRD's schema, read as the API server reads it (the tests' existing helper)."""
    errors = list(jsonschema.Draft202012Validator(CRD_SCHEMA).iter_errors(manifest))
    paths = " ".join(".".join(map(str, e.absolute_path)) for e in errors)
    return not errors, _named(paths, drawn)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=policy_manifests_near_bounds())
# The cases: a number past the bound (a 500 and "Python int too large" before), NRC's
# unitless "0" for cooldownAfter (refused by the CRD before), and Go's other forms.
@example(case=({"minRotationChances": 999_999_999}, {"spec.minRotationChances"}))
@example(case=({"surge": {"cooldownAfter": "0"}}, {"spec.surge.cooldownAfter"}))
@example(case=({"surge": {"readyTimeout": "+1.5h", "retryBackoff": ".5h"}}, set()))
@example(case=({"surge": {"readyTimeout": "0", "cooldownAfter": "-0s"}}, set()))
@example(case=({"ageThreshold": "1000d", "surge": {"failurePause": "300ms"}}, set()))
async def test_every_entry_point_gives_the_same_answer_naming_the_field(
    sqlite_api: Api, case: tuple[dict[str, Any], set[str]]
) -> None:
    manifest, drawn = case
    if "apiVersion" not in manifest:  # an @example: a change to the strategy's valid manifest
        manifest, drawn = _changed(manifest, drawn)
    text = yaml.safe_dump(manifest, allow_unicode=True)
    with tempfile.TemporaryDirectory() as directory:
        path, fleet = _files(Path(directory), text)
        answers = {
            "fleetgate check": cli_check(path, drawn),
            "fleetgate simulate": simulate_policy(path, fleet, drawn),
            "API object": await api_check(sqlite_api, manifest, drawn),
            "API YAML text": await api_check(sqlite_api, text, drawn),
            "CRD": crd_admission(manifest, drawn),
        }
    assert len(set(answers.values())) == 1, (manifest["spec"], answers)
    accepted, named = answers["CRD"]
    assert accepted or named, (manifest["spec"], answers)  # a refusal names the field


def _files(directory: Path, text: str) -> tuple[Path, Path]:
    """The policy file with ``text``, and a fleet file its selector selects."""
    path, fleet = directory / "policy.yaml", directory / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    fleet.write_text(FLEET, encoding="utf-8")
    return path, fleet


def _changed(change: dict[str, Any], drawn: set[str]) -> tuple[dict[str, Any], set[str]]:
    """The strategy's always-valid manifest with ``change`` in its spec."""
    spec: dict[str, Any] = {
        "nodePoolSelector": {"matchLabels": {"team": "web"}},
        "maintenanceWindows": [
            {"timezone": "Asia/Tokyo", "days": ["Wed", "Sat"], "start": "02:00", "end": "06:00"}
        ],
        **change,
    }
    surge = {f"spec.surge.{name}" for name in change.get("surge", {})}
    named = drawn | surge | {f"spec.{key}" for key in change if key != "surge"}
    manifest = {"apiVersion": "fleetgate.io/v1alpha1", "kind": "RotationPolicy", "spec": spec}
    return manifest, named


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"minRotationChances": 999_999_999}, "spec.minRotationChances", "must be at most 1000"),
        ({"surge": {"cooldownAfter": "-1m"}}, "spec.surge.cooldownAfter", "must not be negative"),
        ({"surge": {"readyTimeout": "0"}}, "spec.surge.readyTimeout", "must be greater than 0"),
        ({"surge": {"readyTimeout": "1ns"}}, "spec.surge.readyTimeout", "finer than a microsec"),
        ({"ageThreshold": "-1h"}, "spec.ageThreshold", "must be"),
        ({"surge": {"retryBackoff": "100000h"}}, "spec.surge.retryBackoff", "at most 3 for d"),
    ],
)
def test_check_refuses_with_exit_2_and_one_line_naming_the_field(
    tmp_path: Path, change: dict[str, Any], field: str, reason: str
) -> None:
    manifest, _ = _changed(change, set())
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    result = CliRunner().invoke(fleetgate, ["check", str(path), "--expire-after", "14d"])
    assert result.exit_code == 2, result.output
    assert f"{path}: {field}: " in result.stderr and reason in " ".join(result.stderr.split())
