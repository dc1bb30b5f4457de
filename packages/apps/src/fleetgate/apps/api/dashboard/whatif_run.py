"""The What-if page's runs: the inputs checked, the simulations run, and the streamed answer.

Every input is checked before anything runs (:func:`plan`; a bad one is a :class:`WhatIfError`
naming the field). The simulations then run in a thread of their own, bounded in wall time as
``POST /v1/rotation/simulate`` is (:func:`compare_within`), and the page's answer streams as JSON
lines (:func:`answer_lines`): one ``progress`` line each time a simulation reaches a new
simulated day, then the answer, or an ``error`` line. A stream closed early (the client went
away: the page's Cancel) stops the simulations at their next check.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from fleetgate.apps.api.schemas.fleet import MAX_SIMULATE_NODES
from fleetgate.apps.ledgerfile import fleet_node_limits
from fleetgate.apps.policyfile import PolicyFileError, policies_from_text
from fleetgate.apps.services.bounded import RanTooLong, run_bounded
from fleetgate.apps.services.check import CheckInputs, CheckResult, check
from fleetgate.apps.services.simulation import (
    SimulationError,
    SimulationInputs,
    SimulationResult,
    Simulator,
    prepare,
)
from fleetgate.apps.simulate.fleet import Fleet, FleetError, labels_for, load_fleet
from fleetgate.domain.durations import parse_duration
from fleetgate.domain.rotation.policy import PolicyError, RotationPolicy

START = datetime(2024, 1, 1, tzinfo=UTC)
MAX_DAYS = 90
DAY = timedelta(days=1)
MAX_NODE_CPU = 64
"""The largest node the form's ledger sizes (threads): a What-if must finish within seconds."""
MAX_LEDGER_PLACEMENTS = 2_000
"""The most placements the form's ledger puts on the whole fleet: the ledger is filled before the
first simulated instant, where no wall-clock check can stop it (about 4 s a side for 1,920)."""
_log = structlog.get_logger("fleetgate.api")


class WhatIfError(ValueError):
    """A bad input; the message names the field."""


Check = Callable[[datetime], None]


def _unbounded(_: datetime) -> None:
    """No bound on the run's wall-clock time."""


def span_of(body: Any) -> timedelta:
    """The span to simulate, more than 0 and at most ``MAX_DAYS`` days."""
    value = body.get("span") if isinstance(body, dict) else None
    try:
        span = parse_duration(value) if isinstance(value, str) else None
    except ValueError as exc:
        raise WhatIfError(f"span: {exc}") from exc
    if span is None or not timedelta(0) < span <= timedelta(days=MAX_DAYS):
        raise WhatIfError(f"span: a duration of more than 0 and at most {MAX_DAYS}d")
    return span


def _fleet(body: dict[str, Any], count: int, labels: dict[str, str]) -> Fleet:
    """The generated fleet, with the ledger the form asks for (none by default); the fleet
    file's own checks name the field (``fleet.expireAfter``)."""
    document: dict[str, Any] = {
        "fleet": {
            "labels": labels,
            "expireAfter": body.get("expireAfter"),
            "terminationGracePeriod": body.get("terminationGracePeriod"),
            "generate": {"count": count, "spread": body.get("spread")},
        }
    }
    try:
        fleet = load_fleet(document, START)
        section = ledger_section(body.get("ledger"), [n.name for n in fleet.nodes])
        if section is None:
            return fleet
        # The fleet file's own reader, so the page's ledger is the one ``fleetgate simulate``
        # would read from the same ``fleet.ledger`` section.
        document["fleet"]["ledger"] = section
        return load_fleet(document, START)
    except FleetError as exc:
        raise WhatIfError(str(exc)) from exc


def _whole(spec: dict[str, Any], key: str, low: int, high: int, default: int) -> int:
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise WhatIfError(f"ledger.{key}: a whole number from {low} to {high}")
    return value


def ledger_section(spec: Any, names: list[str]) -> dict[str, Any] | None:
    """The fleet file's ``fleet.ledger`` section for the form's ledger (None: no ledger).

    ``fill``: placements of 1 vCPU (and the node's memory and disk per vCPU) fill each node to
    that percentage of its ledger CPU; ``nodeCpu``: the fleet's nodes' threads; ``launchCpu``:
    the threads of the nodes the pool launches (smaller ones leave a drained node's placements
    short of room); ``gate``: the controller's ledger gate.
    """
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise WhatIfError("ledger: an object with fill, nodeCpu, launchCpu and gate, or null")
    unknown = sorted(set(spec) - {"fill", "nodeCpu", "launchCpu", "gate"})
    if unknown:
        raise WhatIfError(f"ledger.{unknown[0]}: unknown (expected fill, nodeCpu, launchCpu, gate)")
    fill = _whole(spec, "fill", 0, 100, 0)
    threads = _whole(spec, "nodeCpu", 1, MAX_NODE_CPU, 4)
    launched = _whole(spec, "launchCpu", 1, MAX_NODE_CPU, threads)
    gate = spec.get("gate", True)
    if not isinstance(gate, bool):
        raise WhatIfError("ledger.gate: true or false")
    limits = fleet_node_limits(threads)
    count = limits.cpus * fill // 100
    if count * len(names) > MAX_LEDGER_PLACEMENTS:
        raise WhatIfError(
            f"ledger.fill: {count * len(names)} placements in all, more than the page's "
            f"{MAX_LEDGER_PLACEMENTS}; take fewer nodes, fewer CPUs or a lower fill"
        )
    placement = {
        "cpus": 1,
        "memoryMb": limits.memory_mb // limits.cpus,
        "diskGb": limits.disk_gb // limits.cpus,
        "count": count,
    }
    node = {"cpu": threads, "placements": [placement] if count else []}
    return {"nodeCpu": launched, "gate": gate, "nodes": dict.fromkeys(names, node)}


def _policy(text: Any, field: str) -> RotationPolicy:
    if not isinstance(text, str):
        raise WhatIfError(f"{field}: must be RotationPolicy YAML")
    try:
        policies = policies_from_text(text, field)
    except PolicyFileError as exc:
        raise WhatIfError("; ".join(exc.errors)) from exc
    if len(policies) != 1:
        raise WhatIfError(f"{field}: expected one RotationPolicy, found {len(policies)}")
    return policies[0]


@dataclass(frozen=True)
class Side:
    """One policy of the comparison: its check and its simulation."""

    policy: RotationPolicy
    check: CheckResult
    simulation: SimulationResult

    def body(self) -> dict[str, Any]:
        """The side in the JSON answer."""
        return {
            "name": self.policy.name,
            "zone": zone_of(self.policy),
            "check": self.check.report(),
            "simulation": self.simulation.document(),
        }


@dataclass(frozen=True)
class Plan:
    """One policy of the comparison, checked and ready to simulate."""

    policy: RotationPolicy
    field: str
    """How the answer names it (``policy A``)."""
    check: CheckResult
    inputs: SimulationInputs


Progress = Callable[[int, int, int], None]
"""Called with a side's index, the simulated days it reached and the days it runs."""


def plan(body: Any) -> list[Plan]:
    """Check every input of ``body`` (the fleet, each policy, each simulation's inputs) before
    anything runs; raises WhatIfError naming the field."""
    if not isinstance(body, dict):
        raise WhatIfError("body: must be a JSON object")
    texts = body.get("policies")
    if not isinstance(texts, list) or not 1 <= len(texts) <= 2:
        raise WhatIfError("policies: one or two RotationPolicy YAML texts")
    count = body.get("count")
    if (
        not isinstance(count, int)
        or isinstance(count, bool)
        or not 1 <= count <= MAX_SIMULATE_NODES
    ):
        raise WhatIfError(f"count: a whole number of nodes from 1 to {MAX_SIMULATE_NODES}")
    span = span_of(body)
    _fleet(body, count, {})  # every fleet input checked before any policy is read
    out = []
    for index, text in enumerate(texts):
        field = f"policy {'AB'[index]}"
        policy = _policy(text, field)
        # The labels the policy's selector needs, so that any policy can govern the fleet.
        fleet = _fleet(body, count, labels_for(policy.node_pool_selector))
        try:
            forecast = check(policy, CheckInputs(fleet.expire_after, fleet.tgp, count))
            inputs = SimulationInputs(policy, fleet, START, START + span)
            prepare(inputs)  # the simulation's own checks, the ones its run starts with
        except (SimulationError, PolicyError, ValueError) as exc:
            raise WhatIfError(f"{field}: {exc}") from exc
        out.append(Plan(policy, field, forecast, inputs))
    return out


def simulate(
    plans: list[Plan],
    simulator: Simulator,
    check_time: Check = _unbounded,
    progress: Progress | None = None,
) -> list[Side]:
    """Simulate each planned policy in this thread, calling ``check_time`` as the simulations go
    (a bounded run's check) and ``progress`` at each new simulated day; raises WhatIfError."""
    out = []
    for index, side in enumerate(plans):
        try:
            result = simulator.run(side.inputs, _by_day(index, side, check_time, progress))
        except (SimulationError, PolicyError, ValueError) as exc:
            raise WhatIfError(f"{side.field}: {exc}") from exc
        out.append(Side(side.policy, side.check, result))
    return out


def _by_day(index: int, side: Plan, check_time: Check, progress: Progress | None) -> Check:
    """The simulation's callback: ``check_time`` at every instant, ``progress`` once a day."""
    inputs = side.inputs
    days = -(-(inputs.end - inputs.start) // DAY)
    reached = 0
    if progress is not None:
        progress(index, 0, days)  # the side starts

    def advance(instant: datetime) -> None:
        nonlocal reached
        check_time(instant)
        day = min((instant - inputs.start) // DAY, days)
        if progress is not None and day > reached:
            reached = day
            progress(index, day, days)

    return advance


def compare(body: Any, simulator: Simulator, check_time: Check = _unbounded) -> list[Side]:
    """Check, then simulate each policy of ``body`` over its fleet (see :func:`simulate`)."""
    return simulate(plan(body), simulator, check_time)


def _too_long(seconds: float) -> WhatIfError:
    return WhatIfError(
        f"span: the simulations did not finish within {seconds:.0f} s; "
        "simulate a shorter span or fewer nodes"
    )


async def compare_within(body: Any, simulator: Simulator, seconds: float) -> list[Side]:
    """:func:`compare` in a thread of its own, within ``seconds`` of wall time (the bound
    ``POST /v1/rotation/simulate`` has); raises WhatIfError."""
    plans = plan(body)
    try:
        return await run_bounded(lambda check_time: simulate(plans, simulator, check_time), seconds)
    except RanTooLong:
        raise _too_long(seconds) from None


def _line(item: dict[str, Any]) -> bytes:
    return json.dumps(item, separators=(",", ":")).encode() + b"\n"


async def answer_lines(
    plans: list[Plan],
    simulator: Simulator,
    seconds: float,
    present: Callable[[list[Side]], dict[str, Any]],
) -> AsyncGenerator[bytes, None]:
    """The streamed answer: a ``progress`` line at each new simulated day of each side, then
    what ``present`` makes of the sides (or an ``error``). Closing the stream early (the
    client went away) stops the simulations at their next check and waits for their thread."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def progress(index: int, day: int, days: int) -> None:  # in the simulations' thread
        item = {"progress": {"side": "AB"[index], "day": day, "days": days}}
        loop.call_soon_threadsafe(lines.put_nowait, item)

    run = asyncio.ensure_future(
        run_bounded(lambda check_time: simulate(plans, simulator, check_time, progress), seconds)
    )
    reached: dict[str, Any] = {}
    finished = False
    try:
        while not run.done() or not lines.empty():
            if lines.empty():
                waiting = asyncio.ensure_future(lines.get())
                await asyncio.wait({waiting, run}, return_when=asyncio.FIRST_COMPLETED)
                if not waiting.done():
                    waiting.cancel()
                    continue
                item = waiting.result()
            else:
                item = lines.get_nowait()
            reached = item["progress"]
            yield _line(item)
        try:
            sides = run.result()
        except RanTooLong:
            error = _too_long(seconds)
            yield _line({"error": "invalid_request", "message": str(error), "field": "span"})
        except WhatIfError as exc:
            yield _line(refusal(exc))
        else:
            yield _line(present(sides))
        finished = True
    finally:
        if not finished:
            # The client went away (the page's Cancel): ``run_bounded`` stops the thread at
            # its next check and waits for it, in a task of its own (this one is ending).
            run.cancel()
            _log.info("what-if cancelled by the client", reached=reached or None)


def refusal(exc: WhatIfError) -> dict[str, str]:
    return {"error": "invalid_request", "message": str(exc), "field": str(exc).partition(":")[0]}


def zone_of(policy: RotationPolicy) -> str:
    """The time zone the policy's first window is written in (UTC without windows)."""
    windows = policy.maintenance_windows
    return str(windows[0].timezone) if windows else "UTC"
