"""Preflight: Karpenter v1 must be served and listable, or startup fails saying what to do."""

from __future__ import annotations

import pytest

from fleetgate.adapters.karpenter.gateway import KarpenterGateway
from fleetgate.adapters.karpenter.preflight import PreflightError
from tests.adapters.karpenter.kubeapi import DEFAULT_RESOURCES, KubeAPIServer, Resource


async def test_passes_on_a_karpenter_v1_cluster_with_two_small_lists(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    await gateway.preflight()
    assert [(r.method, r.path, r.query) for r in api.requests] == [
        ("GET", "/apis/karpenter.sh/v1", {}),
        ("GET", "/apis/karpenter.sh/v1/nodeclaims", {"limit": "1"}),
        ("GET", "/apis/karpenter.sh/v1/nodepools", {"limit": "1"}),
    ]


async def test_fails_when_karpenter_is_not_installed(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.unserve("karpenter.sh", "v1")
    with pytest.raises(PreflightError) as err:
        await gateway.preflight()
    message = str(err.value)
    assert "does not serve karpenter.sh/v1" in message
    assert "Karpenter is not installed" in message
    assert "EKS Auto Mode" in message


async def test_fails_naming_the_old_version_of_a_pre_v1_karpenter(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.resources = tuple(
        Resource(r.group, "v1beta1", r.plural, r.kind, r.namespaced)
        if r.group == "karpenter.sh"
        else r
        for r in DEFAULT_RESOURCES
    )
    with pytest.raises(PreflightError, match=r"serves only karpenter.sh/v1beta1.*older than v1"):
        await gateway.preflight()


async def test_fails_when_a_crd_is_missing(api: KubeAPIServer, gateway: KarpenterGateway) -> None:
    api.resources = tuple(r for r in DEFAULT_RESOURCES if r.plural != "nodeclaims")
    with pytest.raises(PreflightError, match="served but without nodeclaims"):
        await gateway.preflight()


async def test_fails_when_rbac_forbids_listing(
    api: KubeAPIServer, gateway: KarpenterGateway
) -> None:
    api.forbid("list", "nodepools")
    with pytest.raises(PreflightError) as err:
        await gateway.preflight()
    message = str(err.value)
    assert "cannot list nodepools.karpenter.sh: 403" in message
    assert 'cannot list resource "nodepools"' in message  # the API server's own words
    assert "ClusterRole" in message
    assert "nodeclaims" not in message  # that one was listable
