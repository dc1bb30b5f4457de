"""The API's own series, scraped from ``/metrics`` and parsed after real placements."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime
from pathlib import Path

import httpx
import structlog
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from structlog.testing import capture_logs

from fleetgate.apps.api.app import create_app
from fleetgate.apps.api.metrics import route_template
from fleetgate.apps.container import virtual_container
from fleetgate.apps.settings import Settings
from fleetgate.apps.wire import CLOCK_HEADER, VIRTUAL_CLOCK
from tests.apps.api.conftest import ADMIN, Api
from tests.servers import api_process, free_port, wait_until_serving

NS = "team-a"
URL = f"/v1/namespaces/{NS}/placements"
SMALL = {"cpus": 2, "memory_mb": 1024, "disk_gb": 10}


async def scrape(api: Api) -> dict[str, list[Sample]]:
    """Every sample of ``/metrics``, by family name."""
    r = await api.client.get("/metrics")
    assert r.status_code == 200
    return {f.name: f.samples for f in text_string_to_metric_families(r.text)}


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The one sample called ``name`` whose labels include ``labels`` (0 when there is none)."""
    found = [
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) <= 1, found
    return found[0] if found else 0.0


async def test_metrics_are_not_empty_before_any_reconcile_pass(api: Api) -> None:
    families = await scrape(api)
    # The process and platform collectors are there from the first scrape.
    assert value(families["process_resident_memory_bytes"], "process_resident_memory_bytes") > 0
    assert "python_info" in families
    assert "fleetgate_api_http_requests_in_flight" in families


async def test_admissions_are_counted_by_namespace_stage_and_outcome(api: Api) -> None:
    await api.node("hv-1", threads=4)
    team = await api.token(NS)
    assert (await api.client.post(URL, json=SMALL, headers=team)).status_code == 201
    assert (await api.client.post(URL, json=SMALL, headers=team)).status_code == 201
    too_big = {**SMALL, "cpus": 64}
    assert (await api.client.post(URL, json=too_big, headers=team)).status_code == 507
    families = await scrape(api)
    admissions = families["fleetgate_api_admissions"]
    name = "fleetgate_api_admissions_total"
    assert value(admissions, name, namespace=NS, stage="none", outcome="admitted") == 2
    # More than the whole cluster has: the cluster stage refuses it, on every candidate.
    assert value(admissions, name, namespace=NS, stage="cluster", outcome="refused") == 1
    latency = families["fleetgate_api_admission_duration_seconds"]
    count = "fleetgate_api_admission_duration_seconds_count"
    assert value(latency, count, outcome="admitted") == 2
    assert value(latency, count, outcome="refused") == 1


async def test_a_demand_waiver_and_an_over_claim_have_outcomes_of_their_own(api: Api) -> None:
    await api.node("hv-1")
    await api.client.put(
        "/v1/nodes/hv-1/metrics", json={"cpu_load_1": 50.0, "cpu_schedulable": 8}, headers=ADMIN
    )
    team = await api.token(NS)
    assert (await api.client.post(URL, json=SMALL, headers=team)).status_code == 201
    claim = {"cpus": 1, "memory_mb": 512, "disk_gb": 5, "expires_in_seconds": 3600}
    r = await api.client.post(f"/v1/namespaces/{NS}/claims", json=claim, headers=ADMIN)
    assert r.status_code == 201, r.text
    assert (await api.client.post(URL, json=SMALL, headers=team)).status_code == 201
    admissions = (await scrape(api))["fleetgate_api_admissions"]
    name = "fleetgate_api_admissions_total"
    assert value(admissions, name, namespace=NS, outcome="waived") == 1
    assert value(admissions, name, namespace=NS, outcome="over_claim") == 1


async def test_a_replay_of_a_waived_admission_counts_as_admitted_not_waived_again(
    api: Api,
) -> None:
    await api.node("hv-1")
    await api.client.put(
        "/v1/nodes/hv-1/metrics", json={"cpu_load_1": 50.0, "cpu_schedulable": 8}, headers=ADMIN
    )
    team = await api.token(NS)
    body = {**SMALL, "request_id": "once"}
    first = await api.client.post(URL, json=body, headers=team)
    again = await api.client.post(URL, json=body, headers=team)
    assert again.json() == first.json() and first.json()["demand_waived"] is True
    admissions = (await scrape(api))["fleetgate_api_admissions"]
    name = "fleetgate_api_admissions_total"
    assert value(admissions, name, namespace=NS, outcome="waived") == 1
    assert value(admissions, name, namespace=NS, outcome="admitted") == 1


async def test_http_durations_are_labelled_with_the_route_template_never_the_raw_path(
    api: Api,
) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    placed = (await api.client.post(URL, json=SMALL, headers=team)).json()
    assert (await api.client.get(f"{URL}/{placed['id']}", headers=team)).status_code == 200
    assert (await api.client.get("/no/such/path")).status_code == 404
    samples = (await scrape(api))["fleetgate_api_http_request_duration_seconds"]
    count = "fleetgate_api_http_request_duration_seconds_count"
    template = "/v1/namespaces/{ns}/placements/{placement_id}"
    assert value(samples, count, method="GET", route=template, status="200") == 1
    assert value(samples, count, method="POST", route="/v1/namespaces/{ns}/placements") == 1
    assert value(samples, count, method="GET", route="unmatched", status="404") == 1
    assert not any(placed["id"] in s.labels.get("route", "") for s in samples)


def test_an_unrouted_scope_is_labelled_unmatched() -> None:
    assert route_template({"type": "http"}) == "unmatched"


async def test_a_request_id_is_taken_or_made_and_returned(api: Api) -> None:
    given = await api.client.get("/healthz", headers={"X-Request-ID": "trace-abc.123"})
    assert given.headers["X-Request-ID"] == "trace-abc.123"
    made = await api.client.get("/healthz")
    assert len(made.headers["X-Request-ID"]) == 32
    assert made.headers["X-Request-ID"] != given.headers["X-Request-ID"]
    # An id that is not safe to echo into logs (spaces, control characters, too long) is replaced.
    for unsafe in ("two words", "x" * 200, "a\tb"):
        r = await api.client.get("/healthz", headers={"X-Request-ID": unsafe})
        assert r.headers["X-Request-ID"] != unsafe and len(r.headers["X-Request-ID"]) == 32


async def test_the_request_id_is_in_every_audit_event_of_the_request(api: Api) -> None:
    await api.node("hv-1", threads=4)
    team = await api.token(NS)
    r = await api.client.post(URL, json=SMALL, headers={**team, "X-Request-ID": "req-placed"})
    refused = await api.client.post(
        URL, json={**SMALL, "cpus": 64}, headers={**team, "X-Request-ID": "req-refused"}
    )
    assert (r.status_code, refused.status_code) == (201, 507)
    events = (await api.client.get("/v1/events", headers=ADMIN)).json()
    placed = [e for e in events if e["subject"] == r.json()["id"]]
    failed = [e for e in events if e["subject"] == refused.json()["audit_subject"]]
    assert placed and failed
    assert {e["data"]["request_id"] for e in placed} == {"req-placed"}
    assert {e["data"]["request_id"] for e in failed} == {"req-refused"}


async def test_the_access_log_is_structured_and_every_line_carries_the_request_id(
    api: Api,
) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    with capture_logs([structlog.contextvars.merge_contextvars]) as lines:
        r = await api.client.post(URL, json=SMALL, headers={**team, "X-Request-ID": "req-log"})
    assert r.status_code == 201
    ours = [line for line in lines if line.get("request_id") == "req-log"]
    access = [m for m in ours if m["event"] == "request"]
    assert len(access) == 1
    assert {k: access[0][k] for k in ("method", "route", "status")} == {
        "method": "POST",
        "route": "/v1/namespaces/{ns}/placements",
        "status": 201,
    }
    assert access[0]["duration_ms"] >= 0
    # The audit events logged during the request carry it too.
    assert any(m["event"] == "instance placed" for m in ours)
    json.dumps(access[0])  # plain fields, renderable as one JSON object


def test_every_worker_answers_for_all_workers(tmp_path: Path) -> None:
    # With --workers the parent turns on multiprocess mode: whichever worker a scrape reaches,
    # it reports every worker's admissions, so repeated scrapes on new connections all agree.
    port = free_port()
    token = "workers-admin-token"
    proc = api_process(tmp_path / "workers.db", port, "--workers", "2", token=token)
    admin = {"Authorization": f"Bearer {token}"}
    base = f"http://127.0.0.1:{port}"
    try:
        # Spawned workers start slowly on a loaded machine: wait generously.
        wait_until_serving(base, proc, seconds=120)
        node = {"threads": 64, "memory_mb": 262144, "disk_gb": 4000}
        assert httpx.put(f"{base}/v1/nodes/hv-1", json=node, headers=admin).status_code == 201
        for _ in range(6):  # a new connection each time, so the workers share the requests
            r = httpx.post(f"{base}{URL}", json=SMALL, headers=admin, timeout=30)
            assert r.status_code == 201, r.text
        seen = set()
        for _ in range(8):
            text = httpx.get(f"{base}/metrics", timeout=30).text
            samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
            seen.add(
                value(samples, "fleetgate_api_admissions_total", namespace=NS, outcome="admitted")
            )
        assert seen == {6.0}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def test_every_answer_of_a_virtual_clock_says_so_and_a_real_clock_adds_nothing(
    api: Api, tmp_path: Path
) -> None:
    # fleetgate up's API (a virtual container): the client labels the instants it prints.
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'v.db'}")
    virtual = create_app(virtual_container(settings, datetime(2031, 1, 1, tzinfo=UTC)))
    transport = httpx.ASGITransport(app=virtual)
    async with httpx.AsyncClient(transport=transport, base_url="http://v") as client:
        for path in ("/healthz", "/v1/nodes"):  # an answer and a refusal (401) alike
            r = await client.get(path)
            assert r.headers[CLOCK_HEADER] == VIRTUAL_CLOCK, path
    answer = await api.client.get("/healthz")
    assert CLOCK_HEADER.lower() not in {k.lower() for k in answer.headers}
