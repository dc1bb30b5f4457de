"""``kubectl get rotpol`` columns: each printer column's path finds its value in the status the
controller really writes (``PolicyStatus.as_manifest``)."""

from __future__ import annotations

import re
from typing import Any

from fleetgate.domain.rotation.status import PolicyStatus, ReadyCondition
from tests.deploy.test_chart import crd


def lookup(document: dict[str, Any], path: str) -> Any:
    """The value at a printer column's JSONPath (dotted keys and ``[?(@.type=="X")]`` filters)."""
    value: Any = document
    for key, wanted in re.findall(r'\.(\w+)(?:\[\?\(@\.type=="(\w+)"\)\])?', path):
        value = value[key]
        if wanted:
            [value] = [item for item in value if item["type"] == wanted]
    return value


def test_the_printer_columns_read_the_status_the_controller_writes() -> None:
    status = PolicyStatus(
        observed_generation=3,
        matched_node_pools=("web", "batch"),
        rotating_node_pools=("web",),
        ready=ReadyCondition(True, "Governing", "governs 2 NodePools"),
    )
    policy = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
              "status": status.as_manifest()}  # fmt: skip
    [version] = crd()["spec"]["versions"]
    columns = {
        c["name"]: lookup(policy, c["jsonPath"]) for c in version["additionalPrinterColumns"]
    }
    assert columns == {
        "Ready": "True",
        "Pools": ["web", "batch"],
        "Rotating": ["web"],
        "Reason": "Governing",
        "Age": "2026-01-01T00:00:00Z",
    }
