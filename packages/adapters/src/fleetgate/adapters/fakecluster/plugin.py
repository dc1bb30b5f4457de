"""The ``fake`` cluster plugin."""

from __future__ import annotations

from typing import Any

from fleetgate.adapters.plugins import hookimpl
from fleetgate.domain.ports import Clock, SimulatedCluster


@hookimpl
def fleetgate_cluster_names() -> list[str]:
    """This plugin serves the ``fake`` cluster."""
    return ["fake"]


@hookimpl
def fleetgate_make_cluster(
    name: str, options: dict[str, Any], clock: Clock | None
) -> SimulatedCluster | None:
    """Build an in-memory fake cluster on ``clock``."""
    if name != "fake":
        return None
    from fleetgate.adapters.fakecluster.cluster import FakeCluster

    return FakeCluster(clock=clock, **options)
