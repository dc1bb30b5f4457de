"""The CRD states a policy's bounded fields as the domain's one definition does
(:mod:`fleetgate.domain.rotation.fields`): the same duration patterns, the same number bounds.
The API's schema is built from that definition; the CRD, being YAML, is checked against it."""

from __future__ import annotations

from typing import Any

import pytest

from fleetgate.domain.rotation import fields
from tests.deploy.test_chart import crd


def _spec() -> dict[str, Any]:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec: dict[str, Any] = schema["properties"]["spec"]["properties"]
    return spec


@pytest.mark.parametrize("name", sorted(fields.SURGE_DURATIONS))
def test_each_surge_duration_has_the_domains_pattern(name: str) -> None:
    assert _spec()["surge"]["properties"][name]["pattern"] == fields.SURGE_DURATIONS[name]


def test_the_age_threshold_has_the_domains_pattern() -> None:
    assert _spec()["ageThreshold"]["pattern"] == fields.AGE_THRESHOLD


def test_the_numbers_have_the_domains_bounds() -> None:
    chances = _spec()["minRotationChances"]
    assert (chances["minimum"], chances["maximum"]) == (
        fields.MIN_ROTATION_CHANCES,
        fields.MAX_ROTATION_CHANCES,
    )
    assert chances["format"] == "int32"  # as NRC's CRD has it; 1000 is well inside
    unavailable = _spec()["surge"]["properties"]["maxUnavailable"]
    assert unavailable["minimum"] == unavailable["maximum"] == fields.MAX_UNAVAILABLE
