"""A narrower benchmark run merged into the full report: what it measured is replaced, each
row and section naming its commit, and everything else keeps the commit it was measured on."""

from __future__ import annotations

from benchmarks.report import Section, Table, Verdict

from benchmarks import document

FACTS = {
    "commit": "bbbbbbb",
    "date": "2026-12-04 22:00 UTC",
    "CPU": "a CPU",
    "cores": "2",
    "load average at start (1/5/15 min)": "1.00 / 1.00 / 1.00",
}


def _section(name: str, heading: str, value: str, verdict: Verdict | None = None) -> Section:
    table = Table(f"{heading} table", ["what", "value"])
    table.add(name, value)
    return Section(name, heading, tables=[table], verdicts=[verdict] if verdict else [])


def _report(commit: str, *sections: Section) -> str:
    return document.render({**FACTS, "commit": commit}, list(sections), "", True, "0 / 0 / 0")


def _wall(commit: str, *names: str) -> Section:
    table = Table("Wall time by benchmark (full profile)", ["benchmark", "wall s", "commit"])
    for name in names:
        table.add(name, "1", commit)
    return Section("wall time", "Wall time", tables=[table])


def test_a_narrower_run_replaces_what_it_measured_and_keeps_the_rest() -> None:
    full = _report(
        "aaaaaaa",
        _section("simulator", "Simulator", "old sim", Verdict("simulator <= 3 s", "9 s", False)),
        _section("http", "Admission over HTTP", "old http", Verdict(">= 1,000/s", "1,086/s", True)),
        _wall("aaaaaaa", "simulator", "http", "all"),
    )
    narrow = _report(
        "bbbbbbb",
        _section("simulator", "Simulator", "new sim", Verdict("simulator <= 3 s", "5 s", False)),
        _section("tick", "Controller tick", "new tick"),
        _wall("bbbbbbb", "simulator", "simulator + tick"),
    )
    merged = document.merge(full, narrow)

    assert "new sim" in merged and "old sim" not in merged
    assert "old http" in merged and "new tick" in merged
    # Each section says what it was measured on: the old one keeps its commit.
    http = merged[merged.index("## Admission over HTTP") :]
    assert http.split("\n")[2].startswith("*Measured on commit aaaaaaa")
    simulator = merged[merged.index("## Simulator") :]
    assert simulator.split("\n")[2].startswith("*Measured on commit bbbbbbb")
    # Targets: the re-measured row replaced, the other kept, each with its commit.
    assert "| simulator <= 3 s | 5 s | NOT met | bbbbbbb |  |" in merged
    assert "| >= 1,000/s | 1,086/s | met | aaaaaaa |  |" in merged
    assert "| simulator <= 3 s | 9 s |" not in merged
    # Wall times: the full run's total stays; the narrower run's own total is a row of its own.
    assert "| all | 1 | aaaaaaa |" in merged
    assert "| simulator + tick | 1 | bbbbbbb |" in merged
    assert merged.count("| simulator | 1 |") == 1
    # The new section goes before the hand-kept notes, never after them.
    if document.NOTES.exists():
        notes = document.NOTES.read_text().splitlines()[0]
        assert merged.index("## Controller tick") < merged.index(notes)


def test_merging_a_report_into_itself_changes_nothing() -> None:
    full = _report("aaaaaaa", _section("simulator", "Simulator", "x"), _wall("aaaaaaa", "all"))
    assert document.merge(full, full) == full
