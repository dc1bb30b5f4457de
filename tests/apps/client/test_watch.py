"""``--watch``: the newest events first, then each new one once, under one header (a real API)."""

from __future__ import annotations

import pytest

from fleetgate.apps.client import watch
from fleetgate.client import FleetgateClient
from tests.apps.client.seeded import ADMIN_TOKEN, cli, size


def test_events_watch_prints_the_newest_then_each_new_one_once(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[float] = []
    placed: list[str] = []

    def pause(seconds: float) -> None:
        # Between the first two polls something happens; then nothing more (bound by count).
        pauses.append(seconds)
        if len(pauses) == 1:
            with FleetgateClient(base, ADMIN_TOKEN) as api:
                placed.append(api.place("team-watch", size(1, 1, 1)).id)

    monkeypatch.setattr(watch, "pause", pause)
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    r = cli("events", "--watch", "--watch-count", "3", "--interval", "7",
            "--kind", "instance placed", env=env)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert pauses == [7, 7]
    header, *rows = r.stdout.splitlines()
    assert header.split()[:2] == ["ID", "AT"] and not any(row.startswith("ID") for row in rows)
    subjects = [row.split()[-1] for row in rows]  # SUBJECT is the last column
    assert subjects[-1] == placed[0] and subjects.count(placed[0]) == 1
    ids = [int(row.split()[0]) for row in rows]
    assert ids == sorted(ids)  # oldest first, as they happen
