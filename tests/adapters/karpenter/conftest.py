"""Fixtures for the Karpenter backend: a local API server, Karpenter's reactions, the gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from tests.adapters.karpenter.karpenter_sim import KarpenterSim
from tests.adapters.karpenter.kubeapi import KubeAPIServer

NAMESPACE = "fleetgate-system"


@pytest.fixture
def clock() -> VirtualClock:
    """Virtual time shared by the server's timestamps and the gateway's user."""
    return VirtualClock(datetime(2026, 1, 7, 2, 0, tzinfo=UTC))  # a Wednesday, 02:00 UTC


@pytest.fixture
async def api(clock: VirtualClock) -> AsyncIterator[KubeAPIServer]:
    """The local Kubernetes API server, stamping objects with the virtual clock."""
    async with KubeAPIServer(now=clock.now) as server:
        yield server


@pytest.fixture
def sim(api: KubeAPIServer) -> KarpenterSim:
    """Karpenter's reactions against ``api``."""
    return KarpenterSim(api)


@pytest.fixture
def kubeconfig(api: KubeAPIServer, tmp_path: Path) -> str:
    """A kubeconfig file naming the local server."""
    path = tmp_path / "kubeconfig"
    path.write_text(api.kubeconfig())
    return str(path)


@pytest.fixture
async def gateway(clock: VirtualClock, kubeconfig: str) -> AsyncIterator[KarpenterGateway]:
    """The real gateway, connected to the local server through the kubeconfig."""
    async with KarpenterGateway(
        clock, kubeconfig=kubeconfig, namespace=NAMESPACE, identity="fleetgate-0"
    ) as gw:
        yield gw
