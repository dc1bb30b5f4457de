"""Admin views: the cluster's resources as the guards see them, and a reconcile pass on demand."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from fleetgate.adapters.sql.schema import nodes
from tests.apps.api.conftest import ADMIN, Api

NS = "team-a"


async def test_resources_show_the_cluster_and_each_node_as_the_guards_do(api: Api) -> None:
    await api.node("hv-1", threads=4)  # 12 vCPUs
    await api.client.put(
        "/v1/nodes/hv-1/metrics", json={"cpu_load_1": 1.0, "cpu_schedulable": 4}, headers=ADMIN
    )
    await api.node("hv-2", threads=2)  # no metrics: no demand dimension
    team = await api.token(NS)
    placed = await api.client.post(
        f"/v1/namespaces/{NS}/placements",
        json={"cpus": 2, "memory_mb": 512, "disk_gb": 5, "node": "hv-1"},
        headers=team,
    )
    assert placed.status_code == 201
    r = await api.client.get("/v1/admin/resources", headers=ADMIN)
    assert r.status_code == 200
    body = r.json()
    cluster = body["cluster"]
    assert cluster["total"]["cpus"] == 18 and cluster["claimed"]["cpus"] == 0
    assert cluster["unclaimed_used"] == {"cpus": 2, "memory_mb": 512, "disk_gb": 5}
    unclaimed_cpus = next(d for d in cluster["unclaimed"] if d["dimension"] == "cpus")
    assert (unclaimed_cpus["limit"], unclaimed_cpus["used"]) == (18, 2)
    hv1, hv2 = body["nodes"]
    assert (hv1["name"], hv1["used"]["cpus"], hv1["limits"]["cpus"]) == ("hv-1", 2, 12)
    demand = next(d for d in hv1["dimensions"] if d["dimension"] == "demand")
    # target_load 0.75 x 4 schedulable threads; load 1.0 + the placement's charge 2 x 0.6.
    assert demand["limit"] == 3.0
    assert demand["used"] == 1.0 + hv1["expected_demand"] and hv1["expected_demand"] > 0
    assert "demand" not in {d["dimension"] for d in hv2["dimensions"]}


async def test_reconcile_runs_a_pass_and_reports_the_drift_it_corrected(api: Api) -> None:
    await api.node("hv-1")
    team = await api.token(NS)
    await api.client.post(
        f"/v1/namespaces/{NS}/placements",
        json={"cpus": 2, "memory_mb": 1, "disk_gb": 1},
        headers=team,
    )
    # Inject drift the way only a bug could: the node forgets one vCPU.
    async with api.container.ledger().store.engine.begin() as conn:
        await conn.execute(sa.update(nodes).where(nodes.c.name == "hv-1").values(used_cpus=1))
    r = await api.client.post("/v1/admin/reconcile", headers=ADMIN)
    assert r.status_code == 200
    report = r.json()
    assert report["summary"]["drifted_nodes"] == 1 and report["summary"]["clean"] is False
    assert report["nodes"][0]["drift"] == {"cpus": 1, "memory_mb": 0, "disk_gb": 0}
    again = (await api.client.post("/v1/admin/reconcile", headers=ADMIN)).json()
    assert again["summary"]["clean"] is True
    # The pass is the reconciler's own: its metrics are on /metrics.
    metrics = (await api.client.get("/metrics")).text
    assert "fleetgate_capacity_reconcile_passes_total 2.0" in metrics


async def test_an_expired_claim_is_swept_and_listed(api: Api) -> None:
    await api.node("hv-1")
    r = await api.client.post(
        f"/v1/namespaces/{NS}/claims",
        json={"cpus": 1, "memory_mb": 1, "disk_gb": 1, "expires_in_seconds": 60},
        headers=ADMIN,
    )
    api.clock.advance(timedelta(minutes=2))
    report = (await api.client.post("/v1/admin/reconcile", headers=ADMIN)).json()
    assert [c["id"] for c in report["expired_claims"]] == [r.json()["id"]]
    assert report["expired_claims"][0]["state"] == "expired"
