"""One schema of a RotationPolicy (:mod:`fleetgate.domain.rotation.schema`), and everything held to
it field by field: the chart's CRDs are generated from it (the committed files must be what the
generator writes), and the domain's reader (:mod:`fleetgate.domain.rotation.manifest`) takes every
field as the schema states it: its type, default, bounds, pattern, enum and required-ness.

Where the reader is narrower than the schema it is on purpose and listed in NARROWER: the CRD
leaves those checks to the controller, which reports them by field. (The API's published schema
is held to the same one in tests/apps/api/schemas/test_policy.py.)
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetgate.adapters.karpenter import crd as generator
from fleetgate.domain.rotation import fields
from fleetgate.domain.rotation.manifest import policy_from_manifest, read_manifest
from fleetgate.domain.rotation.policy import PolicyError
from fleetgate.domain.rotation.schema import POLICY_SCHEMA, SPEC_SCHEMA, properties
from tests.adapters.karpenter.kubeapi_schema import go_regex
from tests.deploy.test_chart import CHART, _openapi_to_jsonschema, crd
from tests.strategies import matching

CRDS = Path(CHART) / "crds"
#: A manifest with every field present (one item in every list), valid throughout.
FULL: dict[str, Any] = {
    "apiVersion": "fleetgate.io/v1alpha1",
    "kind": "RotationPolicy",
    "metadata": {"name": "full"},
    "spec": {
        "nodePoolSelector": {
            "matchLabels": {"team": "web"},
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
        },
        "ageThreshold": "240h",
        "minRotationChances": 2,
        "maintenanceWindows": [
            {"timezone": "UTC", "days": ["Sat"], "start": "01:00", "end": "05:00"}
        ],
        "exclusions": [{"start": "2024-12-24T00:00:00Z", "end": "2024-12-26T00:00:00Z"}],
        "surge": {
            "maxUnavailable": 1,
            "readyTimeout": "15m",
            "cooldownAfter": "10m",
            "failurePause": "20m",
            "retryBackoff": "30m",
            "drainEstimate": "10m",
            "provisioningEstimate": "5m",
            "matchNodeRequirements": {"required": ["kubernetes.io/arch"], "preferred": ["x"]},
            "forcefulFallback": {"enabled": False},
        },
        "prePull": {"enabled": False},
        "rotateDrifted": {"enabled": False},
        "ignoreDisruptionBudgets": {"enabled": False},
    },
}
#: Fields the reader judges more narrowly than the schema does (the CRD leaves the meaning to
#: the controller): an IANA zone that loads, RFC3339 instants, an empty required-keys list
#: defaulted (spec §12.5).
NARROWER = {
    "spec.maintenanceWindows[0].timezone",
    "spec.exclusions[0].start",
    "spec.exclusions[0].end",
    "spec.surge.matchNodeRequirements.required",
}
WRONG_TYPE = {"string": 5, "integer": "two", "boolean": "yes", "array": "x", "object": "x"}


def walk(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every field below ``node`` with its manifest path (a list's first item as ``[0]``)."""
    for name, child in (node.get("properties") or {}).items():
        here = f"{path}.{name}"
        yield here, child
        if child.get("type") == "array":
            if child["items"].get("type") == "object":
                yield from walk(child["items"], f"{here}[0]")
        else:
            yield from walk(child, here)


FIELDS = dict(walk(SPEC_SCHEMA, "spec"))


def _parent_and_key(document: dict[str, Any], path: str) -> tuple[Any, Any]:
    """The container of the field at ``path`` and its key there (an index for ``[n]``)."""
    parts: list[Any] = [
        int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"[^.\[\]]+|\[\d+\]", path)
    ]
    node: Any = document
    for part in parts[:-1]:
        node = node[part]
    return node, parts[-1]


def with_value(path: str, value: Any) -> dict[str, Any]:
    """FULL with the field at ``path`` set to ``value``."""
    document = copy.deepcopy(FULL)
    parent, key = _parent_and_key(document, path)
    parent[key] = value
    return document


def without(path: str) -> dict[str, Any]:
    """FULL without the field at ``path``."""
    document = copy.deepcopy(FULL)
    parent, key = _parent_and_key(document, path)
    del parent[key]
    return document


def errors_at(document: dict[str, Any], path: str) -> list[str]:
    """The reader's complaints (reading and judging) about the field at ``path`` or below it."""
    try:
        policy_from_manifest(document)
    except PolicyError as refused:
        return [e for e in refused.errors if e.partition(": ")[0].startswith(path)]
    return []


# --- the CRDs are generated from the one schema ------------------------------------------------


@pytest.mark.parametrize("group", sorted(generator.GROUPS))
def test_the_committed_crd_is_the_generated_one(group: str) -> None:
    committed = (CRDS / f"rotationpolicies.{group}.yaml").read_text()
    assert committed == generator.render(group), (
        "regenerate: python -m fleetgate.adapters.karpenter.crd deploy/helm/fleetgate/crds"
    )
    assert crd(group)["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == POLICY_SCHEMA


def test_the_full_manifest_is_valid_everywhere() -> None:
    jsonschema.validate(FULL, _openapi_to_jsonschema(POLICY_SCHEMA))
    assert read_manifest(FULL)[1] == []


@pytest.mark.parametrize("name", sorted(fields.SURGE_DURATIONS))
def test_each_surge_duration_has_the_domains_pattern(name: str) -> None:
    assert FIELDS[f"spec.surge.{name}"]["pattern"] == fields.SURGE_DURATIONS[name]


def test_the_numbers_have_the_domains_bounds() -> None:
    chances = FIELDS["spec.minRotationChances"]
    assert (chances["minimum"], chances["maximum"]) == (
        fields.MIN_ROTATION_CHANCES,
        fields.MAX_ROTATION_CHANCES,
    )
    assert chances["format"] == "int32"  # as NRC's CRD has it; 1000 is well inside
    unavailable = FIELDS["spec.surge.maxUnavailable"]
    assert unavailable["minimum"] == unavailable["maximum"] == fields.MAX_UNAVAILABLE
    assert FIELDS["spec.ageThreshold"]["pattern"] == fields.AGE_THRESHOLD


# --- the reader takes every field as the schema states it ---------------------------------------


def _objects() -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every object of the manifest's spec with its path (a list's first item as ``[0]``)."""
    yield "spec", SPEC_SCHEMA
    for path, node in FIELDS.items():
        if node.get("type") == "object" and "properties" in node:
            yield path, node
        if node.get("type") == "array" and "properties" in node["items"]:
            yield f"{path}[0]", node["items"]


OBJECTS = dict(_objects())


@pytest.mark.parametrize("path", list(OBJECTS))
def test_the_reader_knows_exactly_the_schemas_fields(path: str) -> None:
    assert properties(path.replace("[0]", "")) == set(OBJECTS[path]["properties"])
    document = copy.deepcopy(FULL)
    parent, key = _parent_and_key(document, path)
    parent[key]["typo"] = 1  # the API server would prune it; the reader names it
    assert errors_at(document, f"{path}.typo") == [f"{path}.typo: unknown field"]


def _required() -> Iterator[str]:
    yield from (f"spec.{k}" for k in SPEC_SCHEMA["required"])
    for path, node in FIELDS.items():
        items = node.get("items", node) if node.get("type") == "array" else node
        for key in items.get("required", ()):
            yield f"{path}[0].{key}" if node.get("type") == "array" else f"{path}.{key}"


@pytest.mark.parametrize("path", list(_required()))
def test_every_required_field_is_required_by_name(path: str) -> None:
    # "is required", or for the list of windows "must have at least one entry"
    assert errors_at(without(path), path), path


@pytest.mark.parametrize("path", [p for p, n in FIELDS.items() if "default" in n])
def test_an_absent_field_reads_as_the_schemas_default(path: str) -> None:
    absent, errors = read_manifest(without(path))
    explicit, explicit_errors = read_manifest(with_value(path, FIELDS[path]["default"]))
    assert errors == explicit_errors == []
    assert absent == explicit


@pytest.mark.parametrize(
    "path", [p for p, n in FIELDS.items() if "enum" in n or "enum" in n.get("items", {})]
)
def test_every_enum_value_and_only_those_are_taken(path: str) -> None:
    node = FIELDS[path]
    listed = node.get("type") == "array"
    values = (node["items"] if listed else node)["enum"]
    for value in values:
        document = with_value(path, [value] if listed else value)
        assert errors_at(document, path) == [], value
    refused = with_value(path, ["Someday"] if listed else "Someday")
    assert errors_at(refused, path), path


@pytest.mark.parametrize("path", [p for p, n in FIELDS.items() if "minimum" in n])
def test_every_bound_is_the_readers(path: str) -> None:
    low, high = FIELDS[path]["minimum"], FIELDS[path]["maximum"]
    for inside in (low, high):
        assert errors_at(with_value(path, inside), path) == [], inside
    for outside in (low - 1, high + 1):
        assert errors_at(with_value(path, outside), path), outside


@pytest.mark.parametrize("path", [p for p, n in FIELDS.items() if "minItems" in n])
def test_every_list_minimum_is_the_readers(path: str) -> None:
    assert FIELDS[path]["minItems"] == 1
    assert errors_at(with_value(path, []), path), path


_PATTERNED = [p for p, n in FIELDS.items() if "pattern" in n and p not in NARROWER]


@pytest.mark.parametrize("path", _PATTERNED)
def test_what_a_pattern_admits_the_reader_takes(path: str) -> None:
    pattern = FIELDS[path]["pattern"]

    @settings(max_examples=60, deadline=None)
    @given(matching(pattern))
    def check(text: str) -> None:
        if path.endswith(".end") and text == FULL["spec"]["maintenanceWindows"][0]["start"]:
            return  # the one rule relating two fields: a window's end differs from its start
        assert errors_at(with_value(path, text), path) == [], text

    check()


@pytest.mark.parametrize("path", _PATTERNED)
def test_what_a_pattern_refuses_the_reader_refuses(path: str) -> None:
    pattern = FIELDS[path]["pattern"]
    taken = str(FULL_VALUES[path])
    near = [taken + "\n", " " + taken, taken + " ", taken + "x", "", "\u0663" + taken]

    @settings(max_examples=60, deadline=None)
    @given(st.one_of(st.sampled_from(near), st.text(max_size=12)))
    def check(text: str) -> None:
        if go_regex(pattern).search(text):
            return  # the CRD takes it: not a refusal to compare
        assert errors_at(with_value(path, text), path), text

    check()


@pytest.mark.parametrize("path", list(FIELDS))
def test_a_value_of_the_wrong_type_is_refused_by_name(path: str) -> None:
    wrong = WRONG_TYPE[FIELDS[path]["type"]]
    assert errors_at(with_value(path, wrong), path), (path, wrong)


def _values() -> dict[str, Any]:
    out = {}
    for path in FIELDS:
        parent, key = _parent_and_key(FULL, path)
        out[path] = parent[key]
    return out


FULL_VALUES = _values()
