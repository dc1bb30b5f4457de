"""What the rotation controller would report for every pool now, read-only, for the API.

The API does not run the controller, but the controller's pass is a pure function of the pool's
observation, the policies and the time (``machine.step``). This service runs that function over
what the cluster shows and keeps only the report: nothing is annotated, cordoned or created,
and no event or metric is emitted. ``GET /v1/rotation/status`` and ``fleetgate status`` read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetgate.apps.controller.shell import PolicySource
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.ports import Clock, ClusterGateway
from fleetgate.domain.rotation.machine import MachineConfig, PoolReport, step
from fleetgate.domain.rotation.policy import RotationPolicy

#: How far ahead the next window is looked for (a week's windows and then some).
HORIZON = timedelta(days=15)


@dataclass(frozen=True)
class PoolStatus:
    """One pool's report, and when its next maintenance window opens (None: none ahead)."""

    pool: str
    nodes: int
    report: PoolReport
    next_window: tuple[datetime, datetime] | None


class RotationStatus:
    """Reads every pool and derives its report as a controller pass would, changing nothing."""

    def __init__(
        self,
        cluster: ClusterGateway,
        policies: PolicySource,
        clock: Clock,
        config: MachineConfig | None = None,
        relocation: RelocationCheck | None = None,
    ) -> None:
        self._cluster = cluster
        self._policies = policies
        self._clock = clock
        self._config = config or MachineConfig()
        # With the node sync on, the controller's ledger gate is part of what it would report.
        self._relocation = relocation

    async def pools(self) -> list[PoolStatus]:
        """Every pool the cluster has, by name."""
        policies: list[RotationPolicy] = list(await self._policies())
        now = self._clock.now()
        out = []
        for pool in sorted(await self._cluster.list_pools()):
            obs = await self._cluster.observe(pool)
            if obs is None:  # gone between the list and the read
                continue
            found = step(obs, policies, now, self._config)
            if self._relocation is not None and found.needs_ledger:  # as the controller asks
                verdicts = await self._relocation.verdicts(obs)
                found = step(obs, policies, now, self._config, relocation=verdicts)
            report = found.report
            out.append(PoolStatus(pool, len(obs.claims), report, _next_window(report, now)))
        return out


def _next_window(report: PoolReport, now: datetime) -> tuple[datetime, datetime] | None:
    resolved = report.governance.resolved
    if resolved is None:
        return None
    for interval in resolved.schedule.window_intervals(now, now + HORIZON):
        if interval.start > now:
            return interval.start, interval.end
    return None
