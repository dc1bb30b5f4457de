"""The simulation use case: a policy played out over a fleet by the real controller.

:class:`Simulator` checks the inputs (one definition: :func:`prepare`, with the one check that
the policy's ``nodePoolSelector`` selects the fleet's pool, :func:`selects`), puts the fleet on
the fake cluster of a world the composition root builds (``Container.simulator``), drives the
production ``RotationController`` through virtual time, and returns a typed
:class:`SimulationResult`; :meth:`SimulationResult.document` is the JSON document of spec §9 that
``fleetgate simulate --format json`` prints and ``POST /v1/rotation/simulate`` answers. Every
caller bounds the run's wall-clock time the same way, :meth:`Simulator.run_bounded`. Identical
inputs give an identical result.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.services.bounded import run_bounded
from fleetgate.apps.simulate import run
from fleetgate.apps.simulate.capacity import FleetLedger, LedgerController, LedgerRun
from fleetgate.apps.simulate.engine import DEFAULT_BUDGET, VirtualDriver
from fleetgate.apps.simulate.fleet import Fleet
from fleetgate.apps.simulate.lineage import Lineage, build_lineage
from fleetgate.apps.simulate.recorder import Recorder
from fleetgate.apps.simulate.report import headline
from fleetgate.apps.simulate.run import Diagnostic
from fleetgate.domain.capacity.headroom import CAPACITY_HOLD_MEETS_EXPIRY, WAYS_OUT
from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.ports import Clock, SimulatedCluster
from fleetgate.domain.rotation.budget_forecast import BudgetForecast, forecast_budgets
from fleetgate.domain.rotation.derive import Derivation
from fleetgate.domain.rotation.policy import ResolvedPolicy, RotationPolicy
from fleetgate.domain.rotation.windows import Interval

__all__ = [
    "Diagnostic",
    "PoolNotSelected",
    "Progress",
    "SimulationError",
    "SimulationInputs",
    "SimulationPlan",
    "SimulationResult",
    "SimulationWorld",
    "Simulator",
    "Summary",
    "prepare",
    "selects",
]

Progress = Callable[[datetime], None]
"""Called with each instant virtual time reaches (a bounded run's check raises from it)."""


class SimulationError(ValueError):
    """The inputs cannot be simulated; the message names the input and the reason."""


class PoolNotSelected(SimulationError):
    """The policy's ``nodePoolSelector`` does not select the fleet's pool."""

    def __init__(self, policy: RotationPolicy, labels: Mapping[str, str]) -> None:
        self.labels = dict(labels)
        super().__init__(
            f"policy {policy.name!r}: its nodePoolSelector does not select the fleet's pool "
            f"(labels {self.labels}); set fleet.labels to match it"
        )


@dataclass(frozen=True)
class SimulationInputs:
    """Everything a simulation depends on (and nothing else)."""

    policy: RotationPolicy
    fleet: Fleet
    start: datetime
    end: datetime
    env_provisioning: timedelta | None = None
    env_drain: timedelta | None = None
    budget: int = DEFAULT_BUDGET
    """Controller passes at most; past it the result is partial."""


def selects(policy: RotationPolicy, labels: Mapping[str, str]) -> None:
    """Raise :class:`PoolNotSelected` unless the policy governs a pool with these labels."""
    selector = policy.node_pool_selector
    if selector is None or not selector.matches(labels):
        raise PoolNotSelected(policy, labels)


@dataclass(frozen=True)
class SimulationPlan:
    """Checked inputs with what the run derives from them before it starts."""

    inputs: SimulationInputs
    resolved: ResolvedPolicy
    derivation: Derivation
    provisioning: timedelta
    """How long surge nodes take to become Ready (the input, else the fleet's, else estimated)."""
    drain: timedelta
    diagnostics: tuple[Diagnostic, ...]
    budgets: BudgetForecast


def prepare(inputs: SimulationInputs) -> SimulationPlan:
    """Check the inputs and derive; raises SimulationError naming the input and the reason."""
    if inputs.end <= inputs.start:
        raise SimulationError("--to: must be after --from")
    fleet, policy = inputs.fleet, inputs.policy
    selects(policy, fleet.labels)
    try:
        resolved = policy.resolve(fleet.tgp)
    except ValueError as exc:
        raise SimulationError(f"policy {policy.name!r}: {exc}") from exc
    derivation = resolved.derive(fleet.expire_after, len(fleet.nodes))
    provisioning = inputs.env_provisioning or fleet.env_provisioning
    drain = inputs.env_drain or fleet.env_drain
    provisioning = provisioning if provisioning is not None else derivation.provisioning_estimate
    drain = drain if drain is not None else derivation.drain_estimate
    diagnostics = run.environment_diagnostics(resolved, derivation, fleet, provisioning, drain)
    budgets = forecast_budgets(
        resolved, fleet.budgets, fleet.expire_after, len(fleet.nodes), inputs.start, inputs.end
    )
    diagnostics += [Diagnostic(f.severity.value, f.code.value, f.message) for f in budgets.findings]
    return SimulationPlan(
        inputs, resolved, derivation, provisioning, drain, tuple(diagnostics), budgets
    )


@dataclass(frozen=True)
class Summary:
    """The run in numbers (spec §9 ``summary``)."""

    nodes: int
    rotations: int
    succeeded: int
    failed: int
    surgeless: int
    breaches: int
    breached_nodes: int
    """Fleet nodes (an initial node and its replacements) with at least one breach."""
    forced_drains: int
    controller_passes: int

    def as_dict(self) -> dict[str, int]:
        """The JSON object of the document's ``summary``."""
        return {
            "nodes": self.nodes,
            "rotations": self.rotations,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "surgeless": self.surgeless,
            "breaches": self.breaches,
            "breachedNodes": self.breached_nodes,
            "forcedDrains": self.forced_drains,
            "controllerPasses": self.controller_passes,
        }


@dataclass(frozen=True)
class SimulationResult:
    """One finished (or cut short) simulation.

    The events, generations, rotations and windows are kept as the document's JSON objects
    (instants as RFC3339 text): they are written once, by the recorder and the lineage, and only
    ever presented.
    """

    plan: SimulationPlan
    summary: Summary
    diagnostics: tuple[Diagnostic, ...]
    """The plan's, then the run's (a cut-short run, breaches, forced drains)."""
    events: tuple[dict[str, Any], ...]
    generations: tuple[dict[str, Any], ...]
    rotations: tuple[dict[str, Any], ...]
    windows: tuple[dict[str, Any], ...]
    partial: bool
    """The pass budget ran out before the end: the verdict cannot be trusted."""
    simulated_through: datetime
    ledger: dict[str, Any] | None = None
    """The capacity ledger's side of the run (issue 33), when the fleet declares placements."""

    @property
    def fatal(self) -> bool:
        """Whether any finding or diagnostic is fatal (breaches and a cut-short run are)."""
        return self.plan.derivation.fatal or any(d.fatal for d in self.diagnostics)

    @property
    def codes(self) -> list[str]:
        """The finding and diagnostic codes, each once, in the document's order."""
        findings = [f.code.value for f in self.plan.derivation.findings]
        return list(dict.fromkeys([*findings, *(d.code for d in self.diagnostics)]))

    def document(self) -> dict[str, Any]:
        """The JSON document (spec §9), its members in their documented order."""
        plan = self.plan
        doc: dict[str, Any] = {
            "result": run.header(plan.resolved, plan.derivation),
            "env": {"provisioning": fmt(plan.provisioning), "drain": fmt(plan.drain)},
            "summary": self.summary.as_dict(),
            "events": list(self.events),
            "generations": list(self.generations),
            "rotations": list(self.rotations),
            "windows": list(self.windows),
            "diagnostics": [d.as_dict() for d in self.diagnostics],
            "partial": self.partial,
            "simulatedFrom": run.instant(plan.inputs.start),
            "simulatedThrough": run.instant(self.simulated_through),
        }
        if self.ledger is not None:  # only when the fleet declares placements
            doc["ledger"] = self.ledger
        budgets = plan.budgets
        if budgets.effective != budgets.windows:  # only when the budgets take something away
            doc["budgetWindows"] = {
                "effective": [_span(i) for i in budgets.effective],
                "unusable": [_span(i) for i in budgets.unusable],
            }
        return doc


def _span(interval: Interval) -> dict[str, Any]:
    return run.jsonable({"start": interval.start, "end": interval.end})


@dataclass(frozen=True)
class SimulationWorld:
    """What one run drives: a virtual clock, the fake cluster, the production controller
    governed by the one policy, and the recorder that hears the controller."""

    clock: Clock
    cluster: SimulatedCluster
    controller: RotationController
    recorder: Recorder
    ledgers: Callable[[FleetLedger], LedgerRun]
    """A capacity ledger for a fleet that declares one (``fleet.ledger``, issue 33)."""


WorldFactory = Callable[[datetime, RotationPolicy, bool], SimulationWorld]
"""A fresh world whose virtual time starts at the instant, governed by the policy (with the
capacity ledger's controller, :class:`LedgerController`, when the flag says the fleet has one)."""


class Simulator:
    """Runs simulations, each in a fresh world from ``world`` (the composition root's)."""

    def __init__(self, world: WorldFactory) -> None:
        self.world = world

    def run(self, inputs: SimulationInputs, progress: Progress | None = None) -> SimulationResult:
        """Run the simulation to completion in this thread (its own event loop)."""
        return asyncio.run(self.run_async(inputs, progress))

    async def run_bounded(
        self,
        inputs: SimulationInputs,
        seconds: float = math.inf,
        progress: Progress | None = None,
    ) -> SimulationResult:
        """:meth:`run` in a thread of its own, stopped after ``seconds`` of wall time (raises
        ``RanTooLong``); the caller's event loop keeps serving meanwhile."""

        def work(check: Callable[..., None]) -> SimulationResult:
            def advance(instant: datetime) -> None:
                check()
                if progress is not None:
                    progress(instant)

            return self.run(inputs, advance)

        return await run_bounded(work, seconds)

    async def run_async(
        self, inputs: SimulationInputs, progress: Progress | None = None
    ) -> SimulationResult:
        """:meth:`run` inside a running event loop."""
        plan = prepare(inputs)
        fleet = inputs.fleet
        world = self.world(inputs.start, inputs.policy, fleet.ledger is not None)
        ledger = None if fleet.ledger is None else world.ledgers(fleet.ledger)
        run.put_fleet(world.cluster, fleet, inputs.start, plan.provisioning, plan.drain, ledger)
        driver = VirtualDriver(
            world.controller, world.cluster, world.clock, budget=inputs.budget, on_advance=progress
        )
        if ledger is None:
            complete = await driver.run_until(inputs.end)
            return _result(plan, world, driver.passes, complete)
        try:
            assert isinstance(world.controller, LedgerController)
            await ledger.start(world.cluster, world.controller, fleet.pool, world.clock)
            complete = await driver.run_until(inputs.end)
        finally:
            report = await ledger.finish()  # closes the ledger, also when the run failed
        return _result(plan, world, driver.passes, complete, ledger.tally.events, report)


def _result(
    plan: SimulationPlan,
    world: SimulationWorld,
    passes: int,
    complete: bool,
    ledger_events: list[dict[str, Any]] | None = None,
    ledger: dict[str, Any] | None = None,
) -> SimulationResult:
    """What the run left on the cluster and in the recorder, as a result."""
    through = world.clock.now()
    diagnostics = list(plan.diagnostics)
    if not complete:
        # fatal: the verdict of a run cut short cannot be trusted (exit status 1)
        message = (
            f"stopped after {passes} controller passes at {run.instant(through)}; "
            "the result is partial"
        )
        diagnostics.append(Diagnostic("fatal", "StepBudgetExhausted", message))
    fleet = plan.inputs.fleet
    lineage = build_lineage(world.cluster, fleet, world.recorder, plan.resolved, through)
    windows = run.windows(plan.resolved, plan.inputs.start, through)
    drains = run.drain_events(world.cluster)
    summary = _summary(fleet, lineage, drains, passes)
    diagnostics += _outcome_diagnostics(summary)
    if ledger is not None:
        diagnostics += _holds_meeting_expiry(ledger_events or [], lineage)
    if ledger is not None and (ledger["strandedAtEnd"] or ledger["lost"]):
        message = (
            f"{ledger['strandedAtEnd']} placement(s) stranded and "
            f"{ledger['lost']} lost at the end of the run"
        )
        diagnostics.append(Diagnostic("fatal", "PlacementsStranded", message))
    events = run.events(
        windows, world.recorder.events, lineage.breach_events, drains, ledger_events or []
    )
    return SimulationResult(
        plan=plan,
        summary=summary,
        diagnostics=tuple(diagnostics),
        events=tuple(events),
        generations=tuple(lineage.generations),
        rotations=tuple(lineage.rotations),
        windows=tuple(run.jsonable(w) for w in windows),
        partial=not complete,
        simulated_through=through,
        ledger=ledger,
    )


def _holds_meeting_expiry(events: list[dict[str, Any]], lineage: Lineage) -> list[Diagnostic]:
    """``CapacityHoldMeetsExpiry`` (a warning) for each node the ledger gate held and that was
    never rotated since: it reached its forced expiry (Karpenter drained it, held or not), or,
    still there at the end, it meets it unless room appears."""
    held_from: dict[str, str] = {}
    for e in events:
        if e["type"] == "held-for-capacity":
            held_from.setdefault(e["node"], run.instant(e["at"]))
    rotated = {r["node"] for r in lineage.rotations if r["outcome"] == "success"}
    breached = {e["node"]: run.instant(e["at"]) for e in lineage.breach_events}
    alive = {g["name"]: g["deadline"] for g in lineage.generations if g["removedAt"] is None}
    out = []
    for node, since in sorted(held_from.items()):
        if node in breached and node not in rotated:
            message = (
                f"node {node}, held for capacity from {since}, reached its forced expiry at "
                f"{breached[node]} still held: Karpenter drained it held or not, and what had "
                f"no room was stranded. Ways out: {WAYS_OUT}"
            )
        elif node not in rotated and alive.get(node):
            message = (
                f"node {node}, held for capacity since {since}, is still unrotated at the end of "
                f"the run; unless room appears, Karpenter force-expires it at {alive[node]} and "
                f"drains it held or not. Ways out: {WAYS_OUT}"
            )
        else:
            continue
        out.append(Diagnostic("warning", CAPACITY_HOLD_MEETS_EXPIRY, message))
    return out


def _summary(fleet: Fleet, lineage: Lineage, drains: list[dict[str, Any]], passes: int) -> Summary:
    rotations = lineage.rotations
    return Summary(
        nodes=len(fleet.nodes),
        rotations=len(rotations),
        succeeded=sum(r["outcome"] == "success" for r in rotations),
        failed=sum(r["outcome"] == "failure" for r in rotations),
        surgeless=sum(r["mode"] == "surgeless" for r in rotations),
        breaches=lineage.breaches,
        breached_nodes=len(lineage.breached_slots),
        forced_drains=sum(e["type"] == "drain-forced" for e in drains),
        controller_passes=passes,
    )


def _outcome_diagnostics(summary: Summary) -> list[Diagnostic]:
    """What the outcome says: breaches (fatal), drains forced past a PodDisruptionBudget."""
    out = []
    if summary.breaches:
        out.append(Diagnostic("fatal", "ExpireAfterBreach", headline(summary.as_dict())))
    if summary.forced_drains:
        out.append(
            Diagnostic(
                "warning",
                "DrainForcedAtTerminationGracePeriod",
                f"{summary.forced_drains} drain(s) were held by the PodDisruptionBudget (or a "
                "Pod's karpenter.sh/do-not-disrupt) until terminationGracePeriod, less the Pod's "
                "own grace period, and then forced: their Pods were deleted regardless. Allow a "
                "disruption (maxUnavailable >= 1) or keep a spare replica.",
            )
        )
    return out
