"""The Helm chart, rendered by real Helm: it lints strictly, every manifest is valid Kubernetes,
bad values are refused at install time, and the config it renders is one fleetgate accepts.
(RBAC is derived from the code's own requests in test_rbac.py.)"""

from __future__ import annotations

import base64
import copy
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry

from fleetgate.apps.container import build_container
from fleetgate.apps.controller.endpoints import ControllerEndpoints
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.settings import load_settings
from fleetgate.domain.rotation.manifest import read_manifest
from tests.deploy.helm import CHART, HelmError, helm, lint, template

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
    "networkPolicy": {
        "enabled": True,
        "apiFrom": [{"namespaceSelector": {"matchLabels": {"fleetgate.io/client": "true"}}}],
        "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
    },
}
MONITORED = {
    **BASE,
    "metrics": {"prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}}},
}
TRIAL = {"database": {"url": "postgresql+asyncpg://fleetgate:pw@db:5432/fleetgate"}}
# The value sets docs/deploy.md documents: the minimum, everything switched on, monitoring, trial.
VALUE_SETS = {"defaults": BASE, "everything": EVERYTHING, "monitored": MONITORED, "trial": TRIAL}


_RENDERED: dict[str, list[dict[str, Any]]] = {}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """``helm template`` of ``values`` (memoised: Helm is a subprocess)."""
    key = yaml.safe_dump(values)
    if key not in _RENDERED:
        _RENDERED[key] = template(copy.deepcopy(values), namespace="fleetgate-system")
    return copy.deepcopy(_RENDERED[key])


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} found"
    return matches[0]


def crd(group: str = "fleetgate.io") -> dict[str, Any]:
    return yaml.safe_load((CHART / "crds" / f"rotationpolicies.{group}.yaml").read_text())


@pytest.mark.parametrize("name", VALUE_SETS)
def test_helm_lint_strict_passes_for_every_documented_value_set(name: str) -> None:
    report = lint(VALUE_SETS[name])
    assert "0 chart(s) failed" in report and "[ERROR]" not in report and "[WARNING]" not in report


@pytest.mark.parametrize("name", VALUE_SETS)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_builtin_manifest_is_valid_kubernetes(name: str, version: str) -> None:
    docs = render(VALUE_SETS[name])
    builtin = [
        d
        for d in docs
        if d["apiVersion"].split("/")[0] not in ("monitoring.coreos.com", "fleetgate.io")
    ]
    assert len(builtin) >= 12
    for doc in [*builtin, crd(), crd("noderotation.io")]:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_rotation_policies_fit_the_crd_and_the_controller_reads_them() -> None:
    schema = _openapi_to_jsonschema(crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    [policy] = [d for d in render(EVERYTHING) if d["kind"] == "RotationPolicy"]
    jsonschema.validate(policy, schema)
    read, errors = read_manifest(policy)
    assert errors == [] and read.name == "weeknights"
    with pytest.raises(jsonschema.ValidationError, match="'maintenanceWindows' is a required"):
        jsonschema.validate({**policy, "spec": {"nodePoolSelector": {}}}, schema)


def test_service_monitor_is_a_switch_and_has_the_operators_shape() -> None:
    assert not [d for d in render(BASE) if d["kind"] == "ServiceMonitor"]
    monitor = find(render(EVERYTHING), "ServiceMonitor")
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
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "honorLabels"}
    # The tenant namespace label of the admission series survives the scrape (Grafana's
    # $namespace); the controller's series have no such label and keep the Pod's.
    honour = {e["port"]: e.get("honorLabels", False) for e in spec["endpoints"]}
    assert honour == {"http": True, "metrics": False}
    # Each endpoint port exists on a Service the selector matches.
    services = [d for d in render(EVERYTHING) if d["kind"] == "Service"]
    selected = [
        s
        for s in services
        if all(
            s["metadata"]["labels"].get(k) == v for k, v in spec["selector"]["matchLabels"].items()
        )
    ]
    ports = {p["name"] for s in selected for p in s["spec"]["ports"]}
    assert ports == {"metrics", "http"}


def test_rbac_binds_the_controllers_service_account_and_grants_no_wildcards() -> None:
    docs = render(BASE)
    everything = [rule for kind in ("ClusterRole", "Role") for rule in find(docs, kind)["rules"]]
    assert not any(
        "priorityclasses" in rule["resources"] or "*" in rule["verbs"] + rule["resources"]
        for rule in everything
    )
    for binding in (find(docs, "ClusterRoleBinding"), find(docs, "RoleBinding")):
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": "fleetgate-controller",
                "namespace": "fleetgate-system",
            }
        ]


def test_controller_replicas_roll_one_at_a_time_on_different_nodes() -> None:
    deployment = find(render(BASE), "Deployment", "fleetgate-controller")
    assert deployment["spec"]["replicas"] == 2
    # Every Ready replica can lead, so a rolling update (and helm --wait) can finish.
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "fleetgate-controller"
    [term] = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == (deployment["spec"]["selector"]["matchLabels"])
    )
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


def test_anti_affinity_can_be_required_off_or_replaced() -> None:
    def affinity(controller: dict[str, Any]) -> Any:
        docs = render({**BASE, "controller": controller})
        return find(docs, "Deployment", "fleetgate-controller")["spec"]["template"]["spec"].get(
            "affinity"
        )

    required = affinity({"antiAffinity": "required"})["podAntiAffinity"]
    assert set(required) == {"requiredDuringSchedulingIgnoredDuringExecution"}
    assert affinity({"antiAffinity": "none"}) is None
    own = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    assert affinity({"affinity": own}) == own


def test_disruption_budgets_allow_one_eviction_per_component() -> None:
    docs = render(BASE)
    for component in ("controller", "api"):
        budget = find(docs, "PodDisruptionBudget", f"fleetgate-{component}")
        assert budget["spec"]["maxUnavailable"] == 1
        deployment = find(docs, "Deployment", f"fleetgate-{component}")
        assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    single = render({**BASE, "controller": {"replicas": 1}})
    assert [d["metadata"]["name"] for d in single if d["kind"] == "PodDisruptionBudget"] == [
        "fleetgate-api"
    ]  # a budget over one replica would block every drain of its node


def test_api_and_reconciler_get_the_database_from_the_secret_and_no_api_token() -> None:
    docs = render(EVERYTHING)
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


def test_a_database_is_required() -> None:
    with pytest.raises(HelmError, match=r"set database\.existingSecret"):
        template({})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"controller": {"replicas": "two"}}, r"controller\.replicas: Invalid type"),
        ({"controler": {}}, r"Additional property controler is not allowed"),
        ({"logFormat": "xml"}, r"logFormat: logFormat must be one of"),
        ({"priorityClass": {"value": 10}}, r"priorityClass\.value: Must be less than or equal"),
        ({"controller": {"antiAffinity": "soft"}}, r"controller\.antiAffinity: .*must be one of"),
        ({"database": {"url": "sqlite:///x.db"}}, r"database\.url: Does not match pattern"),
        ({"config": {"controller": {}}}, r"config"),
        ({"policies": [{"name": "p", "spec": {}}]}, r"maintenanceWindows is required"),
    ],
)
def test_values_schema_refuses_bad_values_naming_the_field(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError, match=message):
        template({**BASE, **values})


def test_a_trial_url_becomes_a_hook_secret_the_pods_read() -> None:
    url = TRIAL["database"]["url"]
    docs = render(TRIAL)
    secret = find(docs, "Secret", "fleetgate-database")
    assert secret["stringData"] == {"url": url}
    assert "pre-install" in secret["metadata"]["annotations"]["helm.sh/hook"]
    job = find(docs, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert int(secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"]
    )  # the Secret exists first
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]


def test_priority_class_is_negative_never_preempting_and_the_one_the_controller_uses() -> None:
    docs = render(BASE)
    priority = find(docs, "PriorityClass")
    assert priority["value"] == -10 and priority["preemptionPolicy"] == "Never"
    assert priority["globalDefault"] is False
    settings = _settings(docs)
    assert settings.controller.priority_class == priority["metadata"]["name"]
    assert not [
        d
        for d in render({**BASE, "priorityClass": {"create": False}})
        if d["kind"] == "PriorityClass"
    ]


def test_the_rendered_config_is_one_fleetgate_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETGATE_PLUGINS", "karpenter")  # load only the plugin under test
    docs = render(EVERYTHING)
    settings = _settings(docs)
    assert settings.cluster == "karpenter"
    assert settings.controller.namespace == "fleetgate-system"
    assert settings.controller.leader_election is True
    assert settings.controller.reference_controller_gone is False
    gone = render({**BASE, "controller": {"referenceControllerGone": True}})
    assert _settings(gone).controller.reference_controller_gone is True
    # The node sync and its ledger gate (issue 41): the gate is on unless switched off.
    assert not settings.controller.sync_ledger and settings.controller.ledger_gate_enabled
    synced = _settings(render({**BASE, "controller": {"syncLedger": True, "ledgerGate": False}}))
    assert synced.controller.sync_ledger and not synced.controller.ledger_gate_enabled
    assert settings.controller.ledger_reservation_seconds == 900
    held = render({**BASE, "controller": {"ledgerReservationSeconds": 120}})
    assert _settings(held).controller.ledger_reservation_seconds == 120
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


def _defaulted(schema: Any, value: Any) -> Any:
    """``value`` with the schema's defaults filled in, as the API server does at admission."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = {k: _defaulted(props.get(k, {}), v) for k, v in value.items()}
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = _defaulted(sub, copy.deepcopy(sub["default"]))
        return out
    if isinstance(value, list):
        return [_defaulted(schema.get("items") or {}, v) for v in value]
    return value


def _crd_schema() -> Any:
    return crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"surge": {"maxUnavailable": 2}}, "2 is greater than the maximum of 1"),
        ({"minRotationChances": 0}, "0 is less than the minimum of 1"),
        ({"ageThreshold": "ten days"}, "'ten days' does not match"),
        ({"surge": {"readyTimeout": "soon"}}, "'soon' does not match"),
        (
            {
                "maintenanceWindows": [
                    {"timezone": "UTC", "days": ["Monday"], "start": "01:00", "end": "05:00"}
                ]
            },
            "'Monday' is not one of",
        ),
    ],
)
def test_the_crd_refuses_at_admission_what_the_reference_refuses(
    spec: dict[str, Any], message: str
) -> None:
    schema = _openapi_to_jsonschema(_crd_schema())
    [policy] = [d for d in render(EVERYTHING) if d["kind"] == "RotationPolicy"]
    jsonschema.validate(policy, schema)  # the documented example is admitted
    bad = {**policy, "spec": {**policy["spec"], **spec}}
    with pytest.raises(jsonschema.ValidationError, match=re.escape(message)):
        jsonschema.validate(bad, schema)


def test_the_crd_defaults_are_the_controllers_own_defaults() -> None:
    minimal = {
        "apiVersion": "fleetgate.io/v1alpha1",
        "kind": "RotationPolicy",
        "metadata": {"name": "minimal"},
        "spec": copy.deepcopy(POLICY["spec"]) | {"surge": {}},
    }
    minimal["spec"].pop("surge")
    admitted = _defaulted(_crd_schema(), minimal)
    spec = admitted["spec"]
    assert spec["ageThreshold"] == "auto" and spec["minRotationChances"] == 2
    assert spec["surge"]["maxUnavailable"] == 1 and spec["surge"]["forcefulFallback"] == {
        "enabled": False
    }
    assert spec["prePull"] == {"enabled": False}
    jsonschema.validate(admitted, _openapi_to_jsonschema(_crd_schema()))
    read_minimal, errors = read_manifest(minimal)
    read_admitted, admitted_errors = read_manifest(admitted)
    assert errors == admitted_errors == []
    assert read_admitted == read_minimal  # defaulting at admission changes nothing fleetgate reads


def test_the_reference_controllers_group_is_served_with_the_same_schema() -> None:
    ours, reference = crd(), crd("noderotation.io")
    assert reference["metadata"]["name"] == "rotationpolicies.noderotation.io"
    assert reference["spec"]["group"] == "noderotation.io"
    names = {k: v for k, v in ours["spec"]["names"].items() if k != "shortNames"}
    assert {k: v for k, v in reference["spec"]["names"].items() if k != "shortNames"} == names
    assert reference["spec"]["scope"] == "Cluster"
    assert reference["spec"]["versions"] == ours["spec"]["versions"]  # one schema, two groups


def test_a_reference_manifest_is_admitted_unchanged_and_read_by_fleetgate() -> None:
    # By the chart's copy of the group; under node-rotation-controller's own CRD (kept during a
    # migration) its manifests and fleetgate's extensions are checked in test_nrc_crd.py.
    manifest = {
        "apiVersion": "noderotation.io/v1alpha1",
        "kind": "RotationPolicy",
        "metadata": {"name": "nightly"},
        "spec": {
            "nodePoolSelector": {"matchLabels": {"rotation": "nightly"}},
            "ageThreshold": "auto",
            "minRotationChances": 2,
            "maintenanceWindows": [
                {"timezone": "Asia/Tokyo", "days": ["Sat", "Sun"], "start": "02:00", "end": "06:00"}
            ],
            "surge": {
                "maxUnavailable": 1,
                "readyTimeout": "15m",
                "cooldownAfter": "10m",
                "retryBackoff": "30m",
                "forcefulFallback": {"enabled": False},
            },
            "prePull": {"enabled": False},
        },
    }
    schema = _openapi_to_jsonschema(
        crd("noderotation.io")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    )
    jsonschema.validate(manifest, schema)
    policy, errors = read_manifest(_defaulted(schema, manifest))
    assert errors == [] and policy.api_version == "noderotation.io/v1alpha1"


def test_the_prometheus_rule_has_the_documented_alerts_over_series_the_controller_serves() -> None:
    assert not [d for d in render(BASE) if d["kind"] == "PrometheusRule"]
    rule = find(render(MONITORED), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    [group] = rule["spec"]["groups"]
    docs = (CHART.parents[2] / "docs" / "deploy.md").read_text()
    registry = CollectorRegistry()
    RotationMetrics(registry)
    ControllerEndpoints(registry, lambda: True)
    served = {m.name for m in registry.collect()} | {
        m.name + "_total" for m in registry.collect() if m.type == "counter"
    }
    deprecated = {m.name for m in registry.collect() if m.documentation.startswith("DEPRECATED")}
    assert deprecated  # the controller's renamed series are still served, as aliases
    assert len(group["rules"]) >= 8
    for alert in group["rules"]:
        assert set(alert) <= {"alert", "expr", "for", "labels", "annotations"}
        assert alert["labels"]["severity"] in ("page", "ticket")
        assert f"`{alert['alert']}`" in docs, f"{alert['alert']} is not in docs/deploy.md"
        documented = alert["expr"].replace(
            'namespace="fleetgate-system"', 'namespace="<release namespace>"'
        )
        assert f"`{documented}`" in docs, (
            f"the expression of {alert['alert']} differs from the docs"
        )
        for metric in re.findall(r"\bfleetgate_[a-z_]+", alert["expr"]):
            assert metric in served, f"{alert['alert']} reads {metric}, which nothing serves"
            assert metric not in deprecated, f"{alert['alert']} reads the deprecated {metric}"


# The drain alert, evaluated by Prometheus's own rule engine: ``promtool test rules`` over the
# rendered PrometheusRule. promtool comes from Debian's ``prometheus`` package, which .ci/run
# installs; without it this test fails (it is never skipped).
_DRAIN_STUCK_TEST = {
    "rule_files": ["rules.yaml"],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            # The gauge of a pool whose drain outlives its bound from minute 3 (a PDB that holds
            # it past terminationGracePeriod + 2m, or a drain without a tGP past 1h), and a pool
            # whose drains end in time.
            "input_series": [
                {
                    "series": 'fleetgate_rotation_drain_stuck{nodepool="web",namespace="fg"}',
                    "values": "0 0 0 1 1 1",
                },
                {
                    "series": 'fleetgate_rotation_drain_stuck{nodepool="db",namespace="fg"}',
                    "values": "0 0 0 0 0 0",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "FleetgateDrainStuck", "exp_alerts": []},
                {
                    "eval_time": "4m",
                    "alertname": "FleetgateDrainStuck",
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "page",
                                "nodepool": "web",
                                "namespace": "fg",
                            },
                            "exp_annotations": {
                                "summary": "A drain in NodePool web outlived its bound: a PDB or "
                                "a finalizer holds it."
                            },
                        }
                    ],
                },
            ],
        }
    ],
}


# The capacity hold's alert (issue 41): a held node whose forced expiry comes within a day. The
# held pool's time left falls below a day at minute 2; a pool held far from its expiry, and one
# not held (its time left is 0 then), never alert.
_HOLD_MEETS_EXPIRY_TEST = {
    "rule_files": ["rules.yaml"],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            "input_series": [
                {"series": 'fleetgate_rotation_ledger_held{nodepool="web",namespace="fg"}',
                 "values": "1 1 1 1"},
                {"series": 'fleetgate_rotation_ledger_hold_expires_in_seconds{nodepool="web",'
                           'namespace="fg"}', "values": "86520 86460 86400 86340"},
                {"series": 'fleetgate_rotation_ledger_held{nodepool="db",namespace="fg"}',
                 "values": "1 1 1 1"},
                {"series": 'fleetgate_rotation_ledger_hold_expires_in_seconds{nodepool="db",'
                           'namespace="fg"}', "values": "900000 899940 899880 899820"},
                {"series": 'fleetgate_rotation_ledger_held{nodepool="batch",namespace="fg"}',
                 "values": "0 0 0 0"},
                {"series": 'fleetgate_rotation_ledger_hold_expires_in_seconds{nodepool="batch",'
                           'namespace="fg"}', "values": "0 0 0 0"},
            ],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "FleetgateCapacityHoldMeetsExpiry",
                 "exp_alerts": []},
                {"eval_time": "3m", "alertname": "FleetgateCapacityHoldMeetsExpiry",
                 "exp_alerts": [{
                     "exp_labels": {"severity": "page", "nodepool": "web", "namespace": "fg"},
                     "exp_annotations": {"summary": (
                         "A node of NodePool web is held for capacity (its ledger placements "
                         "have nowhere to go) less than a day before its forced expiry, when "
                         "Karpenter drains it held or not: raise the pool's limits, shrink a "
                         "capacity claim or add a node.")},
                 }]},
            ],
        }
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    "case", [_DRAIN_STUCK_TEST, _HOLD_MEETS_EXPIRY_TEST], ids=["drain-stuck", "hold-meets-expiry"]
)
def test_the_alerts_fire_in_prometheus_as_their_series_say(
    tmp_path: Path, case: dict[str, Any]
) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (.ci/run does)"
    rule = find(render(MONITORED), "PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(case))

    run = subprocess.run(
        [promtool, "test", "rules", "test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_every_api_replica_reads_the_one_admin_token_secret_the_chart_makes() -> None:
    # Without adminTokenSecret each replica generated its own token (printed to its log) and a
    # token worked on one Pod only; now the release has one Secret that every replica reads.
    for replicas in (2, 3):
        docs = render({**BASE, "api": {"replicas": replicas}})
        secret = find(docs, "Secret", "fleetgate-admin-token")
        token = base64.b64decode(secret["data"]["token"]).decode()
        assert len(token) >= 40 and token.isalnum()
        api = find(docs, "Deployment", "fleetgate-api")["spec"]["template"]["spec"]
        env = {e["name"]: e for e in api["containers"][0]["env"]}
        assert env["FLEETGATE_API__ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "fleetgate-admin-token",
            "key": "token",
        }
    # Kept across upgrades: an existing Secret's token is read back, not replaced.
    source = (CHART / "templates" / "admin-token-secret.yaml").read_text()
    assert 'lookup "v1" "Secret" .Release.Namespace $name' in source
    assert not [d for d in render({**BASE, "api": {"enabled": False}}) if d["kind"] == "Secret"]


def test_the_reconciler_is_probed_on_the_port_it_serves_its_metrics_on() -> None:
    docs = render({**BASE, "reconciler": {"metricsPort": 9102}})
    [container] = find(docs, "Deployment", "fleetgate-reconciler")["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9102}]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FLEETGATE_RECONCILER__METRICS_PORT"] == "9102"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def test_the_network_policy_is_off_by_default_and_opens_only_the_served_ports() -> None:
    assert not [d for d in render(BASE) if d["kind"] == "NetworkPolicy"]
    policy = find(render(EVERYTHING), "NetworkPolicy", "fleetgate")
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "fleetgate"
    api, metrics = spec["ingress"]
    assert api["ports"] == [{"port": 8000, "protocol": "TCP"}]
    assert api["from"] == EVERYTHING["networkPolicy"]["apiFrom"]
    assert {p["port"] for p in metrics["ports"]} == {8080, 8081, 8082}
    assert metrics["from"] == EVERYTHING["networkPolicy"]["metricsFrom"]
    anyone = find(render({**BASE, "networkPolicy": {"enabled": True}}), "NetworkPolicy")
    assert all("from" not in rule for rule in anyone["spec"]["ingress"])  # empty: anyone


def test_the_two_crds_have_distinct_short_names() -> None:
    ours, reference = crd()["spec"]["names"], crd("noderotation.io")["spec"]["names"]
    assert ours["shortNames"] == ["fgrotpol"] and reference["shortNames"] == ["nrrotpol"]
    assert "rotpol" not in ours["shortNames"] + reference["shortNames"]  # the reference's own


def notes(values: dict[str, Any]) -> str:
    """NOTES.txt as Helm renders it: ``helm template`` skips NOTES, so a copy of the chart
    renders it with ``tpl`` into a one-key YAML document."""
    with tempfile.TemporaryDirectory() as scratch:
        chart = Path(scratch) / "fleetgate"
        shutil.copytree(CHART, chart)
        shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes.txt")
        (chart / "templates" / "notes-as-text.yaml").write_text(
            'notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n'
        )
        out = helm(
            "template",
            "fleetgate",
            str(chart),
            "--namespace",
            "fleetgate-system",
            "--show-only",
            "templates/notes-as-text.yaml",
            values=values,
        )
    text: str = yaml.safe_load(out)["notes"]
    return text


def test_the_notes_say_how_to_reach_the_api_and_read_the_admin_token() -> None:
    text = notes(BASE)
    assert "kubectl -n fleetgate-system port-forward svc/fleetgate-api 8000:80" in text
    assert (
        "kubectl -n fleetgate-system get secret fleetgate-admin-token "
        "-o jsonpath='{.data.token}' | base64 -d"
    ) in text
    assert "made by this chart once" in text
    yours = notes({**BASE, "api": {"adminTokenSecret": "mine"}})
    assert "get secret mine -o jsonpath" in yours and "made by this chart" not in yours
    assert "port-forward" not in notes({**BASE, "api": {"enabled": False}})


def test_the_notes_never_put_the_token_on_a_command_line() -> None:
    # Issue 42: `--token "$(kubectl ...)"` shows the secret to ps and the shell history. The
    # token goes into the environment (an export is a shell builtin: no process sees it).
    text = notes(BASE)
    assert "--token" not in text
    assert 'export FLEETGATE_TOKEN="$(kubectl -n fleetgate-system get secret' in text
    commands = [line.strip() for line in text.splitlines() if line.startswith("  ")]
    assert "fleetgate nodes" in commands
    assert all(
        "FLEETGATE_TOKEN" not in c or c.startswith("export FLEETGATE_TOKEN=") for c in commands
    )
