"""The What-if page's runs: bounded in wall time, and stopped when the answer's stream closes."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from typing import Any

import pytest

from fleetgate.apps.api.dashboard.whatif_run import (
    DAY,
    Side,
    WhatIfError,
    answer_lines,
    compare_within,
    plan,
)
from fleetgate.apps.container import Container
from fleetgate.apps.services.bounded import RanTooLong
from fleetgate.apps.services.simulation import Progress, SimulationInputs, SimulationResult
from tests.apps.api.dashboard.test_whatif import BODY
from tests.waiting import HANG_SECONDS, until


def _present(sides: list[Side]) -> dict[str, Any]:
    return {"sides": [side.body() for side in sides]}


async def test_simulations_past_the_apps_bound_are_stopped_and_named_as_the_span() -> None:
    # No time at all: refused whatever the machine's speed, by the bound every caller shares.
    with pytest.raises(WhatIfError, match=r"^span: the simulations did not finish within 0 s"):
        await compare_within(BODY, Container().simulator(), 0.0)
    # The page's streamed answer ends with the same refusal.
    items = [
        json.loads(line)
        async for line in answer_lines(plan(BODY), Container().simulator(), 0.0, _present)
    ]
    assert items[-1]["field"] == "span"
    assert items[-1]["message"].startswith("span: the simulations did not finish within 0 s")


async def test_a_stream_closed_early_stops_the_simulation_at_its_next_check() -> None:
    # The page's Cancel closes the request: the simulation must stop, not run on. It is held at
    # its first simulated day until the stream has been closed, so it cannot have finished.
    closed, stopped = threading.Event(), threading.Event()
    real = Container().simulator()

    class Held:
        def run(
            self, inputs: SimulationInputs, progress: Progress | None = None
        ) -> SimulationResult:
            assert progress is not None

            def held(instant: datetime) -> None:
                if instant >= inputs.start + DAY:
                    assert closed.wait(HANG_SECONDS)
                progress(instant)

            try:
                return real.run(inputs, held)
            except RanTooLong:
                stopped.set()
                raise

    stream = answer_lines(plan(BODY), Held(), 600.0, _present)  # type: ignore[arg-type]
    first = json.loads(await anext(stream))
    assert first == {"progress": {"side": "A", "day": 0, "days": 21}}
    await stream.aclose()
    closed.set()
    await until(stopped.is_set)
