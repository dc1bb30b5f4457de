"""``kubectl get fgrotpol`` columns: each printer column's path finds its value in the status the
controller really writes (``PolicyStatus.as_manifest``), in both CRDs, with the type it declares."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetgate.domain.rotation.status import PolicyStatus, ReadyCondition
from tests.deploy.test_chart import crd

GROUPS = ("fleetgate.io", "noderotation.io")
TYPES = {"string": str, "integer": int, "boolean": bool}


def lookup(document: dict[str, Any], path: str) -> Any:
    """The value at a printer column's JSONPath (dotted keys and ``[?(@.type=="X")]`` filters)."""
    value: Any = document
    for key, wanted in re.findall(r'\.(\w+)(?:\[\?\(@\.type=="(\w+)"\)\])?', path):
        value = value[key]
        if wanted:
            [value] = [item for item in value if item["type"] == wanted]
    return value


def columns(group: str) -> list[dict[str, Any]]:
    [version] = crd(group)["spec"]["versions"]
    found: list[dict[str, Any]] = version["additionalPrinterColumns"]
    return found


@pytest.mark.parametrize("group", GROUPS)
def test_the_printer_columns_read_the_status_the_controller_writes(group: str) -> None:
    status = PolicyStatus(
        observed_generation=3,
        matched_node_pools=("web", "batch"),
        rotating_node_pools=("web",),
        ready=ReadyCondition(True, "Governing", "governs 2 NodePools"),
        window_open=False,
        next_window=datetime(2026, 1, 3, 22, tzinfo=UTC),
        age_threshold="46h43m",
    )
    policy = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
              "status": status.as_manifest()}  # fmt: skip
    shown = {c["name"]: lookup(policy, c["jsonPath"]) for c in columns(group)}
    assert shown == {
        "Ready": "True",
        "Pools": 2,  # counts, the integer shape the reference controller writes
        "Rotating": 1,
        "Window": False,
        "Next Window": "2026-01-03T22:00:00Z",
        "A": "46h43m",
        "Reason": "Governing",
        "Pool Names": ["web", "batch"],
        "Age": "2026-01-01T00:00:00Z",
    }
    for column in columns(group):
        if column["type"] in TYPES and column["name"] != "Pool Names":
            assert isinstance(shown[column["name"]], TYPES[column["type"]]), column


def test_both_crds_show_the_same_columns_and_the_default_view_stays_narrow() -> None:
    assert columns("fleetgate.io") == columns("noderotation.io")
    default = [c["name"] for c in columns("fleetgate.io") if not c.get("priority")]
    # `kubectl get fgrotpol` without -o wide: the at-a-glance set, names and reasons kept for wide.
    assert default == ["Ready", "Pools", "Rotating", "Window", "Next Window", "A", "Age"]
