"""The API's schema for ``policy`` against the domain's one schema of a policy
(``fleetgate.domain.rotation.schema``, from which the CRDs are generated): the same manifest, said
the same way.

Walks the domain's schema and the schema the API publishes side by side. At every node: the same
type, the same properties and required fields, the same enums and clock patterns; where the API is
narrower (durations, bounds), it must admit nothing the schema refuses; every API object refuses
unknown fields, which Kubernetes would prune; and the API restates no default (an absent field
stays absent, and the domain's reader gives it the schema's default). The narrowings themselves
are the ones the module docstring of ``fleetgate.apps.api.schemas.policy`` lists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from pydantic import ValidationError

from fleetgate.apps.api.schemas.policy import RotationPolicyManifest, time_zones
from fleetgate.domain.rotation.manifest import policy_from_manifest
from fleetgate.domain.rotation.schema import METADATA_FIELDS, SPEC_SCHEMA, TOP_FIELDS
from fleetgate.domain.rotation.windows import load_zone
from tests.strategies import matching

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = ROOT / "examples"
SCHEMA = RotationPolicyManifest.model_json_schema()


def crd_spec() -> dict[str, Any]:
    """The domain's schema of ``spec`` (the CRDs' too: they are generated from it)."""
    return dict(SPEC_SCHEMA)


def resolved(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` followed and an optional field's ``| null`` taken off."""
    while True:
        if "$ref" in node:
            node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in node and {"type": "null"} in node["anyOf"]:
            (node,) = [branch for branch in node["anyOf"] if branch != {"type": "null"}]
        else:
            return node


def branches(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The members of a discriminated union (``oneOf``), or the node itself."""
    return [resolved(branch) for branch in node.get("oneOf", [node])]


def _admits_only_what_the_crd_admits(api_pattern: str, crd_pattern: str, path: str) -> None:
    @settings(max_examples=300, deadline=None)
    @given(matching(api_pattern))
    def check(text: str) -> None:
        assert re.fullmatch(crd_pattern, text), f"{path}: {text!r} matches the API, not the CRD"

    check()


def compare(crd: dict[str, Any], api: dict[str, Any], path: str) -> list[str]:
    """Every place below ``path`` where the API's schema says other than the CRD's."""
    found: list[str] = []
    members = branches(api)
    for member in members:
        if member.get("type") != crd.get("type"):
            found.append(f"{path}: type {member.get('type')} vs the CRD's {crd.get('type')}")
    if crd.get("type") == "object" and "properties" in crd:
        for member in members:
            if member.get("additionalProperties") is not False:
                found.append(f"{path}: the API must refuse unknown fields")
            if set(member["properties"]) != set(crd["properties"]):
                found.append(f"{path}: properties {sorted(member['properties'])}")
            required = set(member.get("required", []))
            if len(members) > 1:
                required -= {"values"}  # In/NotIn need values: the CRD leaves that to the server
            if required != set(crd.get("required", [])):
                found.append(f"{path}: required {sorted(required)} vs {crd.get('required')}")
        for name, crd_child in crd["properties"].items():
            if name == "operator":  # the discriminator: the members' values together
                enums = [v for m in members for v in resolved(m["properties"][name])["enum"]]
                if sorted(enums) != sorted(crd_child["enum"]):
                    found.append(f"{path}.operator: {enums} vs {crd_child['enum']}")
                continue
            if name == "values" and len(members) > 1:
                continue  # required for In/NotIn, empty for Exists/DoesNotExist: see below
            raw = members[0]["properties"][name]
            if raw.get("default") is not None:  # absent stays absent: the reader defaults it
                found.append(f"{path}.{name}: the API restates a default ({raw['default']!r})")
            found += compare(crd_child, resolved(raw), f"{path}.{name}")
    map_values = crd.get("additionalProperties")
    if isinstance(map_values, dict) and api.get("additionalProperties") != map_values:
        found.append(f"{path}: map values {api.get('additionalProperties')}")
    if crd.get("type") == "array":
        found += compare(crd["items"], resolved(api["items"]), f"{path}[]")
        if api.get("minItems", 0) < crd.get("minItems", 0):
            found.append(f"{path}: minItems {api.get('minItems')} below the CRD's")
    if "enum" in crd and sorted(api.get("enum", [])) != sorted(crd["enum"]):
        found.append(f"{path}: enum {api.get('enum')} vs {crd['enum']}")
    for bound, narrower in (("minimum", max), ("maximum", min)):
        if bound in crd and narrower(api.get(bound, crd[bound]), crd[bound]) != api.get(bound):
            found.append(f"{path}: {bound} {api.get(bound)} wider than the CRD's {crd[bound]}")
    if "pattern" in crd:
        if "pattern" not in api:
            found.append(f"{path}: no pattern, the CRD has {crd['pattern']}")
        elif api["pattern"] != crd["pattern"]:
            _admits_only_what_the_crd_admits(api["pattern"], crd["pattern"], path)
    return found


def test_the_api_says_of_a_policy_spec_what_the_crd_says() -> None:
    api_spec = resolved(SCHEMA["properties"]["spec"])
    assert compare(crd_spec(), api_spec, "spec") == []


def test_the_narrowings_are_the_server_rules_the_crd_leaves_to_the_controller() -> None:
    spec = resolved(SCHEMA["properties"]["spec"])
    window = resolved(resolved(spec["properties"]["maintenanceWindows"])["items"])
    assert resolved(window["properties"]["days"])["uniqueItems"] is True
    assert resolved(window["properties"]["timezone"])["enum"] == list(time_zones())
    assert "differ from start" in window["properties"]["end"]["description"]
    pre_pull = resolved(spec["properties"]["prePull"])
    assert resolved(pre_pull["properties"]["enabled"])["const"] is False  # the CRD's CEL rule
    expressions = resolved(
        resolved(spec["properties"]["nodePoolSelector"])["properties"]["matchExpressions"]
    )
    by_operator = {
        op: member
        for member in branches(resolved(expressions["items"]))
        for op in resolved(member["properties"]["operator"])["enum"]
    }
    assert by_operator["In"]["properties"]["values"]["minItems"] == 1
    assert resolved(by_operator["Exists"]["properties"]["values"])["maxItems"] == 0
    # The top of the manifest: what the server reads besides spec.
    assert set(SCHEMA["required"]) == {"apiVersion", "kind", "spec"}
    assert SCHEMA["additionalProperties"] is False


def test_the_top_and_the_metadata_are_the_domains() -> None:
    assert set(SCHEMA["properties"]) == set(TOP_FIELDS)
    metadata = resolved(SCHEMA["properties"]["metadata"])
    assert set(metadata["properties"]) == set(METADATA_FIELDS)


def test_every_listed_time_zone_loads() -> None:
    zones = time_zones()
    assert "Asia/Tokyo" in zones and "UTC" in zones
    assert all(load_zone(name) is not None for name in zones)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*policy*.yaml")), ids=lambda p: p.name)
def test_every_example_policy_is_valid_under_the_api_schema(path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        manifest = RotationPolicyManifest.model_validate(document)
        assert policy_from_manifest(manifest.document()).maintenance_windows


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"minRotationChances": True}, "minRotationChances"),
        ({"minRotationChances": 2.5}, "minRotationChances"),
        ({"surge": {"readyTimeout": "0m"}}, "readyTimeout"),
        ({"surge": {"readyTimeout": "1ns"}}, "readyTimeout"),
        ({"prePull": {"enabled": True}}, "enabled"),
        ({"typo": 1}, "typo"),
        ({"exclusions": [{"start": 0, "end": "2024-01-01T00:00:00Z"}]}, "start"),
    ],
)
def test_what_the_schema_refuses_the_model_refuses(change: dict[str, Any], field: str) -> None:
    document = yaml.safe_load((EXAMPLES / "tokyo-policy.yaml").read_text())
    document["spec"].update(change)
    with pytest.raises(ValidationError) as refused:
        RotationPolicyManifest.model_validate(document)
    assert field in {str(part) for error in refused.value.errors() for part in error["loc"]}


def test_a_whole_number_written_as_a_float_is_an_integer() -> None:
    # JSON Schema's ``integer`` (and the Kubernetes API server) take 188.0; found by schemathesis.
    document = yaml.safe_load((EXAMPLES / "tokyo-policy.yaml").read_text())
    document["spec"]["minRotationChances"] = 188.0
    manifest = RotationPolicyManifest.model_validate(document)
    assert policy_from_manifest(manifest.document()).min_rotation_chances == 188
