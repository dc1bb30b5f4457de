"""The Helm chart: every rendered manifest is valid Kubernetes, RBAC is spec 10 exactly, and the
config it renders is one fleetgate accepts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from fleetgate.apps.container import build_container
from fleetgate.apps.settings import load_settings
from fleetgate.domain.rotation.manifest import read_manifest
from tests.deploy.gotemplate import Chart, TemplateError, documents

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "fleetgate"
K8S_VERSIONS = ("1.26.0", "1.37.0")  # the chart's kubeVersion floor, and the newest schemas
BASE: dict[str, Any] = {"database": {"existingSecret": "fleetgate-database"}}
POLICY = {
    "name": "weeknights",
    "spec": {
        "nodePoolSelector": {"matchLabels": {"team": "web"}},
        "maintenanceWindows": [
            {"timezone": "Europe/Berlin", "days": ["Mon", "Tue"], "start": "01:00", "end": "05:00"}
        ],
        "surge": {"readyTimeout": "15m", "forcefulFallback": {"enabled": True}},
    },
}
EVERYTHING = {
    **BASE,
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    "policies": [POLICY],
    "api": {"adminTokenSecret": "fleetgate-admin"},
    "controller": {"clusterOptions": {"lease_duration": 20}, "nodeSelector": {"pool": "system"}},
    "imagePullSecrets": [{"name": "regcred"}],
    "config": {"capacity": {"target_load": 0.8}},
}


@pytest.fixture(scope="module")
def chart() -> Chart:
    return Chart(CHART)


def render(chart: Chart, values: dict[str, Any]) -> list[dict[str, Any]]:
    return documents(chart.render(copy.deepcopy(values), namespace="fleetgate-system"))


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} found"
    return matches[0]


def crd() -> dict[str, Any]:
    return yaml.safe_load((CHART / "crds" / "rotationpolicies.fleetgate.io.yaml").read_text())


@pytest.mark.parametrize("values", [BASE, EVERYTHING], ids=["defaults", "everything"])
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_builtin_manifest_is_valid_kubernetes(
    chart: Chart, values: dict[str, Any], version: str
) -> None:
    docs = render(chart, values)
    builtin = [
        d
        for d in docs
        if d["apiVersion"].split("/")[0] not in ("monitoring.coreos.com", "fleetgate.io")
    ]
    assert len(builtin) >= 12
    for doc in [*builtin, crd()]:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_rotation_policies_fit_the_crd_and_the_controller_reads_them(chart: Chart) -> None:
    schema = _openapi_to_jsonschema(crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    [policy] = [d for d in render(chart, EVERYTHING) if d["kind"] == "RotationPolicy"]
    jsonschema.validate(policy, schema)
    read, errors = read_manifest(policy)
    assert errors == [] and read.name == "weeknights"
    with pytest.raises(jsonschema.ValidationError, match="'maintenanceWindows' is a required"):
        jsonschema.validate({**policy, "spec": {"nodePoolSelector": {}}}, schema)


def test_service_monitor_is_a_switch_and_has_the_operators_shape(chart: Chart) -> None:
    assert not [d for d in render(chart, BASE) if d["kind"] == "ServiceMonitor"]
    monitor = find(render(chart, EVERYTHING), "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    spec = monitor["spec"]
    assert set(spec) <= {"selector", "namespaceSelector", "endpoints", "jobLabel"}
    assert spec["namespaceSelector"] == {"matchNames": ["fleetgate-system"]}
    assert {(e["port"], e["path"]) for e in spec["endpoints"]} == {
        ("metrics", "/metrics"),
        ("http", "/metrics"),
    }
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout"}
    # Each endpoint port exists on a Service the selector matches.
    services = [d for d in render(chart, EVERYTHING) if d["kind"] == "Service"]
    selected = [
        s
        for s in services
        if all(
            s["metadata"]["labels"].get(k) == v for k, v in spec["selector"]["matchLabels"].items()
        )
    ]
    ports = {p["name"] for s in selected for p in s["spec"]["ports"]}
    assert ports == {"metrics", "http"}


def test_rbac_is_exactly_the_specs_least_privilege(chart: Chart) -> None:
    docs = render(chart, BASE)
    cluster_rules = _rules(find(docs, "ClusterRole"))
    assert cluster_rules == {
        ("karpenter.sh", "nodeclaims"): {"get", "list", "watch", "update", "patch", "delete"},
        ("karpenter.sh", "nodepools"): {"get", "list", "watch", "update", "patch"},
        ("", "nodes"): {"get", "list", "watch", "update", "patch"},
        ("", "pods"): {"get", "list", "watch"},
        ("events.k8s.io", "events"): {"create", "patch"},
        ("fleetgate.io", "rotationpolicies"): {"get", "list", "watch"},
        ("fleetgate.io", "rotationpolicies/status"): {"get", "update", "patch"},
    }
    role = find(docs, "Role")
    assert role["metadata"]["namespace"] == "fleetgate-system"
    assert _rules(role) == {
        ("", "pods"): {"create", "delete"},
        ("", "events"): {"create", "patch"},
        ("coordination.k8s.io", "leases"): {
            "get",
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "delete",
        },
    }
    everything = [rule for r in (find(docs, "ClusterRole"), role) for rule in r["rules"]]
    assert not any(
        "priorityclasses" in rule["resources"] or "*" in rule["verbs"] for rule in everything
    )
    for binding in (find(docs, "ClusterRoleBinding"), find(docs, "RoleBinding")):
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": "fleetgate-controller",
                "namespace": "fleetgate-system",
            }
        ]


def test_controller_runs_two_leader_elected_replicas_ready_only_when_leading(chart: Chart) -> None:
    deployment = find(render(chart, BASE), "Deployment", "fleetgate-controller")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "fleetgate-controller"
    [container] = pod["containers"]
    assert container["args"] == ["controller"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "probes"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "metrics": 8080,
        "probes": 8081,
    }
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["FLEETGATE_DATABASE_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": "fleetgate-database", "key": "url"}
    }


def test_api_and_reconciler_get_the_database_from_the_secret_and_no_api_token(
    chart: Chart,
) -> None:
    docs = render(chart, EVERYTHING)
    for name, args in (
        ("fleetgate-api", ["api"]),
        ("fleetgate-reconciler", ["reconciler", "--interval", "300"]),
    ):
        pod = find(docs, "Deployment", name)["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        [container] = pod["containers"]
        assert container["args"] == args
        env = {e["name"]: e for e in container["env"]}
        assert env["FLEETGATE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == (
            "fleetgate-database"
        )
        assert "value" not in env["FLEETGATE_DATABASE_URL"]
    api = find(docs, "Deployment", "fleetgate-api")["spec"]["template"]["spec"]["containers"][0]
    assert {
        "name": "FLEETGATE_API__ADMIN_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "fleetgate-admin", "key": "token"}},
    } in api["env"]
    assert not [d for d in docs if d["kind"] == "Secret"]  # an existing Secret is not rendered


def test_a_database_is_required(chart: Chart) -> None:
    with pytest.raises(TemplateError, match=r"set database\.existingSecret"):
        chart.render({})


def test_a_trial_url_becomes_a_hook_secret_the_pods_read(chart: Chart) -> None:
    url = "postgresql+asyncpg://fleetgate:pw@db:5432/fleetgate"
    docs = render(chart, {"database": {"url": url}})
    secret = find(docs, "Secret", "fleetgate-database")
    assert secret["stringData"] == {"url": url}
    assert "pre-install" in secret["metadata"]["annotations"]["helm.sh/hook"]
    job = find(docs, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert int(secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"]
    )  # the Secret exists first
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]


def test_priority_class_is_negative_never_preempting_and_the_one_the_controller_uses(
    chart: Chart,
) -> None:
    docs = render(chart, BASE)
    priority = find(docs, "PriorityClass")
    assert priority["value"] == -10 and priority["preemptionPolicy"] == "Never"
    assert priority["globalDefault"] is False
    settings = _settings(docs)
    assert settings.controller.priority_class == priority["metadata"]["name"]
    assert not [
        d
        for d in render(chart, {**BASE, "priorityClass": {"create": False}})
        if d["kind"] == "PriorityClass"
    ]


def test_the_rendered_config_is_one_fleetgate_accepts(
    chart: Chart, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETGATE_PLUGINS", "karpenter")  # load only the plugin under test
    docs = render(chart, EVERYTHING)
    settings = _settings(docs)
    assert settings.cluster == "karpenter"
    assert settings.controller.namespace == "fleetgate-system"
    assert settings.controller.leader_election is True
    assert settings.capacity.target_load == 0.8
    gateway = build_container(settings).cluster()  # the Karpenter plugin accepts the options
    assert gateway.options.namespace == "fleetgate-system"
    assert gateway.options.lease_name == "fleetgate-controller"
    assert gateway.options.lease_duration == 20.0
    assert gateway.options.priority_class == "fleetgate-placeholder"


def _settings(docs: list[dict[str, Any]]) -> Any:
    """The settings fleetgate builds from the chart's ConfigMap (the URL comes from the Secret)."""
    text = find(docs, "ConfigMap", "fleetgate-config")["data"]["config.yaml"]
    data = yaml.safe_load(text)
    return load_settings(**data, database_url="postgresql+asyncpg://u@db/fleetgate")


def _rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                key = (group, resource)
                assert key not in out, f"{key} granted twice"
                out[key] = set(rule["verbs"])
    return out


def _openapi_to_jsonschema(schema: Any, root: bool = True) -> Any:
    """The CRD's structural schema as JSON Schema: unknown fields are pruned by the API server,
    so here they are errors; the root also has apiVersion, kind and metadata implicitly."""
    if isinstance(schema, list):
        return [_openapi_to_jsonschema(v, False) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: _openapi_to_jsonschema(v, False)
        for k, v in schema.items()
        if not k.startswith("x-kubernetes-")
    }
    if schema.get("type") == "object" and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    if root:
        out["properties"] = {
            **out.get("properties", {}),
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
        }
    return out
