"""The benchmark harness still runs end to end (SQLite, tiny sizes): it must not rot.

Not a performance test: nothing here depends on how fast the machine is. It checks that every
benchmark runs, that the report is written with every section and verdict, and that the
reliability evidence of the tiny run is clean (exit code 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.__main__ import main, parse
from benchmarks.runner import NAMES

pytestmark = pytest.mark.slow


async def test_every_benchmark_runs_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "performance.md"
    code = await main(["--profile", "tiny", "--backend", "sqlite", "--output", str(out)])
    assert code == 0
    text = out.read_text(encoding="utf-8")
    for heading in (
        "## Targets",
        "## Admission: the ledger against the raw-driver ceiling",
        "## Admission over HTTP",
        "## Ranking",
        "## Reconcile",
        "## Simulator",
        "## Controller tick",
        "## Reliability: a connection killed at each statement",
        "## Reliability: concurrent admissions and releases",
        "## CLI start-up",
        "## Wall time",
    ):
        assert heading in text
    for table in (
        "**Group commit: the ledger with it off and on, side by side**",
        "**Latency group commit adds (on minus off, same writers)**",
        "**Throughput from 1 to 4 writers (20 nodes), adm/s**",
    ):
        assert table in text
    assert "| SQLite ledger >= 3 x its rate at 8 writers" in text
    assert "database: SQLite" in text
    assert "**all 0**" in text
    assert "FAILED" not in text


def test_a_narrow_run_never_overwrites_the_committed_report() -> None:
    args = parse(["--quick", "--only", "ranking"])
    assert args.output.name == "performance.md"
    assert args.output.parent.name == "bench"
    assert args.only == ["ranking"]
    full = parse([])
    assert full.output.parts[-2:] == ("docs", "performance.md")
    assert full.only == list(NAMES)


def test_unknown_names_are_refused_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(["--only", "warp-drive"])
    assert exit_info.value.code == 2
    assert "--only: unknown benchmark 'warp-drive'" in capsys.readouterr().err
