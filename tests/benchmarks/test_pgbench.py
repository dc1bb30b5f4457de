"""pgbench as the second ceiling: the ledger's captured scripts, run by PostgreSQL's client."""

from __future__ import annotations

import pytest
from benchmarks.pgbench import available, ceilings
from benchmarks.targets import Target

from tests.conftest import Backend

pytestmark = pytest.mark.slow


async def test_both_captured_scripts_run_under_pgbench_at_every_writer_count(
    backend: Backend,
) -> None:
    if backend.kind != "postgres":
        pytest.skip("pgbench is PostgreSQL's client; the other backends have the replayed ceiling")
    assert available() is None
    # The test session's database URL names the server too: ceilings() makes its own database.
    target = Target("postgres", "PostgreSQL", "postgres", backend.url)
    cells = await ceilings(target, 5, [1, 2], 1.0)
    assert [(c.writers, c.script) for c in cells] == [
        (1, "statements"),
        (1, "function"),
        (2, "statements"),
        (2, "function"),
    ]
    # pgbench exits non-zero (and ceilings() raises) when a transaction fails, so a rate
    # here means every admission of the script committed.
    assert all(c.tps > 0 and c.fleet == 5 for c in cells)
