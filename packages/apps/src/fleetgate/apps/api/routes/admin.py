"""Admin views and actions: the cluster's resources, and a reconcile pass on demand.

A pass run here is the reconciler's own (``Reconciler.run_pass``): it updates the same Prometheus
series and writes the same audit events as the ``fleetgate reconciler`` loop.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.schemas import (
    Amounts,
    ClusterResources,
    DimensionBody,
    ErrorBody,
    NodeResources,
    ReconcileBody,
    ResourcesBody,
)
from fleetgate.domain.capacity.denials import dimensions_of
from fleetgate.domain.capacity.guards import CLUSTER_GUARD, node_guard
from fleetgate.domain.ports import InventoryReader

router = APIRouter(
    prefix="/v1/admin",
    tags=["admin"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={
        401: {"model": ErrorBody, "description": "No or bad token."},
        403: {"model": ErrorBody, "description": "Not the admin token."},
        503: {"model": ErrorBody, "description": "The database did not answer."},
    },
)

# A request of nothing: the guards then report each row's limit and use exactly as the next
# placement's refusal would, without a request in the way.
_NOTHING = {"cpus": 0, "memory_mb": 0, "disk_gb": 0, "demand": 0.0}


@router.get("/resources", operation_id="get_resources", response_model=ResourcesBody)
@access(admin_only=True)
async def resources(request: Request) -> ResourcesBody:
    """The cluster row and every node: limits, use, expected demand, load, schedulable."""
    container = container_of(request)
    ledger: InventoryReader = container.ledger()
    target_load = container.settings().capacity.target_load
    cluster = await ledger.cluster()
    nodes = await ledger.nodes()
    guard = node_guard(target_load)
    params = {**_NOTHING, "target_load": target_load}
    return ResourcesBody(
        cluster=ClusterResources(
            total=Amounts.of(cluster.total),
            claimed=Amounts.of(cluster.claimed),
            unclaimed_used=Amounts.of(cluster.unclaimed_used),
            unclaimed=[
                DimensionBody.of(d)
                for d in dimensions_of(CLUSTER_GUARD, cluster.guard_row(), params)
            ],
            updated_at=cluster.updated_at,
        ),
        nodes=[
            NodeResources(
                name=n.name,
                pool=n.pool,
                schedulable=n.schedulable,
                limits=Amounts.of(n.limits),
                used=Amounts.of(n.used),
                expected_demand=n.expected_demand,
                cpu_load_1=n.metrics.cpu_load_1,
                cpu_schedulable=n.metrics.cpu_schedulable,
                dimensions=[
                    DimensionBody.of(d) for d in dimensions_of(guard, n.guard_row(), params)
                ],
            )
            for n in nodes
        ],
    )


@router.post("/reconcile", operation_id="reconcile", response_model=ReconcileBody)
@access(admin_only=True)
async def reconcile(request: Request) -> ReconcileBody:
    """Run one reconcile pass now (as the reconciler would) and return its report."""
    report = await container_of(request).reconciler().run_pass()
    return ReconcileBody.of(report)
