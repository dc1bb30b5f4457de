"""The ``karpenter`` cluster plugin."""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.plugins import hookimpl
from fleetgate.domain.ports import Clock, ClusterGateway


@hookimpl
def fleetgate_cluster_names() -> list[str]:
    """This plugin serves the ``karpenter`` cluster."""
    return ["karpenter"]


@hookimpl
def fleetgate_make_cluster(
    name: str, options: dict[str, Any], clock: Clock | None, namespace: str
) -> ClusterGateway | None:
    """Build the Karpenter gateway (connects on ``start()``)."""
    if name != "karpenter":
        return None
    from fleetgate.adapters.karpenter.gateway import KarpenterGateway

    return KarpenterGateway(clock=clock, **{"namespace": namespace, **options})
