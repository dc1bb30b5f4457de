"""Claim bodies: exactly one expiry form on create, a field mask on update, whole seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from fleetgate.apps.api.schemas import MAX_CLAIM_SECONDS, ClaimCreate, ClaimPatch, seconds_until

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_a_claim_needs_exactly_one_expiry_form() -> None:
    size = {"cpus": 1, "memory_mb": 1, "disk_gb": 1}
    assert ClaimCreate.model_validate({**size, "expires_in_seconds": 60}).expires_in(NOW) == 60
    at = (NOW + timedelta(seconds=90)).isoformat()
    assert ClaimCreate.model_validate({**size, "expires_at": at}).expires_in(NOW) == 90
    for bad in ({}, {"expires_in_seconds": 60, "expires_at": at}, {"expires_at": "2030-01-01"}):
        with pytest.raises(ValidationError):
            ClaimCreate.model_validate({**size, **bad})


def test_a_patch_masks_only_the_fields_given() -> None:
    update = ClaimPatch.model_validate({"cpus": 3}).update(NOW)
    assert update.fields == {"limit_cpus"} and update.limit_cpus == 3
    redated = ClaimPatch.model_validate({"expires_at": (NOW + timedelta(hours=1)).isoformat()})
    assert redated.update(NOW).expires_in_seconds == 3600
    for bad in ({}, {"cpus": None}, {"expires_in_seconds": 5, "expires_at": NOW.isoformat()}):
        with pytest.raises(ValidationError):
            ClaimPatch.model_validate(bad)


def test_seconds_until_rounds_up_and_refuses_the_past() -> None:
    assert seconds_until(NOW + timedelta(seconds=1, milliseconds=200), NOW) == 2
    for at in (NOW, NOW - timedelta(days=1), NOW + timedelta(days=20 * 366)):
        with pytest.raises(ValueError, match="expires_at"):
            seconds_until(at, NOW)


def test_the_published_schema_states_the_expiry_rule_json_schema_cannot() -> None:
    # "After now" has no JSON Schema keyword: the description is what tells a client (and the
    # fuzz test, which draws its positive expires_at values from this range).
    for model in (ClaimCreate, ClaimPatch):
        described = model.model_json_schema()["properties"]["expires_at"]["description"]
        assert "at least 1 s" in described and f"at most {MAX_CLAIM_SECONDS} s" in described
        assert "422 naming expires_at" in described
