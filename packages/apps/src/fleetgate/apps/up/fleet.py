"""The sample fleet ``fleetgate up`` runs: two NodePools on the fake cluster, tenants, a claim.

Each pool is governed by one of the policies (pool *i* by policy *i* modulo their number): its
labels are chosen to satisfy that policy's ``nodePoolSelector``, and its ``expireAfter`` is long
enough for the policy's lead time, so the derivation is feasible whatever policy is given. Node
ages are spread so that one node per pool is due at once and the others fall due one after the
other: rotations start within seconds at the default speed and keep coming.

A pool's surge nodes take as long to become Ready, and its drains as long, as the pool's policy
estimates (``provisioningEstimate``, ``drainEstimate``, as resolved: explicit or defaulted), as
``fleetgate simulate`` assumes by default: the demo simulates what its forecast expects, so the
controller's check of the estimates against observation (``EstimateDisagreesWithObservation``)
has nothing to report. Fixed 2m/6m delays were observed against the defaulted 5m/10m estimates
and kept that warning on every pool card for good.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from random import Random

from fleetgate.apps.simulate.fleet import labels_for
from fleetgate.domain.capacity.claims import ClaimRequest
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import PlacementRequest
from fleetgate.domain.ports import SimulatedCluster
from fleetgate.domain.rotation.constants import (
    DRAIN_ESTIMATE_DEFAULT,
    PROVISIONING_ESTIMATE_DEFAULT,
)
from fleetgate.domain.rotation.policy import RotationPolicy

DEFAULT_POLICIES = Path(__file__).with_name("default-policies.yaml")
TGP = timedelta(hours=1)
MIN_EXPIRE_AFTER = timedelta(days=3)
GI_MILLI = 2**30 * 1000
WORKLOAD_SHARE = 0.75
"""Share of a node's CPU its cluster workload requests: a surge never fits on a neighbour."""

NAMESPACES = ("ci", "web", "analytics")
CLAIMED = "ci"
CLAIM_SHARE = 0.35
"""The ``ci`` claim reserves this share of the cluster's vCPUs, memory and disk."""
CLAIM_LIFETIME = timedelta(days=30)
# About 1-1.5 GB of memory and 10 GB of disk per vCPU, like the nodes (3 vCPU per thread,
# 4 GB and 50 GB per thread): the vCPU limit is what fills first, as on most fleets.
SIZES = (
    Resources(1, 1024, 10),
    Resources(2, 2048, 20),
    Resources(4, 4096, 40),
    Resources(2, 3072, 20),
)


@dataclass(frozen=True)
class PoolPlan:
    """One NodePool of the sample fleet and the policy meant to govern it."""

    name: str
    nodes: int
    cpu: int
    memory_gib: int
    disk_gib: int
    policy: RotationPolicy
    labels: Mapping[str, str] = field(default_factory=dict)
    expire_after: timedelta = MIN_EXPIRE_AFTER

    @property
    def allocatable(self) -> dict[str, int]:
        """A node's allocatable, in milli-units as the cluster reports it."""
        return {
            "cpu": self.cpu * 1000,
            "memory": self.memory_gib * GI_MILLI,
            "ephemeral-storage": self.disk_gib * GI_MILLI,
            "pods": 110_000,
        }


_SHAPES = (("general", 8, 32, 400), ("batch", 16, 64, 800))


def expire_after_for(policy: RotationPolicy) -> timedelta:
    """At least 3 days, and at least twice the policy's lead time (so A >= lead time > 0)."""
    try:
        lead = policy.resolve(TGP).derive(MIN_EXPIRE_AFTER, 0).lead_time
    except ValueError:
        return MIN_EXPIRE_AFTER  # an invalid policy is shown as conflicted; any E will do
    days = math.ceil(2 * lead / timedelta(days=1))
    return max(MIN_EXPIRE_AFTER, timedelta(days=days))


def plan_pools(policies: Sequence[RotationPolicy], nodes: int) -> list[PoolPlan]:
    """Two pools sharing ``nodes`` (the first gets the odd one), each with its policy."""
    if not policies:
        raise ValueError("policies: the sample fleet needs at least one RotationPolicy")
    plans = []
    for index, (name, cpu, memory, disk) in enumerate(_SHAPES):
        policy = policies[index % len(policies)]
        count = nodes // len(_SHAPES) + (1 if index < nodes % len(_SHAPES) else 0)
        plans.append(
            PoolPlan(
                name=name,
                nodes=count,
                cpu=cpu,
                memory_gib=memory,
                disk_gib=disk,
                policy=policy,
                labels=labels_for(policy.node_pool_selector),
                expire_after=expire_after_for(policy),
            )
        )
    return plans


DUE_EVERY = timedelta(minutes=90)


def node_ages(age_threshold: timedelta, count: int) -> list[timedelta]:
    """Ages for ``count`` nodes: the first just past ``age_threshold`` (due now), the others
    younger by equal steps (at most ``DUE_EVERY``), so one more falls due every step."""
    step = min(age_threshold / max(count, 1), DUE_EVERY)
    return [age_threshold + timedelta(minutes=20) - i * step for i in range(count)]


def age_threshold_of(plan: PoolPlan) -> timedelta:
    """The policy's A for the pool (an invalid policy: a day, so the fleet still looks alive)."""
    try:
        return plan.policy.resolve(TGP).derive(plan.expire_after, plan.nodes).age_threshold
    except ValueError:
        return timedelta(days=1)


def estimates_of(plan: PoolPlan) -> tuple[timedelta, timedelta]:
    """The pool's provisioning and drain times: its policy's resolved estimates (an invalid
    policy: the defaults a policy without estimates resolves to)."""
    try:
        derivation = plan.policy.resolve(TGP).derive(plan.expire_after, plan.nodes)
    except ValueError:
        return PROVISIONING_ESTIMATE_DEFAULT, min(TGP, DRAIN_ESTIMATE_DEFAULT)
    return derivation.provisioning_estimate, derivation.drain_estimate


def seed_cluster(cluster: SimulatedCluster, plans: Sequence[PoolPlan], now: datetime) -> None:
    """Create the pools and their Ready nodes (each running a workload Pod) on the fake cluster."""
    for plan in plans:
        provisioning, drain = estimates_of(plan)
        cluster.add_pool(
            plan.name,
            expire_after=plan.expire_after,
            termination_grace_period=TGP,
            labels=dict(plan.labels),
            node_allocatable=plan.allocatable,
            provisioning_delay=provisioning,
            drain_time=drain,
        )
        threshold = age_threshold_of(plan)
        workload = {"cpu": int(plan.cpu * 1000 * WORKLOAD_SHARE)}
        for age in node_ages(threshold, plan.nodes):
            created = now - max(age, timedelta(0))
            cluster.add_node(plan.name, created_at=created, workload=workload)


def random_request(rng: Random, *, namespace: str | None = None) -> PlacementRequest:
    """A placement of one of the sample sizes, in ``namespace`` or a random tenant."""
    ns = namespace or rng.choices(NAMESPACES, weights=(4, 3, 3))[0]
    return PlacementRequest(ns, rng.choice(SIZES))


def claim_request(total: Resources) -> ClaimRequest:
    """The ``ci`` namespace's claim: a share of the cluster, for a virtual month."""
    limit = Resources(*(math.floor(total.get(d) * CLAIM_SHARE) for d in total.as_dict()))
    return ClaimRequest(CLAIMED, limit, int(CLAIM_LIFETIME.total_seconds()))


LEAD_IN = timedelta(minutes=15)


def virtual_start(policies: Sequence[RotationPolicy], now: datetime) -> datetime:
    """Where virtual time starts: shortly before the first policy's next window opens (or now,
    inside one), so the first rotation starts within seconds of ``fleetgate up``."""
    try:
        schedule = policies[0].resolve(TGP).schedule
    except (IndexError, ValueError):
        return now
    upcoming = schedule.window_intervals(now, now + timedelta(days=8))
    if not upcoming or upcoming[0].start <= now:
        return now
    return max(now, upcoming[0].start - LEAD_IN)
