"""The controller's /metrics, /healthz, /readyz and /leaderz listeners."""

from __future__ import annotations

import aiohttp
from prometheus_client import CollectorRegistry, Counter

from fleetgate.apps.controller.endpoints import ControllerEndpoints


async def test_metrics_and_probes_on_their_own_ports() -> None:
    registry = CollectorRegistry()
    Counter("fleetgate_rotation_completed", "x", ["nodepool"], registry=registry).labels("p").inc()
    serving, leading = False, False
    endpoints = ControllerEndpoints(
        registry, lambda: serving, leading=lambda: leading, metrics_port=0, probes_port=0
    )
    await endpoints.start()
    try:
        metrics = f"http://127.0.0.1:{endpoints.ports['metrics']}"
        probes = f"http://127.0.0.1:{endpoints.ports['probes']}"
        async with aiohttp.ClientSession() as http:
            async with http.get(metrics + "/metrics") as r:
                assert r.status == 200
                text = await r.text()
                assert 'fleetgate_rotation_completed_total{nodepool="p"} 1.0' in text
                assert "fleetgate_controller_leader 0.0" in text
            async with http.get(probes + "/healthz") as r:
                assert r.status == 200
            async with http.get(probes + "/readyz") as r:
                assert r.status == 503  # still starting: preflight has not passed
            serving = True
            async with http.get(probes + "/readyz") as r:
                assert (r.status, await r.text()) == (200, "ready: standing by\n")  # a standby
            async with http.get(probes + "/leaderz") as r:
                assert r.status == 503
            leading = True
            async with http.get(probes + "/readyz?verbose") as r:
                assert (r.status, await r.text()) == (200, "ready: leading\n")
            async with http.get(probes + "/leaderz") as r:
                assert r.status == 200
            async with http.get(metrics + "/metrics") as r:
                assert "fleetgate_controller_leader 1.0" in await r.text()
            async with http.get(probes + "/metrics") as r:
                assert r.status == 404  # each listener serves only its own paths
            async with http.post(probes + "/readyz") as r:
                assert r.status == 405
    finally:
        await endpoints.stop()


async def test_a_disabled_port_is_not_opened() -> None:
    endpoints = ControllerEndpoints(
        CollectorRegistry(), lambda: True, metrics_port=None, probes_port=0
    )
    await endpoints.start()
    try:
        assert set(endpoints.ports) == {"probes"}
    finally:
        await endpoints.stop()
