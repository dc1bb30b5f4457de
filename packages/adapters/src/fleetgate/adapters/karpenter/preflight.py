"""Preflight: before leading or acting, prove the cluster serves what the controller needs.

Karpenter v1 must be served (discovery lists ``nodeclaims`` and ``nodepools`` under
``karpenter.sh/v1``) and the controller's identity must be able to list both (``limit=1``). A
failure names what is missing and what to do about it, so a wrong install fails at startup with
one readable message instead of every pass failing later.
"""

from __future__ import annotations

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from fleetgate.adapters.karpenter.connection import (
    KARPENTER_GROUP,
    KARPENTER_VERSION,
    api_error_message,
)

REQUIRED = ("nodeclaims", "nodepools")


class PreflightError(RuntimeError):
    """The cluster cannot run the rotation controller; the message says why and what to do."""


async def preflight(api: client.ApiClient) -> None:
    """Raise ``PreflightError`` unless karpenter.sh/v1 NodeClaims and NodePools are listable."""
    group_version = f"{KARPENTER_GROUP}/{KARPENTER_VERSION}"
    custom = client.CustomObjectsApi(api)
    try:
        served = await custom.get_api_resources(KARPENTER_GROUP, KARPENTER_VERSION)
    except ApiException as exc:
        if exc.status != 404:
            raise PreflightError(
                f"preflight: discovery of {group_version} failed: {exc.status} "
                f"{api_error_message(exc)}"
            ) from exc
        raise PreflightError(
            f"preflight: the cluster does not serve {group_version}"
            + await _other_versions(api)
            + ". fleetgate needs Karpenter v1 (self-managed Karpenter >= 1.0, or EKS Auto Mode): "
            "install or upgrade Karpenter, then restart the controller."
        ) from exc
    names = {r.name for r in served.resources or ()}
    missing = [r for r in REQUIRED if r not in names]
    if missing:
        raise PreflightError(
            f"preflight: {group_version} is served but without "
            + ", ".join(missing)
            + "; the Karpenter CRDs are incomplete: reinstall the Karpenter v1 CRDs."
        )
    problems = []
    for plural in REQUIRED:
        try:
            await custom.list_cluster_custom_object(
                KARPENTER_GROUP, KARPENTER_VERSION, plural, limit=1
            )
        except ApiException as exc:
            hint = (
                "grant the controller's service account get/list/watch on it (the chart's "
                "ClusterRole does; check that the ClusterRoleBinding names this service account)"
                if exc.status in (401, 403)
                else "check the API server and Karpenter's CRD"
            )
            problems.append(
                f"cannot list {plural}.{KARPENTER_GROUP}: {exc.status} "
                f"{api_error_message(exc)} -> {hint}"
            )
    if problems:
        raise PreflightError("preflight: " + "; ".join(problems))


async def _other_versions(api: client.ApiClient) -> str:
    """ ", only karpenter.sh/v1beta1" when an older Karpenter is installed, else ""."""
    try:
        groups = await client.ApisApi(api).get_api_versions()
    except ApiException:
        return ""
    for group in groups.groups or ():
        if group.name == KARPENTER_GROUP:
            versions = ", ".join(v.group_version for v in group.versions or ())
            return f" (it serves only {versions}: that Karpenter is older than v1)"
    return " (no karpenter.sh API group at all: Karpenter is not installed)"
