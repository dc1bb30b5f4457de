"""The request schemas: bounds and names that mirror the domain's rules, JSON integers, claims'
expiry forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from fleetgate.apps.api.schemas import (
    MAX_AMOUNT,
    Amount,
    ClaimCreate,
    ClaimPatch,
    NamespaceName,
    NodeName,
    RequestId,
    seconds_until,
)
from fleetgate.domain.capacity.model import check_namespace, check_node_name, check_request_id

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NAMEISH = st.text(alphabet=st.sampled_from("aZ09._-/ \t!~é\x00"), max_size=260)


def accepts(adapter: TypeAdapter[Any], value: object) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


def domain_accepts(check: Any, value: str) -> bool:
    try:
        check(value)
    except ValueError:
        return False
    return True


# The domain's patterns end in ``$``, which Python also matches before a final newline; the API
# refuses such names outright, so a trailing newline is left out of the comparison.
@given(NAMEISH.filter(lambda s: not s.endswith("\n")))
def test_names_the_api_accepts_are_exactly_those_the_domain_accepts(name: str) -> None:
    assert accepts(TypeAdapter(NodeName), name) == domain_accepts(check_node_name, name)
    assert accepts(TypeAdapter(NamespaceName), name) == domain_accepts(check_namespace, name)
    assert accepts(TypeAdapter(RequestId), name) == domain_accepts(check_request_id, name)


def test_a_trailing_newline_is_refused_by_the_api() -> None:
    for adapter in (TypeAdapter(NodeName), TypeAdapter(NamespaceName), TypeAdapter(RequestId)):
        assert not accepts(adapter, "abc\n")


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (0, True),
        (4, True),
        (4.0, True),
        (MAX_AMOUNT, True),
        (MAX_AMOUNT + 1, False),
        (-1, False),
        (4.5, False),
        (True, False),
        ("4", False),
        (float("nan"), False),
        (None, False),
    ],
)
def test_amounts_are_bounded_json_integers(value: object, ok: bool) -> None:
    adapter: TypeAdapter[int] = TypeAdapter(Amount)
    assert accepts(adapter, value) == ok
    if ok:
        assert type(adapter.validate_python(value)) is int


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
