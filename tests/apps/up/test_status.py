"""The dashboard snapshot: rotations remembered from passes, nodes, claims, pools, events."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from fleetgate.apps.api.dashboard import render
from fleetgate.apps.controller.shell import PassResult
from fleetgate.apps.up.status import HIDDEN_EVENTS, HOLD_REAL_SECONDS, UpStatus
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation.estimates import EstimateCheck
from fleetgate.domain.rotation.governance import Governance, Status
from fleetgate.domain.rotation.machine import PoolReport, Step
from tests.apps.up.conftest import T0, Up


def result(pool: str, *applied: act.Action, started: str | None = None) -> PassResult:
    report = PoolReport(pool, Governance(Status.UNGOVERNED))
    return PassResult(pool, Step((), None, report, started=started), list(applied))


def test_a_rotation_runs_from_the_pass_that_starts_it_to_the_one_that_counts_it(up: Up) -> None:
    status = up.status
    status.on_pass(result("p", started="c1"), T0)
    status.on_pass(result("p", act.CountForcefulFallback()), T0 + timedelta(minutes=1))
    status.on_pass(result("p", act.CountCompletion("failure")), T0 + timedelta(minutes=9))
    status.on_pass(result("p", act.CountCompletion("success")), T0 + timedelta(minutes=10))
    (rotation,) = status.rotations["p"]
    assert (rotation.claim, rotation.outcome, rotation.forceful) == ("c1", "failure", True)
    assert rotation.end == T0 + timedelta(minutes=9)  # a second completion has nothing to end


def test_a_vanished_pool_loses_its_report(up: Up) -> None:
    up.status.on_pass(result("p"), T0)
    assert "p" in up.status.reports
    up.status.on_pass(PassResult("p", None), T0)
    assert "p" not in up.status.reports


async def test_the_snapshot_shows_the_fleet_as_ledger_cluster_and_controller_see_it(
    up: Up,
) -> None:
    # 00:46: the general window is open and its oldest node is being rotated; batch waits.
    await up.runtime.tick(timedelta(minutes=1), 0.0)
    snap = await up.status.snapshot()
    json.dumps(snap)  # JSON-ready throughout
    assert snap["clock"] == "virtual"  # the page labels up's instants as virtual time
    names = {n["name"] for n in snap["nodes"]}
    assert names == {c.name for c in up.cluster.claims.values() if c.ready}
    placed = sum(n["placements"] for n in snap["nodes"])
    assert placed == snap["placements"] == len(await up.ledger.placements())
    node = snap["nodes"][0]
    assert node["limits"]["cpus"] > 0 and node["budget"] == 0.75 * node["cpu_schedulable"]
    assert node["demand"] >= node["expected_demand"]
    (claim,) = snap["claims"]
    assert claim["namespace"] == "ci" and claim["state"] == "active"
    assert claim["limit"]["cpus"] > 0
    pools = {p["name"]: p for p in snap["pools"]}
    general = pools["general"]
    assert general["policy"] == "general" and general["window_open"] is True
    assert general["derivation"]["A"] == "46h43m" and general["derivation"]["C"] == 18
    assert general["active"] is not None and general["active"]["claim"] in up.originals
    timeline = general["timeline"]
    assert timeline["windows"] and timeline["rotations"][0]["outcome"] is None
    batch = pools["batch"]
    assert batch["window_open"] is False and batch["gate"]["reason"] == "outOfWindow"
    roles = {n["name"]: n["role"] for n in snap["nodes"]}
    assert roles[general["active"]["claim"]] == "rotating"
    assert not any(e["kind"] in HIDDEN_EVENTS for e in snap["events"])
    assert snap["events"] and snap["events"][0]["id"] > snap["events"][-1]["id"]


async def test_events_are_read_incrementally_and_only_the_latest_kept(up: Up) -> None:
    status = UpStatus(up.ledger, up.cluster, up.clock, speed=1, target_load=0.75)
    first = await status.snapshot()
    before = len(first["events"])
    await up.workload.admit()
    second = await status.snapshot()
    assert len(second["events"]) > before or len(second["events"]) == status.events.maxlen
    assert second["events"][0]["kind"] in {
        "instance placed",
        "placement admitted over namespace capacity claim",
    }


async def test_placement_churn_does_not_push_rotation_events_off_the_list(up: Up) -> None:
    await up.runtime.tick(timedelta(minutes=1), 0.0)  # the general pool starts a rotation
    status = up.status
    rotation = [e for e in (await status.snapshot())["events"] if "nodepool" in e["data"]]
    assert rotation, "the pass announced the rotation it started"
    for _ in range(status.events.maxlen or 0):  # a burst of capacity events, more than kept
        await up.workload.admit()
    events = (await status.snapshot())["events"]
    assert {e["id"] for e in rotation} <= {e["id"] for e in events}
    assert [e["id"] for e in events] == sorted((e["id"] for e in events), reverse=True)


async def test_the_pool_card_lists_the_warnings_the_pass_raises(up: Up) -> None:
    # The estimate warning (and short lead, stuck drain) were events only: the card said
    # "No findings" while EstimateDisagreesWithObservation fired.
    await up.runtime.tick(timedelta(minutes=1), 0.0)
    report = up.status.reports["general"]
    check = EstimateCheck(
        "provisioning", timedelta(minutes=5), False, timedelta(minutes=20), 4, disagrees=True
    )
    agreeing = replace(check, kind="drain", disagrees=False)
    up.status.reports["general"] = replace(
        report, estimates=(check, agreeing), short_lead=("c9",), drain_stuck=True
    )
    pools = {p["name"]: p for p in (await up.status.snapshot())["pools"]}
    codes = [f["code"] for f in pools["general"]["derivation"]["findings"]]
    assert codes.count("EstimateDisagreesWithObservation") == 1
    assert {"ShortLead", "DrainStuck"} <= set(codes)
    html = render.sections(await up.status.snapshot())
    assert "EstimateDisagreesWithObservation" in json.dumps(html)


async def test_the_snapshot_gives_every_namespace_each_node_age_and_the_timeline_zone(
    up: Up,
) -> None:
    await up.runtime.tick(timedelta(minutes=1), 0.0)
    placements = await up.ledger.placements()
    snap = await up.status.snapshot()
    rows = {ns["namespace"]: ns for ns in snap["namespaces"]}
    # Every namespace with placements is listed, not only the claimed one.
    assert set(rows) == {p.namespace for p in placements} | {"ci"} and len(rows) > 1
    for name, row in rows.items():
        mine = [p for p in placements if p.namespace == name]
        assert row["placements"] == len(mine)
        assert row["used"]["cpus"] == sum(p.resources.cpus for p in mine)
        assert row["claimed"] is (name == "ci")
    general = {n["name"]: n for n in snap["nodes"] if n["pool"] == "general"}
    obs = await up.cluster.observe("general")
    assert general and obs is not None
    for name, row in general.items():
        claim = next(c for c in obs.claims if c.node_name == name)
        life = row["lifetime"]
        assert life["age_seconds"] == (up.clock.now() - claim.created_at).total_seconds()
        assert life["A"] == "46h43m" and life["A_seconds"] == 46 * 3600 + 43 * 60
        expire = claim.expire_after or obs.expire_after
        assert expire is not None
        assert life["expires_at"] == (claim.created_at + expire).isoformat()
    pools = {p["name"]: p for p in snap["pools"]}
    assert pools["general"]["timeline"]["zone"] == "UTC"


async def test_a_finished_rotation_stays_on_its_card_for_the_hold_then_goes(up: Up) -> None:
    # At 600x a whole rotation lasts under a second of real time: less than one page refresh.
    status = up.status
    start = up.clock.now()
    status.on_pass(result("general", started="general-0001"), start)
    end = start + timedelta(minutes=8)
    status.on_pass(result("general", act.CountCompletion("success")), end)
    up.clock.advance(end - up.clock.now() + timedelta(minutes=1))
    pools = {p["name"]: p for p in (await status.snapshot())["pools"]}
    recent = pools["general"]["recent"]
    assert recent is not None and (recent["claim"], recent["outcome"]) == (
        "general-0001",
        "success",
    )
    assert recent["ago"] == "1m"
    html = render.pools(await status.snapshot())
    assert 'data-recent="general-0001"' in html and "last rotation" in html
    hold = timedelta(seconds=HOLD_REAL_SECONDS * status.speed)  # 20 real seconds = 200 virtual min
    up.clock.advance(hold)
    pools = {p["name"]: p for p in (await status.snapshot())["pools"]}
    assert pools["general"]["recent"] is None
