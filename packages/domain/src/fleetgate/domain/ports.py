"""Protocols the outside world must satisfy. Adapters implement them; services depend on them.

Each area owns one section below. A port says *what* must happen, never how: the SQL ledger, the
fake cluster and the Karpenter gateway are interchangeable behind these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from fleetgate.domain.events import Event
from fleetgate.domain.rotation.cluster import PlaceholderSpec, PoolObservation
from fleetgate.domain.tokens import ApiToken

# --- time and events -------------------------------------------------------------------------


@runtime_checkable
class Clock(Protocol):
    """The source of "now". Real time in production, virtual time in the simulator and tests."""

    def now(self) -> datetime:
        """Return the current instant as a timezone-aware UTC datetime."""
        ...


@runtime_checkable
class EventSink(Protocol):
    """Where events go: the audit table, logs, Kubernetes Events. Must never raise on delivery."""

    async def emit(self, events: Sequence[Event]) -> None:
        """Record the events, in order. Best-effort: a failed delivery is logged, not raised."""
        ...


# --- capacity ledger (issue: capacity admission) ---------------------------------------------

# --- cluster gateway (issue: rotation controller) --------------------------------------------


@runtime_checkable
class ClusterGateway(Protocol):
    """A cluster with Karpenter NodePools, as the rotation controller sees and changes it.

    Implementations: the fake cluster (in memory, virtual time) and the Karpenter gateway. Every
    write is idempotent where Kubernetes allows it (deleting what is gone is a no-op) so that a
    controller restarted after any side effect can simply re-issue it. Writes raise
    ``ClusterConflict`` (stale version) or ``ObjectNotFound`` (the object is gone); the controller
    treats both as "requeue", never as a failure of the rotation.
    """

    async def list_pools(self) -> Sequence[str]:
        """Return the names of every NodePool, sorted."""
        ...

    async def observe(self, pool: str) -> PoolObservation | None:
        """Read one NodePool with its NodeClaims, Nodes, their Pods and the pool's placeholders.

        Returns None when the pool does not exist. The observation carries the NodePool's
        ``version``, which a conditional ``annotate_pool`` must match.
        """
        ...

    async def list_policies(self) -> Sequence[Mapping[str, Any]] | None:
        """Return the RotationPolicy manifests the cluster carries (parsed YAML/JSON objects).

        None when this backend does not carry policies (the controller then uses its files).
        """
        ...

    async def annotate_pool(
        self, pool: str, patch: Mapping[str, str | None], *, expect_version: str | None = None
    ) -> str:
        """Merge-patch the NodePool's annotations (a None value deletes the key).

        With ``expect_version``, the write happens only if the pool's version still equals it,
        else ``ClusterConflict`` (the anchor write: optimistic lock on the version read at the
        start of the pass). Returns the pool's new version.
        """
        ...

    async def annotate_claim(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a NodeClaim's annotations (a None value deletes the key)."""
        ...

    async def annotate_node(self, name: str, patch: Mapping[str, str | None]) -> None:
        """Merge-patch a Node's annotations: the freeze/unfreeze and cordon markers."""
        ...

    async def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        """Cordon (True) or uncordon (False) a Node: ``spec.unschedulable``."""
        ...

    async def create_placeholder(self, spec: PlaceholderSpec) -> None:
        """Create the placeholder Pod; one of the same namespace and name already there is kept."""
        ...

    async def delete_placeholder(self, namespace: str, name: str) -> None:
        """Delete a placeholder Pod; a Pod already gone is not an error."""
        ...

    async def delete_claim(self, name: str) -> None:
        """Delete a NodeClaim: Karpenter drains its node (PDBs apply) then removes it.

        A claim already deleting or gone is not an error.
        """
        ...


# --- API tokens (issue: HTTP API) ------------------------------------------------------------


@runtime_checkable
class TokenStore(Protocol):
    """Namespace bearer tokens, kept as digests (never the secret). The SQL ledger implements it.

    Token ids are opaque strings. A revoked token stays readable (with ``revoked_at``) so the
    admin can see what existed; it no longer authenticates.
    """

    async def create_token(self, namespace: str, token_digest: str, at: datetime) -> ApiToken:
        """Store a new active token for ``namespace`` with the digest of its secret."""
        ...

    async def token_by_digest(self, token_digest: str) -> ApiToken | None:
        """The token whose secret has this digest (active or revoked), or None."""
        ...

    async def list_tokens(self, namespace: str) -> Sequence[ApiToken]:
        """Every token of ``namespace``, revoked ones included, oldest first."""
        ...

    async def revoke_token(self, namespace: str, token_id: str, at: datetime) -> bool:
        """Revoke an active token of ``namespace``; False if there is none with that id."""
        ...
