"""The example fleets and policies whose whole simulations are pinned in ``golden_examples.json``.

The golden file was written by main's controller before the incremental census existed; the
test in ``test_golden.py`` replays every case and compares all it decided (rotations, gate and
census reasons, breaches, generations). Regenerate only on a deliberate behaviour change:
``python -m tests.apps.simulate.examples`` (it rewrites the file). It was regenerated once since,
when the census gained the ``KarpenterDisrupting`` and ``Drifted`` buckets: every case was
checked to equal the old file once those two zero counts are left out of the events; and again
when the summary gained ``breachedNodes`` and the breach diagnostic counted nodes and breaches
apart (only those two fields changed, in every case); and again when the summary gained
``forcedDrains`` (0 in every case) and the controller's ``drain-stuck`` report became an event
(one case each of two policies on the listed fleet with slow drains, whose 2h-tGP node outlives
the pool's drain bound; nothing else changed).
"""

from __future__ import annotations

import hashlib
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
GOLDEN = Path(__file__).with_name("golden_examples.json")
DAYS = 30

# policy file -> labels that its nodePoolSelector selects
POLICIES = {
    "policy-simulate.yaml": {"fleetgate.io/rotate": "true"},
    "policy-weekly.yaml": {"fleetgate.io/rotate": "true"},
    "auto-mode-policy.yaml": {"fleetgate.io/rotate": "true"},
    "overnight-policy.yaml": {"fleetgate.io/rotation": "overnight"},
    "weekend-policy.yaml": {"fleetgate.io/rotation": "weekend"},
}
FLEETS = ("fleet-generated.yaml", "fleet-infeasible.yaml", "fleet-listed.yaml")
# Environments beside the fleet's own: surges that always time out (failures, backoff,
# failure pauses) and drains cut at the claim's tGP.
ENVS: dict[str, dict[str, timedelta]] = {
    "fleet-env": {},
    "slow-surge": {"env_provisioning": timedelta(minutes=25)},
    "slow-drain": {"env_drain": timedelta(hours=2)},
}


# The slow environments only for the policies whose failure handling differs most (the
# forceful fallback; a long retry backoff): every case costs the test suite a second.
VARIED = ("auto-mode-policy.yaml", "weekend-policy.yaml")


def cases() -> list[tuple[str, str, str]]:
    """Every (policy, fleet, environment) the golden file holds."""
    return [
        (p, f, e) for p in POLICIES for f in FLEETS for e in ENVS if e == "fleet-env" or p in VARIED
    ]


def run_full(policy_file: str, fleet_file: str, env: str) -> dict[str, Any]:
    """One example simulation: everything the controller decided (passes left out)."""
    document = yaml.safe_load((EXAMPLES / fleet_file).read_text(encoding="utf-8"))
    document["fleet"]["labels"] = POLICIES[policy_file]
    fleet = load_fleet(document, SIM_START)
    policy = load_policy(EXAMPLES / policy_file)
    end = SIM_START + timedelta(days=DAYS)
    inputs = SimulationInputs(policy, fleet, SIM_START, end, **ENVS[env])  # type: ignore[arg-type]
    doc = Container().simulator().run(inputs).document()
    summary = {k: v for k, v in doc["summary"].items() if k != "controllerPasses"}
    return {
        "summary": summary,
        "events": doc["events"],
        "rotations": doc["rotations"],
        "generations": doc["generations"],
        "diagnostics": doc["diagnostics"],
        "partial": doc["partial"],
    }


def digest(value: object) -> str:
    """A short fingerprint of a JSON value (sorted keys)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_case(policy_file: str, fleet_file: str, env: str) -> dict[str, Any]:
    """One case as the golden file keeps it: the summary and every breach in full, and
    fingerprints of the gate and census reasons, the whole event list, rotations and
    generations (the full documents would be megabytes)."""
    full = run_full(policy_file, fleet_file, env)
    reasons = [e for e in full["events"] if e["type"] in _REASONS]
    return {
        "summary": full["summary"],
        "diagnostics": full["diagnostics"],
        "partial": full["partial"],
        "breaches": [e for e in full["events"] if e["type"] == "expire-after-breach"],
        "reasons": digest(reasons),
        "reasonCount": len(reasons),
        "events": digest(full["events"]),
        "rotations": digest(full["rotations"]),
        "generations": digest(full["generations"]),
    }


_REASONS = {"blocked-by-gate", "no-eligible-claim", "not-starting"}


def key(policy_file: str, fleet_file: str, env: str) -> str:
    """The golden file's key of one case."""
    return f"{policy_file}|{fleet_file}|{env}"


def main() -> int:
    """Rewrite the golden file from the code as it is now."""
    golden = {key(*case): run_case(*case) for case in cases()}
    text = json.dumps(golden, indent=None, sort_keys=True, separators=(",", ":"))
    GOLDEN.write_text(text.replace('},{"', '},\n{"') + "\n", encoding="utf-8")
    print(f"wrote {len(golden)} cases to {GOLDEN}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
