"""What a snapshot of a node already says about a request: no room there, or maybe room.

The walk uses it to leave out candidates a read has shown to be full (``walk.Presume``); it never
admits anything on its own: a node presumed to have room is tried under the guarded UPDATE, and a
presumed refusal is confirmed by a newer read before a request is refused (``walk.Walk``).
"""

from __future__ import annotations

from fleetgate.domain.capacity.denials import Denial, deny
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.guards import node_guard
from fleetgate.domain.capacity.model import NodeState


def presumed_refusal(
    node: NodeState, resources: Resources, demand: float, target_load: float
) -> Denial | None:
    """The node guard's refusal of ``resources`` on ``node`` as read, unless it may admit.

    A refusal by the demand clause alone is never presumed: the waiver pass may still admit
    there, and demand decays with time, so only a real dimension (or a cordon) rules a node out.
    """
    used, limits = node.used, node.limits
    if (
        node.schedulable
        and used.cpus + resources.cpus <= limits.cpus
        and used.memory_mb + resources.memory_mb <= limits.memory_mb
        and used.disk_gb + resources.disk_gb <= limits.disk_gb
    ):
        # Room on every real dimension: only demand could refuse, and that is never presumed.
        # Said without the guard's evaluator, which costs far more and is asked of every
        # candidate a walk draws (a property test holds the two to the same answer).
        return None
    params: dict[str, float | int] = {
        **resources.as_dict(),
        "demand": demand,
        "target_load": target_load,
    }
    denial = deny(node_guard(target_load), node.guard_row(), params)
    return None if denial is None or denial.demand_only else denial
