"""The Grafana dashboard: valid JSON whose every query names a series fleetgate exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from fleetgate.apps.api.metrics import ApiMetrics
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.reconciler.metrics import ReconcilerMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "fleetgate.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}


def exported() -> set[str]:
    """Every sample name the API, the reconciler and the controller can export."""
    registry = CollectorRegistry()
    ApiMetrics(registry), ReconcilerMetrics(registry), RotationMetrics(registry)
    names = set()
    for family in registry.collect():
        names.add(family.name)
        names.update(family.name + s for s in SUFFIXES.get(family.type, ()))
    return names


def test_every_query_names_an_exported_series_and_every_area_is_covered() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for e in exprs for name in re.findall(r"fleetgate_\w+", e)}
    assert used and used <= exported(), used - exported()
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Admission", "Claims and cluster", "Reconcile drift", "Rotation"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def deprecated() -> set[str]:
    """The aliases kept for one release (their HELP says so): no dashboard may read them."""
    registry = CollectorRegistry()
    ApiMetrics(registry), ReconcilerMetrics(registry), RotationMetrics(registry)
    names = set()
    for family in registry.collect():
        if family.documentation.startswith("DEPRECATED"):
            names.add(family.name)
            names.update(family.name + s for s in SUFFIXES.get(family.type, ()))
    return names


def test_nodepool_namespace_and_instance_are_template_variables_every_query_honours() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"datasource", "nodepool", "namespace", "instance"} <= set(variables)
    for name in ("nodepool", "namespace", "instance"):
        variable = variables[name]
        assert variable["type"] == "query" and variable["datasource"]["uid"] == "${datasource}"
        assert variable["multi"] and variable["includeAll"] and variable["allValue"] == ".*"
        assert f", {name})" in variable["query"]["query"]  # label_values(…, <label>)
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            for name, labels in re.findall(r"(fleetgate_\w+)(\{[^}]*\})?", target["expr"]):
                assert 'instance=~"$instance"' in labels, (name, target["expr"])
                if name.startswith("fleetgate_rotation_"):
                    assert 'nodepool=~"$nodepool"' in labels, (name, target["expr"])
                if name.startswith("fleetgate_api_admissions"):
                    assert 'namespace=~"$namespace"' in labels, (name, target["expr"])


def test_the_dashboard_reads_no_deprecated_or_mixed_unit_series() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for e in exprs for name in re.findall(r"fleetgate_\w+", e)}
    assert not used & deprecated(), used & deprecated()
    assert not [e for e in exprs if "memory_mb" in e or "disk_gb" in e or 'resource="cpus"' in e]
