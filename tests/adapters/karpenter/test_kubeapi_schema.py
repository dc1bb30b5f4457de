"""The local API server applies a CRD's schema as a real one does: it prunes unknown fields, fills
in defaults, refuses invalid values with a 422 naming each field (CEL rules included), and stores
nothing it refused; a watch with a label selector sees an object leave it as DELETED."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.adapters.karpenter.kubeapi import DEFAULT_RESOURCES, KubeAPIServer, KubeError
from tests.adapters.karpenter.kubeapi_schema import admit, go_regex
from tests.adapters.karpenter.kubeapi_store import chart_crd
from tests.waiting import until

POLICIES = "/apis/fleetgate.io/v1alpha1/rotationpolicies"
MERGE = {"Content-Type": "application/merge-patch+json"}
POLICY_CRD = chart_crd("rotationpolicies.fleetgate.io")


def policy(name: str = "web", **spec: Any) -> dict[str, Any]:
    """A valid RotationPolicy with ``spec`` merged over a one-window spec."""
    return {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "RotationPolicy",
        "metadata": {"name": name},
        "spec": {
            "nodePoolSelector": {},
            "maintenanceWindows": [
                {"timezone": "UTC", "days": ["Sat"], "start": "01:00", "end": "05:00"}
            ],
            **spec,
        },
    }


@pytest.fixture
async def http(api: KubeAPIServer) -> AsyncIterator[aiohttp.ClientSession]:
    """A plain HTTP client of the local server, which serves the chart's RotationPolicy CRD."""
    api.resources = (*DEFAULT_RESOURCES, POLICY_CRD)
    async with aiohttp.ClientSession(api.url) as session:
        yield session


async def _answer(response: aiohttp.ClientResponse) -> tuple[int, Any]:
    async with response:
        return response.status, await response.json()


async def test_an_invalid_value_is_a_422_naming_the_field_and_nothing_is_stored(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    status, body = await _answer(
        await http.post(POLICIES, json=policy(ageThreshold="not a duration"))
    )

    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith(
        'RotationPolicy.fleetgate.io "web" is invalid: spec.ageThreshold: Invalid value: '
        '"not a duration": spec.ageThreshold in body should match'
    )
    assert api.get("RotationPolicy", "web") is None


async def test_every_invalid_field_is_named_in_one_answer(http: aiohttp.ClientSession) -> None:
    body = policy(minRotationChances="two", surge={"maxUnavailable": 2})
    body["spec"]["maintenanceWindows"][0]["days"] = ["Someday"]
    del body["spec"]["maintenanceWindows"][0]["end"]

    status, answer = await _answer(await http.post(POLICIES, json=body))

    assert status == 422
    message = answer["message"]
    for part in (
        'spec.minRotationChances: Invalid value: "two": spec.minRotationChances in body must '
        "be of type integer",
        "spec.maintenanceWindows[0].end: Required value",
        'spec.maintenanceWindows[0].days[0]: Unsupported value: "Someday": supported values: "Mon"',
        "spec.surge.maxUnavailable: Invalid value: 2: spec.surge.maxUnavailable in body should "
        "be less than or equal to 1",
    ):
        assert part in message, message


async def test_a_cel_rule_refuses_with_its_message(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    status, body = await _answer(await http.post(POLICIES, json=policy(prePull={"enabled": True})))

    assert status == 422
    assert body["message"].endswith(
        'spec.prePull: Invalid value: "object": prePull is reserved and must stay disabled '
        "(enabled false)"
    )
    assert api.get("RotationPolicy", "web") is None


async def test_unknown_fields_are_pruned_and_defaults_filled_in(
    http: aiohttp.ClientSession,
) -> None:
    body = policy(typo=True, surge={"readyTimeout": "5m", "bogus": 1})
    body["status"] = {"anything": 1}  # dropped on create: status is a subresource

    status, stored = await _answer(await http.post(POLICIES, json=body))

    assert status == 201
    spec = stored["spec"]
    assert "typo" not in spec and "bogus" not in spec["surge"]
    assert spec["ageThreshold"] == "auto" and spec["minRotationChances"] == 2
    assert spec["surge"] == {
        "maxUnavailable": 1,
        "readyTimeout": "5m",  # what was sent stays
        "cooldownAfter": "10m",
        "retryBackoff": "30m",
        "forcefulFallback": {"enabled": False},  # a default inside a default
    }
    assert "status" not in stored


async def test_an_update_is_validated_and_a_refused_patch_changes_nothing(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    await _answer(await http.post(POLICIES, json=policy()))
    before = api.get("RotationPolicy", "web")

    status, body = await _answer(
        await http.patch(
            f"{POLICIES}/web",
            data=json.dumps({"spec": {"maintenanceWindows": [{"timezone": "UTC"}]}}),
            headers=MERGE,
        )
    )

    assert status == 422 and "spec.maintenanceWindows[0].days: Required value" in body["message"]
    assert api.get("RotationPolicy", "web") == before


async def test_a_status_write_is_pruned_by_the_schema() -> None:
    # fleetgate's own CRD keeps any status (x-kubernetes-preserve-unknown-fields); a schema that
    # lists its status fields prunes the rest, as NRC's CRD does to fleetgate's extra fields.
    schema = {
        "type": "object",
        "properties": {
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}, "count": {"type": "integer"}},
            }
        },
    }
    obj = {"metadata": {"name": "x"}, "status": {"phase": "Ready", "extra": [1], "count": None}}

    assert admit(schema, obj, kind="Thing", name="x") == {
        "metadata": {"name": "x"},  # the root's metadata is never pruned
        "status": {"phase": "Ready"},  # unknown and non-nullable null fields are dropped
    }


def test_list_types_and_int32_are_enforced() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
            "count": {"type": "integer", "format": "int32"},
        },
    }
    obj = {"tags": ["a", "a"], "ports": [{"name": "p"}, {"name": "p"}], "count": 2**31}

    with pytest.raises(KubeError) as refused:
        admit(schema, obj, kind="Thing", name="x")

    message = refused.value.message
    assert 'tags[1]: Duplicate value: "a"' in message
    assert "ports[1]: Duplicate value" in message
    assert "count: Invalid value: 2147483648: count in body must be of type int32" in message


def test_a_transition_rule_runs_on_updates_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"mode": {"type": "string"}},
                "x-kubernetes-validations": [
                    {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"}
                ],
            }
        },
    }
    created = admit(schema, {"spec": {"mode": "a"}}, kind="Thing", name="x")

    with pytest.raises(KubeError, match='spec: Invalid value: "object": mode is immutable'):
        admit(schema, {"spec": {"mode": "b"}}, kind="Thing", name="x", old=created)


async def test_a_watch_with_a_selector_sees_an_object_leave_it_as_deleted(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    body = policy()
    body["metadata"]["labels"] = {"team": "a"}
    await _answer(await http.post(POLICIES, json=body))
    seen: list[tuple[str, str | None]] = []

    async def watch() -> None:
        query = {"watch": "true", "labelSelector": "team=a", "timeoutSeconds": "60"}
        async with http.get(POLICIES, params=query) as stream:
            async for line in stream.content:
                event = json.loads(line)
                labels = event["object"]["metadata"].get("labels") or {}
                seen.append((event["type"], labels.get("team")))

    task = asyncio.create_task(watch())
    await until(lambda: seen == [("ADDED", "a")])
    relabel = {"metadata": {"labels": {"team": "b"}}}
    await _answer(await http.patch(f"{POLICIES}/web", data=json.dumps(relabel), headers=MERGE))
    await until(lambda: len(seen) == 2)
    relabel = {"metadata": {"labels": {"team": "a"}}}
    await _answer(await http.patch(f"{POLICIES}/web", data=json.dumps(relabel), headers=MERGE))
    await until(lambda: len(seen) == 3)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

    # It leaves carrying its last matching state, and comes back as ADDED.
    assert seen == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "a")]


async def test_a_whole_float_is_an_integer_and_reads_back_as_one(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    # kube-openapi's type check takes a float64 with no fraction for an integer (isFloatInt);
    # the object is stored as Go writes it, so 3.0 reads back as 3.
    status, stored = await _answer(await http.post(POLICIES, json=policy(minRotationChances=3.0)))
    assert status == 201
    assert stored["spec"]["minRotationChances"] == 3
    assert type(stored["spec"]["minRotationChances"]) is int
    status, answer = await _answer(
        await http.post(POLICIES, json=policy("half", minRotationChances=2.5))
    )
    assert status == 422 and "spec.minRotationChances" in answer["message"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"ageThreshold": "240h\n"}, "spec.ageThreshold"),
        ({"surge": {"readyTimeout": "15m\n"}}, "spec.surge.readyTimeout"),
        (
            {
                "maintenanceWindows": [
                    {"timezone": "UTC", "days": ["Sat"], "start": "01:00\n", "end": "05:00"}
                ]
            },
            "spec.maintenanceWindows[0].start",
        ),
    ],
)
async def test_a_pattern_is_anchored_as_go_anchors_it(
    api: KubeAPIServer, http: aiohttp.ClientSession, spec: dict[str, Any], field: str
) -> None:
    # Go's "$" is the end of the text: Python's would let the trailing newline through.
    status, answer = await _answer(await http.post(POLICIES, json=policy(**spec)))
    assert status == 422 and f"{field}: Invalid value" in answer["message"]
    assert api.get("RotationPolicy", "web") is None


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^a$", "a", True),
        ("^a$", "a\n", False),
        ("a$", "ba", True),
        (r"^\d+$", "42", True),
        (r"^\d+$", "\u0663", False),  # an Arabic-Indic digit: no Go \d
        (r"^[\d.]+$", "1.5", True),
        (r"^\s$", " ", True),
        (r"^\s$", "\v", False),  # Go's \s has no vertical tab
        (r"^\w+$", "a_1", True),
        (r"^\w+$", "\u00e9", False),
        (r"^\D$", "x", True),
        (r"^[$]$", "$", True),  # a dollar inside a class is a dollar
        (r"^\$$", "$", True),
        (r"^a\z", "a", True),
    ],
)
def test_go_patterns_mean_in_python_what_they_mean_in_go(
    pattern: str, text: str, matches: bool
) -> None:
    assert bool(go_regex(pattern).search(text)) is matches


@pytest.mark.parametrize(
    "name", ["Bad_Name", "UPPER", "-lead", "trail-", "a..b", "dot.", "x" * 254, "web\n"]
)
async def test_a_name_that_is_no_dns_subdomain_is_refused(
    api: KubeAPIServer, http: aiohttp.ClientSession, name: str
) -> None:
    status, answer = await _answer(await http.post(POLICIES, json=policy(name)))
    assert (status, answer["reason"]) == (422, "Invalid")
    assert "metadata.name: Invalid value" in answer["message"]
    assert api.list("RotationPolicy") == []
    with pytest.raises(KubeError) as refused:  # seeding goes through the same create
        api.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})
    assert refused.value.code == 422


async def test_a_dns_subdomain_is_taken(http: aiohttp.ClientSession) -> None:
    for name in ("web", "a.b-c.d", "0", "x" * 253):
        status, _ = await _answer(await http.post(POLICIES, json=policy(name)))
        assert status == 201, name
