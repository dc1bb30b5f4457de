"""node-rotation-controller's series, served beside fleetgate's when the switch is on: every one
its alerts read, with its labels and type, and always the value of fleetgate's own series."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import aiohttp
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from fleetgate.apps.container import build_container
from fleetgate.apps.controller.endpoints import ControllerEndpoints
from fleetgate.apps.controller.metrics import PREFIX, RotationMetrics
from fleetgate.apps.controller.nrc_series import NAMES
from fleetgate.apps.controller.nrc_series import PREFIX as PREFIX_NRC
from fleetgate.apps.settings import ControllerSettings, Settings
from fleetgate.domain.rotation.policy import ForcefulFallback
from tests.apps.controller.world import World, policy
from tests.nrc import ALERTS, BUCKETS, OUTCOMES, PHASES, SERIES

DUE = timedelta(days=14) - timedelta(hours=1)


Families = dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]]


async def scrape(registry: CollectorRegistry) -> Families:
    """The controller's /metrics over HTTP, as {family: (type, [(sample, labels, value)])}."""
    endpoints = ControllerEndpoints(registry, lambda: True, metrics_port=0, probes_port=None)
    await endpoints.start()
    try:
        url = f"http://127.0.0.1:{endpoints.ports['metrics']}/metrics"
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            assert response.status == 200
            text = await response.text()
    finally:
        await endpoints.stop()
    return {
        f.name: (f.type, [(s.name, dict(s.labels), s.value) for s in f.samples])
        for f in text_string_to_metric_families(text)
    }


def exposed(name: str, kind: str) -> str:
    """The family name the text format gives: a counter's without ``_total``."""
    return name.removesuffix("_total") if kind == "counter" else name


async def test_every_series_nrcs_alerts_read_is_served_with_its_labels_and_type() -> None:
    world = World(nrc_metrics=True)
    world.node(DUE)
    await world.run(timedelta(minutes=30))  # a whole surge rotation: both phases, a success
    assert world.metric("fleetgate_rotation_completed_total", outcome="success") == 1
    families = await scrape(world.registry)

    read_by_alerts = {series for names in ALERTS.values() for series in names}
    assert read_by_alerts <= set(SERIES)
    for name, series in SERIES.items():
        family = exposed(name, series.type)
        assert family in families, f"{name} is not served"
        kind, samples = families[family]
        assert kind == series.type, f"{name}: {kind}, NRC's is a {series.type}"
        if name == "noderotation_forceful_fallback_total":
            continue  # nothing was forced: a labelled counter has no sample yet (as in NRC)
        assert samples, f"{name} has no sample after a rotation"
        for sample, labels, _ in samples:
            extra = {"le"} if sample.endswith("_bucket") else set()
            assert set(labels) == {*series.labels, *extra}, f"{sample}: labels {labels}"
            assert labels["nodepool"] == "pool"
            assert labels.get("outcome", "success") in OUTCOMES
            assert labels.get("phase", "drain") in PHASES
    _, duration = families["noderotation_duration_seconds"]
    buckets = {float(labels["le"]) for sample, labels, _ in duration if sample.endswith("_bucket")}
    assert buckets == {*BUCKETS, float("inf")}
    assert not [
        sample
        for name, (_, samples) in families.items()
        for sample, _, _ in samples
        if name.startswith("noderotation_") and sample.endswith("_created")
    ]  # NRC exposes no creation times


async def test_each_nrc_series_is_the_value_of_fleetgates_own() -> None:
    world = World(policy(forceful_fallback=ForcefulFallback(enabled=True)), nrc_metrics=True)
    world.node(timedelta(days=14) - timedelta(minutes=30))  # too late for a surge: forced
    world.node(DUE - timedelta(hours=2))
    await world.run(timedelta(minutes=40))
    assert world.metric("fleetgate_rotation_forceful_fallback_total") == 1
    families = await scrape(world.registry)
    assert {n.removesuffix("_total") for n in SERIES} == {
        "noderotation_" + n for n in NAMES.values()
    }
    for attr, name in NAMES.items():
        [ours] = getattr(world.controller.metrics, attr).describe()
        nrc = "noderotation_" + name
        mine = [
            (sample.replace(ours.name, nrc, 1), labels, value)
            for sample, labels, value in families[ours.name][1]
            if not sample.endswith("_created")
        ]
        assert mine, f"{ours.name} has no sample to compare"
        assert sorted(map(repr, families[nrc][1])) == sorted(map(repr, mine)), attr


async def test_the_switch_is_off_by_default_and_a_forgotten_pool_leaves_both_names() -> None:
    world = World()
    world.node(DUE)
    await world.pass_once()
    assert not [n for n in await scrape(world.registry) if n.startswith("noderotation_")]

    world = World([policy("a"), policy("b")], nrc_metrics=True)  # conflicting: one series left
    world.node(DUE)
    await world.pass_once()
    served = {
        (name, sample)
        for name, (_, samples) in (await scrape(world.registry)).items()
        for sample, _, _ in samples
    }
    assert {s for n, s in served if n.startswith("noderotation_")} == {
        "noderotation_policy_conflict"
    }
    assert {s for n, s in served if n.startswith(PREFIX)} == {"fleetgate_rotation_policy_conflict"}


def test_the_setting_turns_the_names_on_in_the_controller_it_builds() -> None:
    for on in (False, True):
        container = build_container(Settings(controller=ControllerSettings(nrc_metrics=on)))
        container.rotation_controller()
        names = {m.name for m in container.metrics_registry().collect()}
        assert ("noderotation_candidates" in names) is on


def test_the_guides_table_names_each_nrc_series_and_the_fleetgate_series_it_reads() -> None:
    guide = Path(__file__).parents[3] / "docs" / "migrating-from-node-rotation-controller.md"
    rows = re.findall(
        r"^\| `(noderotation_\w+)` \| ([^|]+) \| `(fleetgate_rotation_\w+)` \|",
        guide.read_text(),
        re.M,
    )
    metrics = RotationMetrics(CollectorRegistry())
    expected = {}
    for attr, name in NAMES.items():
        [family] = getattr(metrics, attr).describe()
        suffix = "_total" if family.type == "counter" else ""
        expected[PREFIX_NRC + name + suffix] = family.name + suffix
    assert {nrc: ours for nrc, _, ours in rows} == expected
    for nrc, labels, _ in rows:
        assert tuple(re.findall(r"`(\w+)`", labels)) == SERIES[nrc].labels
