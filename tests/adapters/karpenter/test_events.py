"""Rotation events as events.k8s.io/v1 Events regarding the NodePool or NodeClaim."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetgate.adapters.karpenter.events import event_body
from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import EventSink
from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import KubeAPIServer
from tests.nrc import EVENTS, FINDING, assert_recorded_as_nrc_does
from tests.ports import assert_implements

AT = datetime(2026, 1, 7, 2, 0, 0, 123456, tzinfo=UTC)


async def test_pool_and_claim_events_become_kubernetes_events(
    api: KubeAPIServer, sim: KarpenterSim, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    claim, _ = sim.node("default")
    sink = gateway.event_sink()
    assert_implements(sink, EventSink)

    await sink.emit(
        [
            Event(
                "RotationStarted",
                AT,
                subject="default",
                data={
                    "object": "NodePool",
                    "message": f"rotating {claim}",
                    "action": "RotateNode",
                    "related": {"kind": "NodeClaim", "name": claim},
                },
            ),
            Event(
                "RotationFailed",
                AT,
                subject=claim,
                level=Level.WARNING,
                data={
                    "object": "NodeClaim",
                    "message": "surge not ready within 15m",
                    "action": "RotateNode",
                    "related": {"kind": "NodePool", "name": "default"},
                },
            ),
        ]
    )

    posts = [r for r in api.writes() if r.method == "POST"]
    assert [r.path for r in posts] == ["/apis/events.k8s.io/v1/namespaces/default/events"] * 2
    started, failed = (r.body for r in posts)
    assert started["reason"] == "RotationStarted" and started["type"] == "Normal"
    assert started["note"] == f"rotating {claim}"
    assert started["reportingController"] == "fleetgate.io/rotation-controller"
    assert started["reportingInstance"] == "fleetgate-0"
    assert started["eventTime"] == "2026-01-07T02:00:00.123456Z"
    assert started["regarding"] == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": "default",
        "uid": api.get("NodePool", "default")["metadata"]["uid"],  # type: ignore[index]
    }
    # The action and the related object as node-rotation-controller records them, the related
    # object with its uid like the regarding one (kubectl matches on it).
    assert started["action"] == failed["action"] == "RotateNode"
    assert started["related"] == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "name": claim,
        "uid": api.get("NodeClaim", claim)["metadata"]["uid"],  # type: ignore[index]
    }
    assert failed["type"] == "Warning"
    assert failed["regarding"]["kind"] == "NodeClaim" and failed["regarding"]["name"] == claim
    assert failed["related"]["kind"] == "NodePool" and failed["related"]["name"] == "default"
    assert failed["related"]["uid"] == started["regarding"]["uid"]
    assert len(api.list("Event", "default")) == 2


@pytest.mark.parametrize("reason", sorted(EVENTS))
def test_each_reason_is_recorded_with_nrcs_action_and_related_object(reason: str) -> None:
    shape = EVENTS[reason]
    related = {"kind": shape.related, "name": "x"} if shape.related else None
    event = Event(
        reason,
        AT,
        subject="pool" if shape.regarding == "NodePool" else "claim",
        level=Level.INFO if shape.type == "Normal" else Level.WARNING,
        data={"object": shape.regarding, "nodepool": "x", "action": shape.action}
        | ({"related": related} if related else {}),
    )
    assert_recorded_as_nrc_does(event)  # the shape the controller's Announce gives
    body = event_body(event, instance="i", serial=0, uid=None)
    assert body is not None and body["action"] == shape.action
    assert ("related" in body) == (shape.related is not None)
    wrong = Event(event.kind, AT, event.subject, level=event.level, data=dict(event.data))
    wrong.data["action"] = "Rotate"  # what fleetgate wrote before
    with pytest.raises(AssertionError, match="where NRC records"):
        assert_recorded_as_nrc_does(wrong)


def test_a_related_object_that_is_no_cluster_object_is_left_out() -> None:
    event = Event(
        "RotationStarted",
        AT,
        subject="p",
        data={
            "object": "NodePool",
            "action": "RotateNode",
            "related": {"kind": "Pod", "name": "x"},
        },
    )
    body = event_body(event, instance="i", serial=0, uid=None)
    assert body is not None and "related" not in body


async def test_events_about_no_cluster_object_are_skipped(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    await gateway.event_sink().emit([Event("instance placed", AT, subject="p1", namespace="t")])
    assert api.writes() == []


async def test_event_about_a_vanished_object_goes_out_without_uid(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    await gateway.event_sink().emit(
        [Event("RotationCompleted", AT, subject="gone-claim", data={"object": "NodeClaim"})]
    )
    [post] = api.writes()
    assert "uid" not in post.body["regarding"]
    assert post.body["note"] == "RotationCompleted"


async def test_delivery_failure_is_not_raised(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.seed(nodepool("default"))
    api.fail_next("POST", "/events", 500, times=2)
    events = [
        Event(
            "PolicyConflict",
            AT,
            subject="default",
            level=Level.WARNING,
            data={"object": "NodePool"},
        )
    ] * 3
    await gateway.event_sink().emit(events)  # no exception
    assert len(api.list("Event", "default")) == 1  # the third got through


def test_long_notes_are_cut_to_the_api_limit() -> None:
    body = event_body(
        Event(
            "ThroughputBelowArrival",
            AT,
            subject="p",
            data={"object": "NodePool", "message": "x" * 5000},
        ),
        instance="i",
        serial=0,
        uid=None,
    )
    assert body is not None and len(body["note"]) == 1024 and body["note"].endswith("...")


def test_event_names_differ_within_one_instant() -> None:
    event = Event("RotationStarted", AT, subject="p", data={"object": "NodePool"})
    names = {
        event_body(event, instance="i", serial=s, uid=None)["metadata"]["name"]  # type: ignore[index]
        for s in range(3)
    }
    assert len(names) == 3


async def test_a_hung_event_request_gives_up_at_the_timeout(
    api: KubeAPIServer, clock: object, kubeconfig: str
) -> None:
    api.seed(nodepool("default"))
    api.stall_next("POST", "/events", 10.0)
    async with KarpenterGateway(clock, kubeconfig=kubeconfig, request_timeout=0.2) as gw:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await gw.event_sink().emit(
            [Event("RotationStarted", AT, subject="default", data={"object": "NodePool"})]
        )
        # The pass that reported it is not held up for the 10 s stall (bounded loosely: the
        # 0.2 s timeout plus a loaded machine's scheduling).
        assert loop.time() - started < 5.0


def test_the_migration_guides_table_is_nrcs_events() -> None:
    guide = Path(__file__).parents[3] / "docs" / "migrating-from-node-rotation-controller.md"
    table = guide.read_text().split("## Events", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, tuple[str, str, str | None]] = {}
    for reasons, regarding, action, related in re.findall(
        r"^\| ([^|]*`[A-Z][^|]*) \| (\w+) \| `(\w+)` \| ([^|]+) \|$", table, re.M
    ):
        kind = None if related.strip() == "none" else related.split(":")[0].strip()
        for reason in re.findall(r"`(\w+)`", reasons):
            listed[reason] = (regarding, action, kind)
    for reason, shape in EVENTS.items():
        assert listed.pop(reason) == (shape.regarding, shape.action, shape.related), reason
    # What is left is the findings' row: NRC's schedule findings, and fleetgate's own warning.
    assert set(listed.values()) == {(FINDING.regarding, FINDING.action, None)}
    assert "EstimateDisagreesWithObservation" in listed
