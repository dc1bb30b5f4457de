"""The capacity-aware example simulation (``examples/fleet-ledger.yaml``), pinned in
``golden_capacity.json``. Regenerate only on a deliberate behaviour change:
``python -m tests.apps.simulate.capacity_examples`` (it rewrites the file).
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from fleetgate.apps.container import Container
from fleetgate.apps.policyfile import load_policy, policies_from_text
from fleetgate.apps.services.simulation import SimulationInputs
from fleetgate.apps.simulate.fleet import load_fleet
from tests.strategies import SIM_START

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).with_name("golden_capacity.json")
DAYS = 30


def run_document(
    document: dict[str, Any], days: int = DAYS, policy_text: str | None = None
) -> dict[str, Any]:
    """A simulation of ``document`` under the examples' simulator policy (or ``policy_text``)."""
    fleet = load_fleet(document, SIM_START)
    if policy_text is None:
        policy = load_policy(EXAMPLES / "policy-simulate.yaml")
    else:
        (policy,) = policies_from_text(policy_text)
    inputs = SimulationInputs(policy, fleet, SIM_START, SIM_START + timedelta(days=days))
    return Container().simulator().run(inputs).document()


# --- issue 41's scenarios: each strands placements with the gate off, none with it on --------

_POOL = """
fleet:
  pool: workers
  labels: {fleetgate.io/rotate: "true"}
  expireAfter: 14d
  terminationGracePeriod: 1h
"""

PLACEHOLDER_ON_A_NODE_THAT_EXISTED = (
    _POOL
    + """
  nodes:
    - {name: big-1, createdAt: "2023-12-20T08:00:00Z"}
    - {name: spare, createdAt: "2023-12-31T08:00:00Z"}
    - {name: small-1, createdAt: "2023-12-31T08:00:00Z"}
  ledger:
    nodeCpu: 4
    nodes:
      big-1: {cpu: 8, placements: [{namespace: team, cpus: 4, memoryMb: 1024, diskGb: 5, count: 5}]}
      spare: {cpu: 8, workloadCpu: 1, placements: [{namespace: team, cpus: 4, memoryMb: 1024,
              diskGb: 5, count: 5}]}
      small-1: {placements: [{namespace: web, cpus: 4, memoryMb: 1024, diskGb: 5, count: 3}]}
    addNodes: [{at: "2024-01-02T18:30:00Z", cpu: 8}]
"""
)
"""big-1's placeholder fits the Pods' room on ``spare`` (a node that existed): Karpenter launches
nothing, and the ledger has 4 vCPU free for big-1's 20. Room comes with a node added at 18:30."""

FRAGMENTED_ROOM = (
    _POOL
    + """
  nodes:
    - {name: big-1, createdAt: "2023-12-20T08:00:00Z"}
    - {name: n-1, createdAt: "2023-12-31T08:00:00Z"}
    - {name: n-2, createdAt: "2023-12-31T08:00:00Z"}
  ledger:
    nodeCpu: 4
    nodes:
      big-1: {cpu: 8, placements: [{namespace: team, cpus: 8, memoryMb: 1024, diskGb: 5},
              {namespace: team, cpus: 2, memoryMb: 512, diskGb: 5, count: 2}]}
      n-1: {cpu: 8, workloadCpu: 1, placements: [{namespace: web, cpus: 6, memoryMb: 1024,
            diskGb: 5, count: 3}]}
      n-2: {cpu: 8, workloadCpu: 1, placements: [{namespace: web, cpus: 6, memoryMb: 1024,
            diskGb: 5, count: 3}]}
    addNodes: [{at: "2024-01-02T18:30:00Z", cpu: 4}]
"""
)
"""big-1's 12 vCPU need 12 free, and 12 are free, 6 on each of n-1 and n-2: its 8-vCPU
placement fits neither (the placeholder lands on n-1, so no surge comes either)."""

SURGE_NEVER_READY = (
    _POOL
    + """
  nodes:
    - {name: big-1, createdAt: "2023-12-19T20:30:00Z"}
    - {name: small-1, createdAt: "2023-12-31T08:00:00Z"}
    - {name: small-2, createdAt: "2023-12-31T08:00:00Z"}
  ledger:
    nodeCpu: 8
    nodes:
      big-1: {cpu: 8, placements: [{namespace: team, cpus: 4, memoryMb: 1024, diskGb: 5, count: 5}]}
      small-1: {cpu: 4, placements: [{namespace: web, cpus: 4, memoryMb: 1024, diskGb: 5,
                count: 2}]}
      small-2: {cpu: 4, placements: [{namespace: web, cpus: 4, memoryMb: 1024, diskGb: 5,
                count: 2}]}
    addNodes: [{at: "2024-01-02T19:45:00Z", cpu: 8}]
env: {provisioning: 30d}
"""
)
"""No surge ever becomes Ready: every attempt fails, and near big-1's deadline (20:30) the
forceful fallback (FALLBACK_POLICY) would drain it without one. Room comes at 19:45."""

FALLBACK_POLICY = """
apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata: {name: workers}
spec:
  nodePoolSelector: {matchLabels: {fleetgate.io/rotate: "true"}}
  minRotationChances: 2
  maintenanceWindows:
    - {timezone: Asia/Tokyo, days: [Wed, Sat], start: "02:00", end: "06:00"}
  surge:
    readyTimeout: 15m
    cooldownAfter: 10m
    retryBackoff: 1m
    failurePause: 5m
    forcefulFallback: {enabled: true}
"""

SCENARIOS = {
    "placeholder on a node that existed": (PLACEHOLDER_ON_A_NODE_THAT_EXISTED, None),
    "fragmented room": (FRAGMENTED_ROOM, None),
    "surge never Ready": (SURGE_NEVER_READY, FALLBACK_POLICY),
}
"""Each scenario's fleet and policy (None: the examples' simulator policy)."""


def scenario(name: str, gate: bool) -> dict[str, Any]:
    """Three days of scenario ``name``, with the ledger gate on or off."""
    text, policy = SCENARIOS[name]
    document = yaml.safe_load(text)
    document["fleet"]["ledger"]["gate"] = gate
    return run_document(document, days=3, policy_text=policy)


def example() -> dict[str, Any]:
    """The example fleet's run: the ledger part, the summary and every event."""
    doc = run_document(yaml.safe_load((EXAMPLES / "fleet-ledger.yaml").read_text()))
    summary = {k: v for k, v in doc["summary"].items() if k != "controllerPasses"}
    return {
        "ledger": doc["ledger"],
        "summary": summary,
        "events": doc["events"],
        "diagnostics": doc["diagnostics"],
    }


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(example(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}", file=sys.stderr)
