"""Every 422 names each offending field as the client sent it, once, with a readable reason
(issue 21): no validator paths from inside a union (``expires_in_seconds.function-before[…]``),
no spurious "should be None" for a field the client did not send as null, and a query with an
unknown parameter still names its invalid known ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleetgate.apps.api.errors import as_sent, validation_error
from tests.apps.api.conftest import ADMIN, Api

URL = "/v1/namespaces/team-a/claims"
CLAIM = {"cpus": 1, "memory_mb": 1, "disk_gb": 1}
#: Fragments of pydantic internals that must never reach a client.
INTERNALS = ("function-before", "constrained-int", ".none", "Input should be None", "[")


def assert_names_once(body: dict[str, Any], *names: str) -> None:
    fields = [f["field"] for f in body["fields"]]
    assert sorted(fields) == sorted(names), body
    for internal in INTERNALS:
        assert internal not in body["message"], body
    for f in body["fields"]:
        assert f["reason"] and not f["reason"].startswith("Value error"), body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**CLAIM, "expires_in_seconds": -1}, "expires_in_seconds"),
        ({**CLAIM, "expires_in_seconds": 1.5}, "expires_in_seconds"),
        ({**CLAIM, "expires_in_seconds": "soon"}, "expires_in_seconds"),
        ({**CLAIM, "expires_at": "nope"}, "expires_at"),
        ({**CLAIM, "expires_at": 12}, "expires_at"),
    ],
)
async def test_a_bad_expiry_on_create_names_just_that_field(
    api: Api, body: dict[str, Any], field: str
) -> None:
    r = await api.client.post(URL, json=body, headers=ADMIN)
    assert r.status_code == 422
    assert_names_once(r.json(), field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cpus": -1}, "cpus"),
        ({"memory_mb": "x"}, "memory_mb"),
        ({"disk_gb": 1.5}, "disk_gb"),
        ({"expires_in_seconds": 0}, "expires_in_seconds"),
        ({"expires_at": "later"}, "expires_at"),
    ],
)
async def test_every_field_of_a_patch_is_named_as_sent(
    api: Api, body: dict[str, Any], field: str
) -> None:
    await api.node("hv-1")
    r = await api.client.post(URL, json={**CLAIM, "expires_in_seconds": 60}, headers=ADMIN)
    assert r.status_code == 201, r.text
    r = await api.client.patch(f"{URL}/{r.json()['id']}", json=body, headers=ADMIN)
    assert r.status_code == 422
    assert_names_once(r.json(), field)


async def test_several_bad_fields_are_each_named_once(api: Api) -> None:
    body = {"cpus": -1, "memory_mb": "x", "disk_gb": 1, "expires_in_seconds": -5}
    r = await api.client.post(URL, json=body, headers=ADMIN)
    assert r.status_code == 422
    assert_names_once(r.json(), "cpus", "memory_mb", "expires_in_seconds")


async def test_an_explicit_null_is_named_with_its_own_reason(api: Api) -> None:
    r = await api.client.post(URL, json={**CLAIM, "expires_in_seconds": None}, headers=ADMIN)
    assert r.status_code == 422
    (only,) = r.json()["fields"]
    assert only["field"] == "expires_in_seconds" and "null" in only["reason"]


@pytest.mark.parametrize("path", ["/v1/nodes", "/v1/namespaces/team-a/placements"])
async def test_an_unknown_query_parameter_does_not_hide_an_invalid_known_one(
    api: Api, path: str
) -> None:
    r = await api.client.get(f"{path}?limit=0&bogus=1", headers=ADMIN)
    assert r.status_code == 422
    body = r.json()
    assert_names_once(body, "limit", "bogus")
    assert {f["location"] for f in body["fields"]} == {"query"}


async def test_an_unknown_query_parameter_alone_is_named_alone(api: Api) -> None:
    r = await api.client.get("/v1/nodes?limit=5&bogus=1", headers=ADMIN)
    assert r.status_code == 422
    assert_names_once(r.json(), "bogus")


def test_a_location_is_cut_where_the_sent_keys_end() -> None:
    sent = {"body": {"a": {"b": [1, 2]}, "n": -1}}
    assert as_sent(("body", "n", "function-before[x]"), "greater_than_equal", sent) == (
        "body",
        "n",
    )
    assert as_sent(("body", "a", "b", 1, "int"), "int_type", sent) == ("body", "a", "b", 1)
    # A required field the client left out is named, though it is not in the data.
    assert as_sent(("body", "cpus"), "missing", sent) == ("body", "cpus")
    # Without the data, the location is left alone.
    assert as_sent(("body", "n", "int"), "int_type", None) == ("body", "n", "int")


def test_a_union_members_errors_merge_into_one_field() -> None:
    error = validation_error(
        [
            {"loc": ("body", "n", "function-before[f(), int]"), "type": "int_type", "msg": "A"},
            {"loc": ("body", "n", "none"), "type": "none_required", "msg": "Input should be None"},
        ],
        {"body": {"n": "x"}},
    )
    assert error.details["fields"] == [{"field": "n", "location": "body", "reason": "A"}]
    assert error.message == "n: A"
