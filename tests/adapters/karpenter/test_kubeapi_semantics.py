"""The local API server follows Kubernetes' patch and selector rules (so tests of the gateway
against it mean what they say)."""

from __future__ import annotations

import pytest

from tests.adapters.karpenter.kubeapi_semantics import (
    KubeError,
    json_patch,
    matches,
    merge_patch,
    parse_field_selector,
    parse_label_selector,
)


def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}
    assert merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3], "k": None}) == {
        "a": {"c": 2, "d": 3},
        "l": [3],
    }
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}  # not modified in place


def test_json_patch_ops_and_escapes() -> None:
    doc = {"metadata": {"annotations": {"a/b": "1"}}, "l": [1]}
    out = json_patch(
        doc,
        [
            {"op": "test", "path": "/metadata/annotations/a~1b", "value": "1"},
            {"op": "remove", "path": "/metadata/annotations/a~1b"},
            {"op": "add", "path": "/l/-", "value": 2},
            {"op": "replace", "path": "/l/0", "value": 0},
        ],
    )
    assert out == {"metadata": {"annotations": {}}, "l": [0, 2]}
    with pytest.raises(KubeError):
        json_patch(doc, [{"op": "test", "path": "/l/0", "value": 9}])


OBJ = {"metadata": {"name": "n", "labels": {"pool": "a", "zone": "z1"}}, "spec": {"nodeName": "x"}}


@pytest.mark.parametrize(
    ("selector", "hit"),
    [
        ("pool=a", True),
        ("pool==a", True),
        ("pool!=a", False),
        ("pool", True),
        ("!pool", False),
        ("missing", False),
        ("!missing", True),
        ("zone in (z1,z2)", True),
        ("zone notin (z1)", False),
        ("pool=a,zone=z2", False),
        ("", True),
    ],
)
def test_label_selectors(selector: str, hit: bool) -> None:
    assert matches(OBJ, parse_label_selector(selector), []) is hit


def test_field_selectors() -> None:
    assert matches(OBJ, [], parse_field_selector("spec.nodeName=x,metadata.name=n"))
    assert not matches(OBJ, [], parse_field_selector("spec.nodeName!=x"))


def test_bad_selectors_are_a_400() -> None:
    with pytest.raises(KubeError) as err:
        parse_label_selector("a b c")
    assert err.value.code == 400
