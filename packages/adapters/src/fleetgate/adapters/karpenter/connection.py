"""The Karpenter backend's options and its connection to the Kubernetes API.

Options come from ``cluster_options`` (plus the controller's namespace, placeholder image and
priority class, which the composition root passes in as defaults). Every option is checked up
front and a bad one is an error naming it, before anything connects.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields, replace
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from fleetgate.adapters.karpenter.leader import default_identity
from fleetgate.adapters.karpenter.podspec import DEFAULT_IMAGE, DEFAULT_PRIORITY_CLASS
from fleetgate.domain.rotation.cluster import ClusterConflict, ObjectNotFound

KARPENTER_GROUP = "karpenter.sh"
KARPENTER_VERSION = "v1"
POLICY_GROUP = "fleetgate.io"
POLICY_VERSION = "v1alpha1"


@dataclass(frozen=True)
class KarpenterOptions:
    """How to reach the cluster and how to act in it.

    ``kubeconfig``/``context`` name a kubeconfig (tests, running outside the cluster); without
    one, the in-cluster service account is used when ``KUBERNETES_SERVICE_HOST`` is set, else
    ``~/.kube/config``. ``namespace`` holds the placeholders, the Lease and core Events.
    ``identity`` names this replica (Lease holder, Event ``reportingInstance``): the Pod name from
    ``POD_NAME``, else the hostname with a per-process suffix (two processes on one host must
    not share one). ``lease_*`` are the leader-election timings in seconds.
    """

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = "fleetgate-system"
    placeholder_image: str = DEFAULT_IMAGE
    priority_class: str = DEFAULT_PRIORITY_CLASS
    identity: str = ""
    lease_name: str = "fleetgate-controller"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    read_concurrency: int = 8
    request_timeout: float = 30.0

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> KarpenterOptions:
        """Validate ``cluster_options``; an unknown or mistyped option is an error naming it."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise ValueError(
                    f"cluster_options.{key}: unknown option for cluster 'karpenter'; known: "
                    + ", ".join(sorted(known))
                )
            default = known[key].default
            if isinstance(default, float) and isinstance(value, int | float | str):
                try:
                    value = float(value)
                except ValueError:
                    raise ValueError(f"cluster_options.{key}: {value!r} is not a number") from None
                if value <= 0:
                    raise ValueError(f"cluster_options.{key}: must be positive, got {value}")
            elif isinstance(default, int) and not isinstance(default, bool):
                if not isinstance(value, int) or value < 1:
                    raise ValueError(f"cluster_options.{key}: must be a positive integer")
            elif value is not None and not isinstance(value, str):
                raise ValueError(f"cluster_options.{key}: must be a string, got {value!r}")
            values[key] = value
        opts = cls(**values)
        if not opts.identity:
            opts = replace(opts, identity=default_identity())
        if not opts.lease_duration > opts.renew_deadline > opts.retry_period:
            raise ValueError(
                "cluster_options.lease_duration: leader election needs lease_duration > "
                f"renew_deadline > retry_period, got {opts.lease_duration} > "
                f"{opts.renew_deadline} > {opts.retry_period}"
            )
        return opts


async def connect(opts: KarpenterOptions) -> client.ApiClient:
    """An API client for the configured cluster (kubeconfig, in-cluster, or the default file)."""
    configuration = client.Configuration()
    if opts.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(
            config_file=opts.kubeconfig,
            context=opts.context,
            client_configuration=configuration,
            persist_config=False,
        )
    return client.ApiClient(configuration)


class KubernetesAPIError(RuntimeError):
    """A Kubernetes API call failed for a reason other than a conflict or a missing object."""


def api_error_message(exc: ApiException) -> str:
    """The ``Status`` message of an API error, or its HTTP reason."""
    try:
        body = json.loads(exc.body or "{}")
    except ValueError:
        body = {}
    return str(body.get("message") or exc.reason or "")


def translate(exc: ApiException, what: str) -> Exception:
    """Map an API error to the port's: 409 -> ``ClusterConflict``, 404 -> ``ObjectNotFound``."""
    message = f"{what}: {exc.status} {api_error_message(exc)}"
    if exc.status == 409:
        return ClusterConflict(message)
    if exc.status == 404:
        return ObjectNotFound(message)
    return KubernetesAPIError(message)
