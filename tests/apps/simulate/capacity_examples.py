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
from fleetgate.apps.policyfile import load_policy
from fleetgate.apps.services.simulation import SimulationInputs
from fleetgate.apps.simulate.fleet import load_fleet
from tests.strategies import SIM_START

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).with_name("golden_capacity.json")
DAYS = 30


def run_document(document: dict[str, Any], days: int = DAYS) -> dict[str, Any]:
    """A simulation of ``document`` under the examples' simulator policy."""
    fleet = load_fleet(document, SIM_START)
    policy = load_policy(EXAMPLES / "policy-simulate.yaml")
    inputs = SimulationInputs(policy, fleet, SIM_START, SIM_START + timedelta(days=days))
    return Container().simulator().run(inputs).document()


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
