"""The shared bounds and names: the API's name rules are the domain's, amounts are JSON integers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from fleetgate.apps.api.schemas import (
    MAX_AMOUNT,
    Amount,
    CandidateBody,
    DimensionBody,
    NamespaceName,
    NodeName,
    RequestId,
)
from fleetgate.domain.capacity.denials import Denial, DimensionDetail
from fleetgate.domain.capacity.model import check_namespace, check_node_name, check_request_id
from tests.strategies import denials, dimension_details

NAMEISH = st.text(alphabet=st.sampled_from("aZ09._-/ \t!~é\x00"), max_size=260)


def accepts(adapter: TypeAdapter[Any], value: object) -> bool:
    """Whether the schema's model admits ``value``."""
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


@given(NAMEISH | NAMEISH.map(lambda s: s + "\n"))
def test_names_the_api_accepts_are_exactly_those_the_domain_accepts(name: str) -> None:
    assert accepts(TypeAdapter(NodeName), name) == domain_accepts(check_node_name, name)
    assert accepts(TypeAdapter(NamespaceName), name) == domain_accepts(check_namespace, name)
    assert accepts(TypeAdapter(RequestId), name) == domain_accepts(check_request_id, name)


def test_a_trailing_newline_is_refused_by_the_api_and_the_domain() -> None:
    for adapter in (TypeAdapter(NodeName), TypeAdapter(NamespaceName), TypeAdapter(RequestId)):
        assert not accepts(adapter, "abc\n")
    for check in (check_node_name, check_namespace, check_request_id):
        assert not domain_accepts(check, "abc\n")


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


@given(st.text(max_size=20), denials())
def test_candidate_wire_is_the_models_dump(node: str, denial: Denial) -> None:
    # The 507's candidates are built as plain data; they must be what the documented model dumps.
    assert CandidateBody.wire(node, denial) == CandidateBody.of(node, denial).model_dump()


@given(dimension_details())
def test_dimension_wire_is_the_models_dump(detail: DimensionDetail) -> None:
    wire = DimensionBody.wire(detail)
    dumped = DimensionBody.of(detail).model_dump()
    assert wire == dumped
    # Equal is not enough for JSON: 4 and 4.0 compare equal but render differently.
    assert [type(v) for v in wire.values()] == [type(v) for v in dumped.values()]
