"""What the fake cluster hands the controller when it observes a pool: kept by change.

Each object's value is built once per change of that object (see ``model``), the pool's member
lists once per claim or Pod joining, leaving or moving (``members``), and the whole observation
is handed out again while nothing in the cluster changed. Each observation carries the changes
since the pool's last one (an informer's deltas, in effect).
"""

from __future__ import annotations

from fleetgate.adapters.fakecluster.members import PoolMembers
from fleetgate.adapters.fakecluster.state import ClusterState
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.disruption import NODES


class Observations:
    """The observations handed out, and each pool's members kept by change."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        # Per pool: the observation last handed out, reused while nothing at all has changed,
        # and its members (claims, nodes, pods, placeholders), reused while none joined or left.
        self._observed: dict[str, tuple[int, PoolObservation]] = {}
        self._members: dict[str, PoolMembers] = {}
        self._serial = 0  # numbers the observations handed out

    def observe(self, pool: str) -> PoolObservation | None:
        """One pool with its claims, nodes, their pods, and its placeholders (None: no pool)."""
        p = self.state.pools.get(pool)
        if p is None:
            return None
        revisions = self.state.revisions
        observed = self._observed.get(pool)
        if observed is not None and observed[0] == revisions.any:
            return observed[1]
        members = self.members_of(pool)
        claims, nodes, pods, placeholders = members.shown()
        # Handed over with the changes since this pool's last observation: a reader that
        # took that one in need not compare every member.
        self._serial += 1
        last = observed[1].serial if observed is not None else None
        if last is not None and members.shown_in == last:
            changes = members.changes(last)
        else:
            changes = None
            members.forget_changes()
        members.shown_in = self._serial
        obs = PoolObservation(
            name=p.name,
            version=str(p.version),
            expire_after=p.expire_after,
            termination_grace_period=p.termination_grace_period,
            labels=dict(p.labels),
            annotations=dict(p.annotations),
            requirements=p.requirements,
            taints=p.taints,
            limits=dict(p.limits),
            # status.resources also counts the pool's nodes, as Karpenter's counter does.
            resources={**members.resources, NODES: 1000 * len(claims)},
            claims=claims,
            nodes=nodes,
            pods=pods,
            placeholders=placeholders,
            replicas=p.replicas,
            ready=p.ready,
            budgets=p.budgets,
            serial=self._serial,
            changes=changes,
        )
        if observed is not None:
            obs.inherit_indexes(observed[1])
        self._observed[pool] = (revisions.any, obs)
        return obs

    def pool_resources(self, pool: str) -> dict[str, int]:
        """``status.resources``: the summed allocatable of the pool's claims (kept by change)."""
        return dict(self.members_of(pool).resources)

    def members_of(self, pool: str) -> PoolMembers:
        """The pool's members, brought up to date with the records changed since last time."""
        dirty = self.state.revisions.dirty
        if dirty:
            for kept in self._members.values():
                kept.pending.update(dirty)
            dirty.clear()
        members = self._members.get(pool)
        if members is None:
            members = self._members[pool] = PoolMembers(self.state, pool)
        else:
            members.apply(self.state)
        return members
