"""The RotationPolicy objects a fake cluster carries, and the statuses written to them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleetgate.adapters.fakecluster.faults import Faults
from fleetgate.domain.rotation.cluster import ObjectNotFound
from fleetgate.domain.rotation.status import PolicyStatus


class PolicyStore:
    """The policy manifests (None: the cluster carries none) and their written statuses."""

    def __init__(self, faults: Faults) -> None:
        self.manifests: list[Mapping[str, Any]] | None = None
        # The status last written per policy name (also mirrored into the manifests).
        self.statuses: dict[str, PolicyStatus] = {}
        self.writes = 0
        self._faults = faults

    def set(self, manifests: Sequence[Mapping[str, Any]] | None) -> None:
        """Carry these manifests, each with ``metadata.generation`` (1 unless it has one)."""
        self.manifests = None if manifests is None else [_stored(m) for m in manifests]

    def write_status(self, name: str, status: PolicyStatus) -> bool:
        """Store the policy's status; False while a conflict is injected.

        A cluster carrying manifests has only those policies (another name is ObjectNotFound)
        and shows the status in them; one carrying none stands in for the cluster the
        controller's file policies would live on, so it stores any name.
        """
        if self._faults.policy_status_conflicts > 0:
            self._faults.policy_status_conflicts -= 1
            return False
        if self.manifests is not None:
            index = next(
                (
                    i
                    for i, m in enumerate(self.manifests)
                    if (m.get("metadata") or {}).get("name") == name
                ),
                None,
            )
            if index is None:
                raise ObjectNotFound(f"rotationpolicy {name} not found")
            self.manifests[index] = {**self.manifests[index], "status": status.as_manifest()}
        self.statuses[name] = status
        self.writes += 1
        return True


def _stored(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A policy manifest as the API server keeps it: with a ``metadata.generation``."""
    metadata = dict(manifest.get("metadata") or {})
    metadata.setdefault("generation", 1)
    return {**manifest, "metadata": metadata}
