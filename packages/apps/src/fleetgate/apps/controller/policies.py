"""Where the controller's policies come from: the policy files, then the cluster's objects."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import structlog

from fleetgate.apps.controller.shell import PolicySource
from fleetgate.apps.policyfile import load_policies
from fleetgate.domain.ports import ClusterGateway
from fleetgate.domain.rotation.manifest import read_manifest
from fleetgate.domain.rotation.policy import RotationPolicy

_log = structlog.get_logger("fleetgate.controller")


def policy_source(files: Sequence[Path], cluster: ClusterGateway) -> PolicySource:
    """Policies from the files, then from the cluster (an invalid one still takes part, so a
    pool it wins is reported as conflicted rather than silently falling to another policy)."""

    async def policies() -> list[RotationPolicy]:
        found: list[RotationPolicy] = []
        for path in files:
            found.extend(load_policies(path))
        manifests = await cluster.list_policies()
        for manifest in manifests or ():
            policy, errors = read_manifest(manifest)
            if errors:
                _log.warning(
                    "invalid RotationPolicy in the cluster", policy=policy.name, errors=errors
                )
            found.append(policy)
        return found

    return policies
