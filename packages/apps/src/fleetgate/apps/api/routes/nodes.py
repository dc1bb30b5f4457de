"""Nodes (admin only): declare capacity, publish metrics, cordon, remove, read."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status

from fleetgate.apps.api.auth import GuardedRoute, access, bearer_scheme
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.errors import ApiError, not_found
from fleetgate.apps.api.paging import DEFAULT_PAGE, LINK_HEADER, PageSize, link_next_page
from fleetgate.apps.api.schemas import (
    UNSUPPORTED_MEDIA_TYPE,
    ErrorBody,
    MetricsPut,
    NodeBody,
    NodeName,
    NodePut,
)
from fleetgate.domain.capacity.dimensions import Capacity
from fleetgate.domain.capacity.errors import NodeBusy, NodeExists, NodeNotFound
from fleetgate.domain.capacity.model import NodeMetrics, NodeSpec

router = APIRouter(
    prefix="/v1/nodes",
    tags=["nodes"],
    route_class=GuardedRoute,
    dependencies=[Depends(bearer_scheme)],
    responses={
        401: {"model": ErrorBody, "description": "No or bad token."},
        403: {"model": ErrorBody, "description": "Not the admin token."},
        404: {"model": ErrorBody, "description": "No such node."},
        422: {"model": ErrorBody, "description": "Invalid request; names the field."},
        503: {"model": ErrorBody, "description": "The database did not answer."},
    },
)

NamePath = Annotated[NodeName, Path(description="The node's name.")]

_NAME = {"name": "$request.path.name"}
_LINKS = {
    "GetNode": {"operationId": "get_node", "parameters": _NAME},
    "PublishMetrics": {"operationId": "put_node_metrics", "parameters": _NAME},
    "CordonNode": {"operationId": "cordon_node", "parameters": _NAME},
    "UncordonNode": {"operationId": "uncordon_node", "parameters": _NAME},
    "DeleteNode": {"operationId": "delete_node", "parameters": _NAME},
}


@router.get(
    "",
    operation_id="list_nodes",
    response_model=list[NodeBody],
    responses={200: {"description": "One page of nodes, by name.", "headers": LINK_HEADER}},
)
@access(admin_only=True)
async def list_nodes(
    request: Request,
    response: Response,
    limit: PageSize = DEFAULT_PAGE,
    after: Annotated[
        NodeName | None, Query(description="The last name of the previous page.")
    ] = None,
) -> list[NodeBody]:
    """The nodes by name, one page at a time (see the ``Link`` header)."""
    found = await container_of(request).ledger().nodes(after=after, limit=limit)
    link_next_page(request, response, limit, [n.name for n in found])
    return [NodeBody.of(n) for n in found]


@router.get("/{name}", operation_id="get_node", response_model=NodeBody)
@access(admin_only=True)
async def get_node(request: Request, name: NamePath) -> NodeBody:
    """One node."""
    node = await container_of(request).ledger().node(name)
    if node is None:
        raise not_found("node")
    return NodeBody.of(node)


@router.put(
    "/{name}",
    operation_id="put_node",
    response_model=NodeBody,
    responses={
        200: {"description": "The node was replaced.", "links": _LINKS},
        201: {"model": NodeBody, "description": "The node was added.", "links": _LINKS},
        **UNSUPPORTED_MEDIA_TYPE,
    },
)
@access(admin_only=True)
async def put_node(request: Request, response: Response, name: NamePath, body: NodePut) -> NodeBody:
    """Add the node (201), or replace its capacity, pool and labels (200; counters are kept)."""
    spec = NodeSpec(
        name=name,
        capacity=Capacity(threads=body.threads, memory_mb=body.memory_mb, disk_gb=body.disk_gb),
        pool=body.pool,
        labels=dict(body.labels),
    )
    try:
        node, added = await container_of(request).node_admin().put(spec)
    except (NodeExists, NodeNotFound) as exc:
        raise ApiError(409, "conflict", f"node {name} changed concurrently; retry") from exc
    if added:
        response.status_code = status.HTTP_201_CREATED
    return NodeBody.of(node)


@router.put(
    "/{name}/metrics",
    operation_id="put_node_metrics",
    response_model=NodeBody,
    responses=UNSUPPORTED_MEDIA_TYPE,
)
@access(admin_only=True)
async def put_metrics(request: Request, name: NamePath, body: MetricsPut) -> NodeBody:
    """Publish the node's 1-minute load and schedulable threads (``null``: unknown)."""
    metrics = NodeMetrics(cpu_load_1=body.cpu_load_1, cpu_schedulable=body.cpu_schedulable)
    return NodeBody.of(await container_of(request).ledger().publish_metrics(name, metrics))


@router.post("/{name}/cordon", operation_id="cordon_node", response_model=NodeBody)
@access(admin_only=True)
async def cordon(request: Request, name: NamePath) -> NodeBody:
    """Stop admitting onto the node (its placements stay)."""
    return NodeBody.of(await container_of(request).node_admin().cordon(name))


@router.post("/{name}/uncordon", operation_id="uncordon_node", response_model=NodeBody)
@access(admin_only=True)
async def uncordon(request: Request, name: NamePath) -> NodeBody:
    """Admit onto the node again."""
    return NodeBody.of(await container_of(request).node_admin().uncordon(name))


@router.delete(
    "/{name}",
    operation_id="delete_node",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses={409: {"model": ErrorBody, "description": "The node holds placements."}},
)
@access(admin_only=True)
async def delete_node(request: Request, name: NamePath) -> Response:
    """Remove the node; 409 ``node_busy`` while it holds placements."""
    try:
        await container_of(request).node_admin().remove(name)
    except NodeBusy as exc:
        raise ApiError(
            409, "node_busy", f"node {name} still holds placements", placements=exc.placements
        ) from exc
    return Response(status_code=status.HTTP_204_NO_CONTENT)
