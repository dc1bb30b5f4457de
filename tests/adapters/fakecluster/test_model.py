"""The fake cluster's record helpers."""

from __future__ import annotations

import itertools

from fleetgate.adapters.fakecluster.model import fits, fits_after, subtract


def test_fits_after_agrees_with_fits_of_what_is_left() -> None:
    totals = [{}, {"cpu": 4_000}, {"cpu": 4_000, "memory": 8}]
    useds: list[list[dict[str, int]]] = [[], [{"cpu": 3_000}], [{"cpu": 1_000}, {"memory": 8}]]
    requests = [{}, {"cpu": 0}, {"cpu": 1_000}, {"cpu": 3_001}, {"gpu": 1}, {"memory": 1}]
    for total, used, want in itertools.product(totals, useds, requests):
        assert fits_after(total, used, want) == fits(subtract(total, *used), want), (
            total,
            used,
            want,
        )
