"""``POST /v1/rotation/check`` and ``/simulate``: the CLI's JSON, a 422 naming each bad field,
and a simulation past its wall-clock bound a 503."""

from __future__ import annotations

import asyncio
import math
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetgate.apps.api.schemas.fleet import MAX_SIMULATE_NODES
from fleetgate.apps.container import Container
from fleetgate.apps.policyfile import load_policy
from fleetgate.apps.services.check import (
    CheckInputs,
    check,
    parse_expire_after,
    parse_grace_period,
)
from fleetgate.domain.rotation.windows import DAY_NAMES
from tests.apps.api.conftest import ADMIN, Api
from tests.waiting import until

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
TOKYO = EXAMPLES / "tokyo-policy.yaml"
URL = "/v1/rotation/check"


def tokyo_manifest() -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load(TOKYO.read_text())
    return manifest


async def test_the_answer_is_the_check_report_for_object_and_yaml_forms(api: Api) -> None:
    facts_in = CheckInputs(timedelta(hours=336), timedelta(hours=1), 10)
    expected = check(load_policy(TOKYO), facts_in).report()
    facts = {"expire_after": "336h", "termination_grace_period": "1h", "nodes": 10}
    as_object = await api.client.post(
        URL, json={"policy": tokyo_manifest(), **facts}, headers=ADMIN
    )
    as_text = await api.client.post(URL, json={"policy": TOKYO.read_text(), **facts}, headers=ADMIN)
    assert as_object.status_code == 200, as_object.text
    assert as_object.json() == expected == as_text.json()
    assert expected["G"] == 2 and expected["findings"] == []  # vector V1 of the rotation spec


async def test_any_valid_token_may_check(api: Api) -> None:
    body = {"policy": tokyo_manifest(), "expire_after": "14d"}
    r = await api.client.post(URL, json=body, headers=await api.token("team-a"))
    assert r.status_code == 200
    assert (await api.client.post(URL, json=body)).status_code == 401


async def test_never_expiring_pools_have_nothing_to_derive(api: Api) -> None:
    r = await api.client.post(
        URL, json={"policy": tokyo_manifest(), "expire_after": "Never"}, headers=ADMIN
    )
    assert r.status_code == 200 and r.json()["inputs"]["e"] is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expire_after": "fortnight"}, "expire_after"),
        ({"expire_after": "-1h"}, "expire_after"),
        ({"termination_grace_period": "-5m"}, "termination_grace_period"),
        ({"nodes": -1}, "nodes"),
        ({"policy": "kind: [unclosed"}, "policy"),
        ({"policy": "[" * 5000}, "policy"),  # nested past the YAML parser's stack: not a 500
        ({"policy": ""}, "policy"),
        ({"policy": 7}, "policy"),
    ],
)
async def test_bad_facts_are_422_naming_the_field(
    api: Api, change: dict[str, Any], field: str
) -> None:
    body = {"policy": tokyo_manifest(), "expire_after": "14d", **change}
    r = await api.client.post(URL, json=body, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert any(f["field"].startswith(field) for f in r.json()["fields"])


def said(parse: Any, text: str) -> str:
    """What ``fleetgate check``'s parser says of ``text`` (the CLI prints it after the option)."""
    with pytest.raises(ValueError) as refused:
        parse(text)
    assert "invalid duration" in str(refused.value) and len(str(refused.value)) < 120
    return str(refused.value)


async def test_messages_say_what_is_wrong_in_words_an_operator_reads(api: Api) -> None:
    """Issue 42: no 400-character pattern for a duration, no ``policy.::: unknown field`` for
    pasted text; the same words ``fleetgate check`` prints for the same input."""
    base = {"policy": tokyo_manifest(), "expire_after": "14d"}
    cases = [
        ({"expire_after": "14 days"}, "expire_after", said(parse_expire_after, "14 days")),
        ({"expire_after": "0s"}, "expire_after", "must be greater than 0 (or Never), got '0s'"),
        (
            {"termination_grace_period": "1 hour"},
            "termination_grace_period",
            said(parse_grace_period, "1 hour"),
        ),
        (
            {"policy": "::: not yaml"},
            "policy",
            "line 1, column 1: not a RotationPolicy manifest: the YAML reads as a mapping of "
            "'::', not a mapping of apiVersion, kind, metadata, spec",
        ),
        (
            {"policy": "kind: [unclosed"},
            "policy",
            "invalid YAML at line 1, column 16: expected ',' or ']', but got '<stream end>'",
        ),
    ]
    for change, field, reason in cases:
        r = await api.client.post(URL, json={**base, **change}, headers=ADMIN)
        assert r.status_code == 422, r.text
        assert r.json()["fields"] == [{"field": field, "location": "body", "reason": reason}]
        assert r.json()["message"] == f"{field}: {reason}"


async def test_an_invalid_manifest_names_the_manifest_field(api: Api) -> None:
    manifest = tokyo_manifest()
    manifest["spec"]["minRotationChances"] = 0
    r = await api.client.post(URL, json={"policy": manifest, "expire_after": "14d"}, headers=ADMIN)
    assert r.status_code == 422
    assert "policy.spec.minRotationChances" in [f["field"] for f in r.json()["fields"]]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"minRotationChances": "2"}, "policy.spec.minRotationChances"),
        ({"surge": {"readyTimeout": "0m"}}, "policy.spec.surge.readyTimeout"),
        ({"prePull": {"enabled": True}}, "policy.spec.prePull.enabled"),
        ({"maintenanceWindows": [{"timezone": "Mars/Olympus", "days": ["Wed"],
                                  "start": "02:00", "end": "06:00"}]},
         "policy.spec.maintenanceWindows.0.timezone"),
        ({"nodePoolSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
         "policy.spec.nodePoolSelector.matchExpressions.0.values"),
    ],
)  # fmt: skip
async def test_what_the_published_schema_refuses_is_422_naming_the_manifest_field(
    api: Api, spec: dict[str, Any], field: str
) -> None:
    # Refused by the schema's own model before the domain reads it, and still named by the
    # manifest's path (not by the union member pydantic tried).
    manifest = tokyo_manifest()
    manifest["spec"].update(spec)
    r = await api.client.post(URL, json={"policy": manifest, "expire_after": "14d"}, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert field in [f["field"] for f in r.json()["fields"]], r.json()


# --- POST /v1/rotation/simulate ---------------------------------------------------------------

SIMULATE = "/v1/rotation/simulate"
FLEET = EXAMPLES / "fleet-generated.yaml"
POLICY = EXAMPLES / "policy-simulate.yaml"
START = "2024-01-01T00:00:00Z"


async def test_a_simulation_answers_what_the_cli_prints(api: Api) -> None:
    from fleetgate.apps.simulate.command import build_inputs

    start, end = "2024-01-01T00:00:00Z", "2024-01-15T00:00:00Z"
    inputs = build_inputs(POLICY, FLEET, start, end, None, None)
    expected = (await Container().simulator().run_async(inputs)).document()
    body = {"policy": POLICY.read_text(), "fleet": FLEET.read_text(), "start": start, "span": "14d"}
    r = await api.client.post(SIMULATE, json=body, headers=await api.token("team-a"))
    assert r.status_code == 200, r.text
    assert r.json() == expected
    assert expected["summary"]["rotations"] > 0 and expected["summary"]["breaches"] == 0
    as_objects = {
        **body,
        "policy": yaml.safe_load(POLICY.read_text()),
        "fleet": yaml.safe_load(FLEET.read_text()),
    }
    again = await api.client.post(SIMULATE, json=as_objects, headers=ADMIN)
    assert again.json() == expected


def _fleet(**change: Any) -> dict[str, Any]:
    """The example fleet file as an object, its ``fleet`` updated."""
    fleet: dict[str, Any] = yaml.safe_load(FLEET.read_text())
    fleet["fleet"].update(change)
    return fleet


def _listed(*nodes: dict[str, Any]) -> dict[str, Any]:
    fleet = _fleet(nodes=list(nodes))
    del fleet["fleet"]["generate"]
    return fleet


def _policy(**spec: Any) -> dict[str, Any]:
    """The example policy as an object, its ``spec`` updated (``surge`` merged)."""
    policy: dict[str, Any] = yaml.safe_load(POLICY.read_text())
    surge = {**policy["spec"].get("surge", {}), **spec.pop("surge", {})}
    policy["spec"].update(spec, surge=surge)
    return policy


NODE = {"name": "a", "createdAt": "2023-12-20T08:00:00Z"}
NO_DATE = "fleet: {expireAfter: 14d, nodes: [{name: a, createdAt: 2024-02-30T08:00:00Z}]}"
TOO_LONG = "fleet: {expireAfter: 999999d, generate: {count: 3}}"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        # What the schema refuses.
        ({"span": "0s"}, "span"),
        ({"span": "soon"}, "span"),
        ({"start": "yesterday"}, "start"),
        ({"start": "9999-12-20T00:00:00Z"}, "start"),  # outside the years 2000 to 2999
        ({"start": "1999-12-31T00:00:00Z"}, "start"),
        ({"env_drain": "-5m"}, "env_drain"),
        ({"env_provisioning": True}, "env_provisioning"),
        ({"fleet": {"fleet": {"generate": {"count": 5}}}}, "fleet.fleet.expireAfter"),
        ({"fleet": _fleet(generate={"count": 50_000})}, "fleet.fleet.generate.count"),
        ({"fleet": _fleet(generate={"count": True})}, "fleet.fleet.generate.count"),
        ({"fleet": _fleet(terminationGracePeriod="999999d")}, "fleet.fleet.terminationGracePeriod"),
        ({"fleet": _fleet(colour="blue")}, "fleet.fleet.colour"),
        ({"fleet": _listed({**NODE, "doNotDisrupt": "false"})}, "fleet.fleet.nodes.0.doNotDisrupt"),
        ({"policy": {"kind": "RotationPolicy"}}, "policy"),
        # The text form: YAML, then the same schema.
        ({"fleet": "fleet: [unclosed"}, "fleet"),
        ({"fleet": "[" * 5000}, "fleet"),  # nested past the parser's stack
        ({"fleet": NO_DATE}, "fleet"),  # YAML's own timestamp, yet no date
        ({"fleet": TOO_LONG}, "fleet.fleet.expireAfter"),
        ({"fleet": "fleet: {expireAfter: 14d, generate: {count: true}}"},
         "fleet.fleet.generate.count"),
        ({"fleet": "- just a list"}, "fleet"),
        # What the descriptions state.
        ({"span": "121d"}, "span"),
        ({"fleet": _listed(NODE, NODE)}, "fleet.fleet.nodes[1].name"),
        ({"fleet": _listed({**NODE, "createdAt": "2024-01-01T00:00:01Z"})},
         "fleet.fleet.nodes[0].createdAt"),
        ({"fleet": _listed({**NODE, "disruptedAt": "2023-12-31T00:00:00Z"})},
         "fleet.fleet.nodes[0].disruptedAt"),
        ({"fleet": _fleet(labels={"team": "web"})}, "policy.spec.nodePoolSelector"),
        ({"policy": _policy(surge={"cooldownAfter": "36501d"})}, "policy.spec.surge.cooldownAfter"),
        ({"policy": _policy(ageThreshold="40000d")}, "policy.spec.ageThreshold"),
        ({"policy": _policy(exclusions=[{"start": "2024-01-02T00:00:00Z",
                                         "end": "9999-12-31T23:59:59Z"}])},
         "policy.spec.exclusions[0].end"),
    ],
)  # fmt: skip
async def test_bad_simulation_input_is_a_422_naming_the_field(
    api: Api, change: dict[str, Any], field: str
) -> None:
    body = {"policy": POLICY.read_text(), "fleet": FLEET.read_text(), "start": START, "span": "7d"}
    r = await api.client.post(SIMULATE, json={**body, **change}, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert field in [f["field"] for f in r.json()["fields"]], r.json()


async def test_simulating_needs_a_token(api: Api) -> None:
    body = {"policy": POLICY.read_text(), "fleet": FLEET.read_text()}
    assert (await api.client.post(SIMULATE, json=body)).status_code == 401


#: The longest duration the fleet's schema admits: eight components of 9999.99999999 days.
LONGEST = "9999.99999999d" * 8
#: Near the longest a simulation takes of a policy's durations (36500d), written as the policy
#: grammar admits (at most 7 digits of minutes a number): 5 x 9,999,999m is about 34,722 days.
LONGEST_POLICY = "9999999m" * 5


@pytest.mark.parametrize(
    ("start", "fleet", "policy"),
    [
        # The earliest start, with the oldest generated nodes the schema can describe.
        ("2000-01-01T00:00:00+23:59", _fleet(generate={"count": 3, "spread": LONGEST}), {}),
        # The latest start, with the longest template and policy durations.
        (
            "2999-12-31T23:59:59-23:59",
            _fleet(expireAfter=LONGEST, terminationGracePeriod=LONGEST),
            {"ageThreshold": LONGEST_POLICY, "surge": dict.fromkeys(
                ("readyTimeout", "cooldownAfter", "failurePause", "retryBackoff",
                 "drainEstimate", "provisioningEstimate"), LONGEST_POLICY)},
        ),
        # Failures and retries at the latest start: the backoff doubles up to 8 times.
        (
            "2999-12-31T23:59:59-23:59",
            {**_fleet(expireAfter="1h"), "env": {"provisioning": LONGEST}},
            {"surge": {"readyTimeout": "1s", "failurePause": LONGEST_POLICY,
                       "retryBackoff": LONGEST_POLICY}},
        ),
        # An exclusion as late as a simulation takes.
        ("2999-12-31T23:59:59-23:59", _fleet(),
         {"exclusions": [{"start": "2999-12-31T00:00:00Z", "end": "2999-12-31T23:59:59Z"}]}),
    ],
)  # fmt: skip
async def test_whatever_the_bounds_admit_simulates_inside_the_calendar(
    api: Api, start: str, fleet: dict[str, Any], policy: dict[str, Any]
) -> None:
    body = {"policy": _policy(**policy), "fleet": fleet, "start": start, "span": "120d"}
    r = await api.client.post(SIMULATE, json=body, headers=ADMIN)
    assert r.status_code == 200, r.text


async def test_a_run_past_the_wall_clock_bound_is_a_503_and_the_server_keeps_answering(
    api: Api,
) -> None:
    # Every node of a big pool expires at the same instant: the fake cluster then reschedules
    # the whole fleet in one step, far longer than the bound, which must stop it all the same.
    api.app.state.simulate_seconds = 0.5
    body = {
        "policy": _policy(maintenanceWindows=[{"timezone": "UTC", "days": list(DAY_NAMES),
                                              "start": "00:00", "end": "24:00"}]),
        "fleet": _fleet(generate={"count": MAX_SIMULATE_NODES, "spread": "0s"}),
        "span": "120d",
    }  # fmt: skip
    running = asyncio.create_task(api.client.post(SIMULATE, json=body, headers=ADMIN))
    await asyncio.sleep(0.1)
    assert (await api.client.get("/healthz")).status_code == 200  # answered meanwhile
    r = await running
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "simulation_too_long"
    assert "CLI" in r.json()["message"] and "shorter span" in r.json()["message"]
    # The 503 itself shows the run was cut at a check (a finished run answers 200). The answer
    # waits a few seconds for the worker to reach that check; on a loaded machine it may come
    # first, so the worker's end is awaited, not asserted at once (no wall-clock bound here).
    await until(lambda: not [t for t in threading.enumerate() if t.name == "fleetgate-bounded"])
    # The next run is served (without the bound: however busy this machine, it is to finish).
    api.app.state.simulate_seconds = math.inf
    again = await api.client.post(
        SIMULATE, json={"policy": POLICY.read_text(), "fleet": FLEET.read_text()}, headers=ADMIN
    )
    assert again.status_code == 200, again.text


async def test_the_503_is_documented_on_the_operation(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    responses = document["paths"]["/v1/rotation/simulate"]["post"]["responses"]
    assert "simulation_too_long" in responses["503"]["description"]
    assert responses["503"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }
