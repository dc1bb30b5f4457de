"""``--watch`` on every list, against a real API: the rows, then each row that appears, changes
or goes, under one header and in the columns of the first rows; the newest events first, then
each new one once; ``-o json`` one document per line."""

from __future__ import annotations

import json
import re

import pytest

from fleetgate.apps.client import watch
from fleetgate.client import FleetgateClient
from tests.apps.client.seeded import ADMIN_TOKEN, NS, cli, console, size


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


def column_starts(line: str) -> list[int]:
    """Where each cell of a table line starts (cells are separated by two or more blanks)."""
    return [m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", line)]


def test_a_list_watch_keeps_its_columns_and_prints_what_appears_changes_or_goes(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    with FleetgateClient(base, ADMIN_TOKEN) as api:
        gone = api.place("team-w", size(1, 1, 1, node="hv-1")).id
        stays = api.place("team-w", size(1, 1, 1, node="hv-2")).id

    def pause(seconds: float) -> None:
        with FleetgateClient(base, ADMIN_TOKEN) as api:
            api.release("team-w", gone)
            api.place("team-w", size(2, 2, 2, node="hv-1", request_id="a-much-longer-request-id"))

    monkeypatch.setattr(watch, "pause", pause)
    r = cli("placements", "-n", "team-w", "--watch", "--watch-count", "2", "--interval", "0",
            env=env)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split()[0] == "ID" and not any(row.startswith("ID") for row in rows)
    first, later = rows[:2], rows[2:]
    assert {row.split()[0] for row in first} == {gone, stays}
    # The second poll: the new placement, then the released one once more as last seen.
    assert [row.split()[0] for row in later][-1] == gone and len(later) == 2
    assert "a-much-longer-request-id" in later[0] and stays not in " ".join(later)
    # Widths were decided with the first rows: every row of the same width lines up with the
    # header, the later ones too; only a cell wider than its column pushes its row along.
    assert all(column_starts(row) == column_starts(header) for row in (*first, later[1]))


def test_every_list_watches_and_json_is_one_document_per_line(base: str) -> None:
    env = {"FLEETGATE_SERVER": base, "FLEETGATE_TOKEN": ADMIN_TOKEN}
    once = ("--watch", "--watch-count", "1", "--interval", "0", "-o", "json")
    lists = [("nodes",), ("placements", "-n", NS), ("claims", "-n", NS),
             ("events", "--limit", "3"), ("status",), ("tokens", "list", "-n", NS)]  # fmt: skip
    for listing in lists:
        run = console(*listing, *once, env=env)
        assert run.returncode == 0, (listing, run.stderr)
        documents = [json.loads(line) for line in run.stdout.splitlines()]
        assert all(isinstance(d, dict) for d in documents), listing
        if listing[0] in ("nodes", "placements", "claims", "events"):
            assert documents, listing
        table = console(*listing, "--watch", "--watch-count", "1", env=env)
        assert table.returncode == 0, (listing, table.stderr)
