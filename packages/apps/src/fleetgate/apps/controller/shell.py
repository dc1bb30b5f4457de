"""The controller's imperative shell: observe a pool, step the machine, apply what it says.

One ``RotationController`` serves every pool of one cluster. Pools are independent (each has its
own requeue instant); within a pool, actions are applied strictly in order and a failed write
ends the pass (the pool is requeued and the next pass re-reads the truth from the cluster).

Every pass also keeps the RotationPolicy statuses (spec §8.3) current: the pass's governance of
its pool is remembered, the statuses of all policies are derived from what every pool's last
pass decided, and only a status that changed is written (then the pool is rechecked in 1 s).
Only policies the cluster keeps (they have a ``metadata.generation``) have a status to write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import structlog

from fleetgate.apps.controller.drains import drains, given_up
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.events import Event, Level
from fleetgate.domain.ports import Clock, ClusterGateway, EventSink
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation.annotations import ACTIVE_ROTATION
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.cluster import (
    ClusterConflict,
    ObjectNotFound,
    ObjectUnreadable,
    PoolObservation,
)
from fleetgate.domain.rotation.constants import LONG_REQUEUE, SHORT_REQUEUE
from fleetgate.domain.rotation.machine import MachineConfig, Step, step
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.report import unreadable
from fleetgate.domain.rotation.status import (
    PolicyStatus,
    PoolGovernance,
    desired_statuses,
    needs_write,
    stamped,
    validation_errors,
    window_state,
)
from fleetgate.domain.rotation.sweep import sweep

PolicySource = Callable[[], Awaitable[Sequence[RotationPolicy]]]
_log = structlog.get_logger("fleetgate.controller")
STATUS_RECHECK = timedelta(seconds=1)
"""After a RotationPolicy status write (or a lost one), look at the pool again this soon."""


@dataclass
class PassResult:
    """What one pass over one pool did (for tests, the simulator and ``--once``)."""

    pool: str
    step: Step | None
    applied: list[act.Action] = field(default_factory=list)
    interrupted: str | None = None
    requeue_at: datetime | None = None


class RotationController:
    """The per-pool loop around the pure machine."""

    def __init__(
        self,
        cluster: ClusterGateway,
        policies: PolicySource,
        clock: Clock,
        events: EventSink,
        metrics: RotationMetrics,
        config: MachineConfig | None = None,
        *,
        placeholder_image: str = "",
        priority_class: str = "",
        on_pass: Callable[[PassResult], None] | None = None,
        logger: Any = None,
        relocation: RelocationCheck | None = None,
    ) -> None:
        self.cluster = cluster
        self.policies = policies
        self.clock = clock
        self.events = events
        self.metrics = metrics
        self.config = config or MachineConfig()
        self.placeholder_image = placeholder_image
        self.priority_class = priority_class
        self.on_pass = on_pass
        self.log = logger if logger is not None else _log
        # Gate 9 (issue 33): with the node sync on, the ledger judges each node before a start.
        self.relocation = relocation
        self.swept = False
        self.due: dict[str, datetime] = {}
        self._announced: dict[str, set[str]] = {}
        self._logged: dict[str, dict[str, str]] = {}
        # Policy status: each pool's last governance, the status last written per policy,
        # and what the statuses were last derived from (an unchanged pass derives nothing).
        self._governance: dict[str, PoolGovernance] = {}
        self._statuses: dict[str, PolicyStatus] = {}
        self._status_inputs: tuple[object, ...] | None = None
        # Per pool, the census carried from pass to pass (a cache: a new controller starts
        # without one and rebuilds it from its first observation).
        self._census: dict[str, PoolCensus] = {}

    # --- the loop ----------------------------------------------------------------------------

    async def startup_sweep(self) -> None:
        """Clean up what a dead controller left outside any anchor (once, best-effort)."""
        now = self.clock.now()
        await self._read_statuses()
        for pool in await self.cluster.list_pools():
            try:
                obs = await self.cluster.observe(pool)
            except ObjectUnreadable as exc:
                self.log.warning(
                    "startup sweep skipped an unreadable pool", nodepool=pool, error=str(exc)
                )
                continue
            if obs is None:
                continue
            try:
                await self._apply(pool, sweep(obs, now), now)
            except (ClusterConflict, ObjectNotFound) as exc:
                self.log.warning("startup sweep skipped a write", nodepool=pool, error=str(exc))
        self.swept = True

    async def run_due(self) -> list[PassResult]:
        """Sweep if not yet done, then run a pass for every pool that is due (new pools are)."""
        if not self.swept:
            await self.startup_sweep()
        now = self.clock.now()
        pools = await self.cluster.list_pools()
        for gone in set(self.due) - set(pools):
            self.forget(gone)
        results = []
        for pool in pools:
            if self.due.get(pool, now) <= now:
                results.append(await self.reconcile(pool))
        return results

    async def run_once(self) -> list[PassResult]:
        """One pass over every pool, due or not."""
        self.due.clear()
        return await self.run_due()

    def next_due(self) -> datetime | None:
        """The earliest instant some pool asked to be looked at again."""
        return min(self.due.values(), default=None)

    def poke(self, pool: str | None = None) -> None:
        """Make ``pool`` (or every pool) due now: something changed (a watch event)."""
        for name in [pool] if pool else list(self.due):
            self.due.pop(name, None)

    def forget(self, pool: str) -> None:
        """Drop a vanished pool's schedule, dedup memory and series."""
        self.due.pop(pool, None)
        self._announced.pop(pool, None)
        self._logged.pop(pool, None)
        self._governance.pop(pool, None)
        self._census.pop(pool, None)
        self.metrics.forget(pool)

    # --- one pass ----------------------------------------------------------------------------

    async def reconcile(self, pool: str) -> PassResult:
        """Observe, step, apply, and record when to come back."""
        now = self.clock.now()
        try:
            obs = await self.cluster.observe(pool)
        except ObjectUnreadable as exc:
            return await self._hold_unreadable(pool, exc, now)
        if obs is None:
            self.forget(pool)
            return PassResult(pool, None)
        policies = await self.policies()
        result = self.step(pool, obs, policies, now)
        reserved: list[tuple[str, Verdict]] = []
        if self.relocation is not None and result.needs_ledger:
            # Gate 9: the ledger is read only when the step decided a start or a NodeClaim's
            # deletion (a drain, a surge's rollback), and every pass while one is held; the
            # step then decides again with the plans, and a drain's room is reserved first.
            verdicts = await self.relocation.verdicts(obs)
            result = self.step(pool, obs, policies, now, verdicts)
            result, reserved = await self._reserve(pool, obs, policies, now, result, verdicts)
        outcome = PassResult(pool, result, requeue_at=result.requeue_at)
        memo = _Memo()
        try:
            outcome.applied = await self._apply(pool, result.actions, now, memo)
        except ClusterConflict as exc:
            outcome.interrupted = str(exc)
            outcome.requeue_at = now + LONG_REQUEUE  # the anchor lost a race: look again later
        except ObjectNotFound as exc:
            outcome.interrupted = str(exc)
            outcome.requeue_at = now + SHORT_REQUEUE
        if self.relocation is not None:
            await self._give_back(obs, outcome.applied, reserved)
        if outcome.interrupted is not None:
            self.log.info("pass interrupted; requeued", nodepool=pool, error=outcome.interrupted)
            memo.announced |= self._announced.get(pool, set())
            memo.logged = {**self._logged.get(pool, {}), **memo.logged}
        self._announced[pool] = memo.announced
        self._logged[pool] = memo.logged
        self.metrics.apply(result.report)
        if outcome.requeue_at is None:
            self.due.pop(pool, None)
            # An ungoverned pool waits for a change; poll slowly so a new policy is noticed.
            self.due[pool] = now + LONG_REQUEUE
        else:
            self.due[pool] = outcome.requeue_at
        # A pass that wrote nothing leaves the anchor it observed; one that was interrupted
        # may not have written the anchor its report names.
        anchor = (
            result.report.anchor
            if outcome.interrupted is None
            else obs.annotations.get(ACTIVE_ROTATION) or None
        )
        derived = result.report.derivation
        self._governance[pool] = PoolGovernance.of(
            pool,
            result.report.governance,
            anchor,
            None if derived is None else derived.age_threshold,
        )
        if await self._write_statuses(policies, now):
            # A watch may have poked the pool (dropped its entry: due now) while we wrote.
            self.due[pool] = min(self.due.get(pool, now), now + STATUS_RECHECK)
        if self.on_pass is not None:
            self.on_pass(outcome)
        return outcome

    async def _reserve(
        self,
        pool: str,
        obs: PoolObservation,
        policies: Sequence[RotationPolicy],
        now: datetime,
        result: Step,
        verdicts: dict[str, Verdict],
    ) -> tuple[Step, list[tuple[str, Verdict]]]:
        """Reserve the room of every drain ``result`` begins (gate 9, all or none per node).

        A plan whose room is no longer there (taken since it was read) is judged once more on a
        fresh read: the step then holds the drain, or reserves the new plan. If that too is
        refused, nothing of the pass is applied and the pool is looked at again soon.
        """
        assert self.relocation is not None
        planned: list[tuple[str, Verdict]] = []
        for attempt in range(2):
            if attempt:
                verdicts = await self.relocation.verdicts(obs)
                result = self.step(pool, obs, policies, now, verdicts)
            made: list[tuple[str, Verdict]] = []
            planned = drains(obs, result.actions, verdicts)
            for claim, verdict in planned:
                if not (await self.relocation.reserve(verdict, now)).made:
                    break
                made.append((claim, verdict))
            else:
                return result, made
            for _, verdict in made:  # all of this pass's drains or none
                await self.relocation.release(verdict.node)
        wait = act.Log(
            "drain waits: the room of its node's plan could not be reserved",
            {"nodes": [v.node for _, v in planned]},
        )
        return replace(result, actions=(wait,), requeue_at=now + SHORT_REQUEUE), []

    async def _give_back(
        self,
        obs: PoolObservation,
        applied: Sequence[act.Action],
        reserved: Sequence[tuple[str, Verdict]],
    ) -> None:
        """End the reservations no drain will use: those of a deletion this pass did not make
        (interrupted), and those of a rotation that failed before its drain."""
        assert self.relocation is not None
        deleted = {a.name for a in applied if isinstance(a, act.DeleteClaim)}
        nodes = [v.node for claim, v in reserved if claim not in deleted]
        for node in [*nodes, *given_up(obs, applied)]:
            await self.relocation.release(node)

    async def _hold_unreadable(self, pool: str, exc: ObjectUnreadable, now: datetime) -> PassResult:
        """A pool whose objects cannot be read is held: nothing is written for it, a Warning
        names the field (once per distinct problem), and it is looked at again on the slow
        cadence; the other pools are served as usual."""
        memo = _Memo()
        await self._announce(pool, unreadable(pool, str(exc)), now, memo)
        self._announced[pool] = memo.announced
        self.log.warning("pool held: it cannot be read", nodepool=pool, error=str(exc))
        self.due[pool] = now + LONG_REQUEUE
        outcome = PassResult(pool, None, interrupted=str(exc), requeue_at=self.due[pool])
        if self.on_pass is not None:
            self.on_pass(outcome)
        return outcome

    def step(
        self,
        pool: str,
        obs: PoolObservation,
        policies: Sequence[RotationPolicy],
        now: datetime,
        relocation: dict[str, Verdict] | None = None,
    ) -> Step:
        """The machine's step over ``obs``, with the pool's census carried across passes."""
        # Taken out first: the step spends it, and a step that raised leaves the next pass to
        # start from an empty census.
        census = self._census.pop(pool, None) or PoolCensus()
        result = step(obs, policies, now, self.config, census, relocation)
        if result.census is not None:
            self._census[pool] = result.census
        return result

    # --- policy status (spec §8.3) ------------------------------------------------------------

    async def _read_statuses(self) -> None:
        """Start from the statuses the cluster already carries, so a restart rewrites nothing
        that is still right and keeps each condition's lastTransitionTime."""
        try:
            manifests = await self.cluster.list_policies()
        except Exception as exc:  # best-effort, like the sweep: the first write corrects it
            self.log.warning("could not read RotationPolicy statuses", error=str(exc))
            return
        for manifest in manifests or ():
            name = (manifest.get("metadata") or {}).get("name")
            status = PolicyStatus.from_manifest(manifest.get("status"))
            if isinstance(name, str) and status is not None:
                self._statuses[name] = status

    async def _write_statuses(self, policies: Sequence[RotationPolicy], now: datetime) -> bool:
        """Write every policy status that changed; True when a write was made or lost."""
        inputs = (
            tuple(policies),
            tuple(p.generation for p in policies),
            tuple(self._governance.values()),
            # The window columns change at a window transition only: one write there.
            tuple(window_state(p, now) for p in policies),
        )
        if inputs == self._status_inputs:
            return False  # the same inputs derive the same statuses, all written already
        errors = {p.name: validation_errors(p) for p in policies}
        desired = desired_statuses(policies, errors, self._governance.values(), now)
        for gone in set(self._statuses) - set(desired):
            del self._statuses[gone]
        touched, settled = False, True
        for name, want in desired.items():
            current = self._statuses.get(name)
            # Only an object the API server keeps has a generation, and a status to write to:
            # a policy from a file takes part in governance but has nowhere to report.
            if want.observed_generation is None or not needs_write(current, want):
                continue
            status = stamped(want, current, now)
            try:
                written = await self.cluster.write_policy_status(name, status)
            except ObjectNotFound:
                # Deleted since it was read: its watch event brings a pass without it.
                self._statuses[name] = status
                continue
            except Exception as exc:  # a status must never fail the pool's pass
                # Retried on the pool's next ordinary pass, not in 1 s: an error that persists
                # (RBAC without rotationpolicies/status) must not spin the pool every second.
                self.log.warning("RotationPolicy status not written", policy=name, error=str(exc))
                settled = False
                continue
            touched = True
            if written:
                self._statuses[name] = status
            else:
                settled = False  # a write conflict: requeue silently, write again next pass
        self._status_inputs = inputs if settled else None
        return touched

    async def _apply(
        self,
        pool: str,
        actions: Sequence[act.Action],
        now: datetime,
        memo: _Memo | None = None,
    ) -> list[act.Action]:
        done: list[act.Action] = []
        for action in actions:
            await self._apply_one(pool, action, now, memo)
            done.append(action)
        return done

    async def _apply_one(self, pool: str, a: act.Action, now: datetime, memo: _Memo | None) -> None:
        c = self.cluster
        # Announcements and log lines first: most of a pass's actions are these (the pool's
        # standing, said again every pass and deduplicated here), and the action types are
        # disjoint, so the order of the tests decides nothing.
        if isinstance(a, act.Announce):
            await self._announce(pool, a, now, memo)
        elif isinstance(a, act.Log):
            self._log_line(pool, a, memo)
        elif isinstance(a, act.AnnotatePool):
            await c.annotate_pool(a.pool, a.patch, expect_version=a.expect_version)
        elif isinstance(a, act.AnnotateClaim):
            await c.annotate_claim(a.name, a.patch)
        elif isinstance(a, act.AnnotateNode):
            await c.annotate_node(a.name, a.patch)
        elif isinstance(a, act.SetUnschedulable):
            await c.set_unschedulable(a.node, a.unschedulable)
        elif isinstance(a, act.CreatePlaceholder):
            spec = a.spec
            if self.placeholder_image or self.priority_class:
                spec = replace(
                    spec, image=self.placeholder_image, priority_class=self.priority_class
                )
            await c.create_placeholder(spec)
        elif isinstance(a, act.DeletePlaceholder):
            await c.delete_placeholder(a.namespace, a.name)
        elif isinstance(a, act.DeleteClaim):
            await c.delete_claim(a.name)
        elif isinstance(a, act.CountCompletion):
            self.metrics.count_completion(pool, a.outcome)
        elif isinstance(a, act.CountForcefulFallback):
            self.metrics.count_forceful(pool)
        elif isinstance(a, act.ObserveDuration):
            self.metrics.observe(pool, a.phase, a.seconds)
        else:
            # A new action the shell was not taught to apply would otherwise vanish: the pass
            # would look done while the cluster never changed.
            raise TypeError(f"action: the shell cannot apply {type(a).__name__} for pool {pool}")

    async def _announce(
        self, pool: str, a: act.Announce, now: datetime, memo: _Memo | None
    ) -> None:
        # Deduplicated by transition: an event re-fires once it has been absent for a pass.
        if a.dedup is not None and memo is not None:
            memo.announced.add(a.dedup)
            if a.dedup in self._announced.get(pool, set()):
                return
        data: dict[str, Any] = {
            "message": a.message,
            "nodepool": pool,
            "object": a.subject_kind,
            "action": a.action,
        }
        if a.related is not None:
            data["related"] = {"kind": a.related[0], "name": a.related[1]}
        await self.events.emit(
            [
                Event(
                    kind=a.reason,
                    at=now,
                    subject=a.subject,
                    level=Level.WARNING if a.warning else Level.INFO,
                    data=data,
                )
            ]
        )

    def _log_line(self, pool: str, a: act.Log, memo: _Memo | None) -> None:
        # Edge-triggered: a deduplicated line is logged when its key changes (spec §8.2).
        if a.dedup is not None and memo is not None:
            memo.logged[a.message] = a.dedup
            if self._logged.get(pool, {}).get(a.message) == a.dedup:
                return
        self.log.info(a.message, nodepool=pool, **dict(a.fields))


@dataclass
class _Memo:
    """The dedup keys one pass produced (they replace the previous pass's)."""

    announced: set[str] = field(default_factory=set)
    logged: dict[str, str] = field(default_factory=dict)
