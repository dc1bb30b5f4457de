"""A migration that keeps node-rotation-controller's ``noderotation.io`` CRD installed: its
manifests are admitted and read, fleetgate's extensions are refused exactly as the migration guide
says, and the status fields its schema prunes are the guide's list.

The schema is NRC's own (``tests/fixtures/nrc``, written from its CRD's facts), never fleetgate's
copy of the group; the API server's structural validation is played by the chart tests' helper
(unknown fields are errors: ``kubectl apply`` validates strictly), with ``format: int32`` checked.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest
import yaml

from fleetgate.domain.rotation.manifest import read_manifest
from fleetgate.domain.rotation.status import PolicyStatus, ReadyCondition
from tests.deploy.helm import CHART
from tests.deploy.test_chart import (
    BASE,
    _defaulted,
    _openapi_to_jsonschema,
    _settings,
    crd,
    render,
)
from tests.nrc import FIXTURES

GUIDE = CHART.parents[2] / "docs" / "migrating-from-node-rotation-controller.md"
NRC_CRD = yaml.safe_load((FIXTURES / "rotationpolicies.noderotation.io.yaml").read_text())
SAMPLES = list(yaml.safe_load_all((FIXTURES / "samples.yaml").read_text()))
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


def _schema(document: dict[str, Any]) -> Any:
    return document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def admits(document: dict[str, Any], manifest: dict[str, Any]) -> str | None:
    """None when the CRD admits ``manifest``, else the API server's complaint."""
    try:
        jsonschema.validate(
            manifest, _openapi_to_jsonschema(_schema(document)), format_checker=FORMATS
        )
    except jsonschema.ValidationError as exc:
        return exc.message
    return None


def section(title: str) -> str:
    """The guide's text under the heading ``title``, up to the next heading."""
    text = GUIDE.read_text()
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#)", text, re.S | re.M)
    assert match, f"the guide has no section {title!r}"
    return match.group(1)


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["metadata"]["name"] for s in SAMPLES])
def test_nrcs_manifests_are_admitted_by_its_crd_and_by_the_charts_and_read_alike(
    sample: dict[str, Any],
) -> None:
    assert admits(NRC_CRD, sample) is None
    # The chart's copy of the group (what taking the CRD over installs) refuses none of them.
    assert admits(crd("noderotation.io"), sample) is None
    read, errors = read_manifest(_defaulted(_schema(NRC_CRD), sample))
    assert errors == [] and read.api_version == "noderotation.io/v1alpha1"
    ours, our_errors = read_manifest(_defaulted(_schema(crd("noderotation.io")), sample))
    assert our_errors == [] and ours == read  # whichever CRD defaulted it: the same policy


WINDOW = {"timezone": "UTC", "days": ["Sat"], "start": "02:00", "end": "06:00"}
EXCLUSION = {"start": "2026-12-27T00:00:00+09:00", "end": "2027-01-04T00:00:00+09:00"}

#: fleetgate's extensions, by the key the guide's table gives them, with what NRC's CRD does.
EXTENSIONS: list[tuple[str, dict[str, Any], str | None]] = [
    ("ageThreshold: 10d", {"ageThreshold": "10d"}, "'10d' does not match"),
    ('end: "24:00"', {"maintenanceWindows": [{**WINDOW, "end": "24:00"}]}, "'24:00' does not"),
    ("exclusions", {"exclusions": [EXCLUSION]}, "('exclusions' was unexpected)"),
    ("rotateDrifted", {"rotateDrifted": {"enabled": True}}, "('rotateDrifted' was unexpected)"),
    # NRC leaves surge durations and the order of a window's ends to its controller.
    (
        'start: "22:00", end: "04:00"',
        {"maintenanceWindows": [{**WINDOW, "start": "22:00", "end": "04:00"}]},
        None,
    ),
    ("surge.readyTimeout: 1d", {"surge": {"readyTimeout": "1d"}}, None),
]


@pytest.mark.parametrize(("key", "spec", "refusal"), EXTENSIONS, ids=[e[0] for e in EXTENSIONS])
def test_each_extension_fares_under_nrcs_crd_as_the_guide_says(
    key: str, spec: dict[str, Any], refusal: str | None
) -> None:
    manifest = copy.deepcopy(SAMPLES[0])
    manifest["spec"].update(spec)
    assert admits(crd("noderotation.io"), manifest) is None  # fine once the CRD is taken over
    _, errors = read_manifest(manifest)
    assert errors == [], errors  # and fleetgate reads it
    refused = admits(NRC_CRD, manifest)
    if refusal is None:
        assert refused is None
    else:
        assert refused is not None and refusal in refused, refused
    [row] = [r for r in section("What the reference's CRD refuses").splitlines() if f"`{key}`" in r]
    assert ("refused" if refusal else "admitted") in row.split("|")[2], row


def _pruned(value: Any, schema: Any, path: str) -> set[str]:
    """The paths under ``value`` a structural schema prunes (fields it does not declare)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties") or {}
        if "additionalProperties" in schema or schema.get("x-kubernetes-preserve-unknown-fields"):
            return set()
        out = {f"{path}.{k}" for k in value if k not in props}
        for key, sub in value.items():
            if key in props:
                out |= _pruned(sub, props[key], f"{path}.{key}")
        return out
    if isinstance(value, list) and "items" in schema:
        return {p for item in value for p in _pruned(item, schema["items"], f"{path}[]")}
    return set()


def test_the_status_fields_nrcs_crd_prunes_are_the_guides_list() -> None:
    status = PolicyStatus(
        observed_generation=3,
        matched_node_pools=("web", "api"),
        rotating_node_pools=("web",),
        ready=ReadyCondition(True, "Accepted", "valid", datetime(2026, 1, 4, tzinfo=UTC)),
        window_open=False,
        next_window=datetime(2026, 1, 7, 2, tzinfo=UTC),
        age_threshold="12d",
    ).as_manifest()
    schema = _schema(NRC_CRD)["properties"]["status"]
    pruned = _pruned(status, schema, "status")
    table = section("Status fields the reference's CRD drops")
    listed = set(re.findall(r"^\| `(status\.[A-Za-z.]+)`", table, re.M))
    assert pruned == listed
    assert len(pruned) == 5
    # What is left is a status NRC's schema accepts: the write goes through, nothing else lost.
    kept = {k: v for k, v in status.items() if f"status.{k}" not in pruned}
    manifest = {**SAMPLES[0], "status": kept}
    assert admits(NRC_CRD, manifest) is None
    assert kept["matchedNodePools"] == 2 and kept["rotatingNodePools"] == 1


def test_nrcs_crd_checks_its_integer_formats() -> None:
    too_big = copy.deepcopy(SAMPLES[0])
    too_big["spec"]["minRotationChances"] = 2**31
    refused = admits(NRC_CRD, too_big)
    assert refused is not None and "int32" in refused


def test_the_nrc_metrics_switch_reaches_the_controllers_settings() -> None:
    assert _settings(render(BASE)).controller.nrc_metrics is False
    on = render({**BASE, "metrics": {"nrcCompat": True}})
    assert _settings(on).controller.nrc_metrics is True


def test_the_guides_table_has_a_row_for_each_extension_tested_here_and_no_other() -> None:
    rows = re.findall(r"^\| `([^`]+)`", section("What the reference's CRD refuses"), re.M)
    assert sorted(rows) == sorted(key for key, _, _ in EXTENSIONS)


def test_the_guide_and_the_operator_docs_say_of_durations_what_the_code_does() -> None:
    # Issue 43.7: the guide once said every duration the reference takes is taken. What both
    # documents now name as refused is refused, and what they name as added is taken.
    rotation = (GUIDE.parent / "rotation.md").read_text()
    row = next(line for line in GUIDE.read_text().splitlines() if line.startswith("| Durations |"))
    for refused in ("1ns", "1.5us", "100000h"):
        assert f"`{refused}`" in row and f"`{refused}`" in rotation
        _, errors = read_manifest(
            {
                "apiVersion": "noderotation.io/v1alpha1",
                "kind": "RotationPolicy",
                "metadata": {"name": "p"},
                "spec": {
                    "nodePoolSelector": {},
                    "maintenanceWindows": [
                        {"timezone": "UTC", "days": ["Sat"], "start": "01:00", "end": "05:00"}
                    ],
                    "surge": {"readyTimeout": refused},
                },
            }
        )
        assert [e for e in errors if e.startswith("spec.surge.readyTimeout")], refused
    assert "`14d`" in row
