"""Whole simulations of the example fleets decide exactly what main's controller decided.

``golden_examples.json`` was recorded (``python -m tests.apps.simulate.examples``) from the
controller as it was before passes became incremental: every rotation, gate and census reason,
breach and generation must come out the same; only the number of passes may differ.
"""

from __future__ import annotations

import json

import pytest

from tests.apps.simulate.examples import GOLDEN, cases, key, run_case

_GOLDEN = json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_golden_file_covers_every_case() -> None:
    assert sorted(_GOLDEN) == sorted(key(*c) for c in cases())


@pytest.mark.parametrize("case", cases(), ids=lambda c: key(*c))
def test_an_example_simulation_decides_what_it_decided_before(case: tuple[str, str, str]) -> None:
    assert run_case(*case) == _GOLDEN[key(*case)]
