"""The machine table names the commit its figures were measured on (a figure names its commit)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks import machine

ROOT = Path(__file__).resolve().parents[2]


def test_the_machine_table_names_the_commit_and_says_when_the_tree_differed() -> None:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    facts = machine.describe({})
    assert next(iter(facts)) == "commit"
    expected = f"{head} with uncommitted changes" if dirty else head
    assert facts["commit"] == expected
