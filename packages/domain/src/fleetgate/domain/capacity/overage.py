"""Advisory overage: the part of a claim's usage above its limit, accounted on the cluster row.

An advisory claim lets its namespace go over the limit. That excess is in neither ``claimed_*``
(only limits are) nor the unclaimed usage, so left alone the cluster guard could over-admit by
exactly that much (the reference's defect 5). fleetgate counts each claim's overage into the
cluster's ``unclaimed_used_*``, so the cluster guard sees all usage:
``unclaimed_used = usage of unclaimed namespaces + Σ over active claims of max(0, used - limit)``.
"""

from __future__ import annotations

from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources


def overage(used: Resources, limit: Resources) -> Resources:
    """``max(0, used - limit)`` per dimension."""
    return used.minus_floored(limit)


def overage_increase(limit: Resources, used_before: Resources, charge: Resources) -> Resources:
    """How much the overage grows when ``charge`` is added to ``used_before``."""
    before = overage(used_before, limit)
    after = overage(used_before.plus(charge), limit)
    return Resources(*(after.get(d) - before.get(d) for d in ALLOCATION))


def overage_decrease(limit: Resources, used_before: Resources, credit: Resources) -> Resources:
    """How much the overage shrinks when ``credit`` is taken off ``used_before`` (floored)."""
    before = overage(used_before, limit)
    after = overage(used_before.minus_floored(credit), limit)
    return Resources(*(before.get(d) - after.get(d) for d in ALLOCATION))
