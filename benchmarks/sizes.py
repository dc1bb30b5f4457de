"""How big each benchmark is: the full run that writes docs/performance.md, and ``--quick``."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Sizes:
    """Every size and count the benchmarks use."""

    #: Admissions per (backend, fleet size, writers) cell, at the ledger and on the raw driver.
    admission_ops: int
    #: Admissions per HTTP cell.
    http_ops: int
    #: Wall-clock cap of one cell (fewer operations in a slow configuration, never a longer run).
    cell_seconds: float
    #: Wall-clock cap of the simulator (a longer run is reported as partial, with its pace).
    simulator_seconds: float
    #: Fleet sizes the admission cells run over.
    fleets: tuple[int, ...]
    #: Concurrent writers of the admission cells.
    writers: tuple[int, ...]
    #: Nodes the ranking decision orders, and how many decisions are timed.
    ranking_nodes: int
    ranking_decisions: int
    #: The reconcile pass: nodes and placements seeded, passes timed.
    reconcile_nodes: int
    reconcile_placements: int
    reconcile_passes: int
    #: The simulator: generated nodes and simulated days.
    simulator_nodes: int
    simulator_days: int
    #: NodeClaims in the pool one controller tick observes, and ticks timed.
    tick_claims: int
    ticks: int
    #: Reliability soak: operations (admissions + releases) per backend and concurrent workers.
    soak_ops: int
    soak_workers: int
    #: Seconds between invariant checks while the soak runs.
    soak_check_every: float
    #: The profile's name (a parallel soak worker is given it).
    name: str = "full"
    #: Soak the backends side by side, each in its own process (one client process is bound by
    #: its one core and by the database's commit latency; several overlap both).
    soak_parallel: bool = True
    #: The large simulator run (issue 44: <= 30 s and <= 300 MB through the CLI).
    simulator_large_nodes: int = 10_000
    simulator_large_days: int = 90
    #: CLI start-up: timed runs of each command (after one warm-up round).
    startup_rounds: int = 10
    #: The simulator's cost against fleet size: the fleets, and the days each one simulates.
    simulator_scaling: tuple[int, ...] = (100, 1_000, 10_000)
    simulator_scaling_days: int = 3
    #: The fleet whose ledger cells also sweep ``scaling_writers`` (group commit off and on).
    scaling_fleet: int = 100
    scaling_writers: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    #: Seconds of each pgbench run (PostgreSQL's ceiling beside the replayed one).
    pgbench_seconds: float = 5.0


# The full run's wall time, from the caps (see benchmarks/notes.md for the arithmetic): every
# admission cell stops at ``cell_seconds`` (6 s, at most 600 admissions: an admission cell's
# repetitions were cut, from 1,000 in 10 s, to make room for group commit off and on side by
# side and the 1-to-64 sweep, rather than dropping either comparison).
FULL = Sizes(
    admission_ops=600,
    http_ops=600,
    cell_seconds=6.0,
    simulator_seconds=60.0,
    fleets=(100, 10_000),
    writers=(1, 8, 32),
    ranking_nodes=10_000,
    ranking_decisions=200,
    reconcile_nodes=10_000,
    reconcile_placements=200_000,
    reconcile_passes=3,
    simulator_nodes=1_000,
    simulator_days=90,
    tick_claims=10_000,
    ticks=5,
    soak_ops=100_000,
    soak_workers=16,
    soak_check_every=5.0,
)

QUICK = Sizes(
    admission_ops=200,
    http_ops=150,
    cell_seconds=5.0,
    simulator_seconds=15.0,
    fleets=(100, 1_000),
    writers=(1, 8),
    ranking_nodes=10_000,
    ranking_decisions=20,
    reconcile_nodes=1_000,
    reconcile_placements=10_000,
    reconcile_passes=1,
    simulator_nodes=100,
    simulator_days=30,
    tick_claims=1_000,
    ticks=2,
    soak_ops=2_000,
    soak_workers=8,
    soak_check_every=1.0,
    name="quick",
    scaling_writers=(1, 8, 64),
    pgbench_seconds=2.0,
    simulator_large_nodes=1_000,
    simulator_large_days=7,
    simulator_scaling=(100, 1_000),
    simulator_scaling_days=1,
    startup_rounds=3,
)

#: For the smoke test: everything tiny.
TINY = replace(
    QUICK,
    admission_ops=20,
    http_ops=10,
    fleets=(20,),
    writers=(1, 4),
    scaling_fleet=20,
    scaling_writers=(1, 2, 4),
    pgbench_seconds=1.0,
    ranking_nodes=500,
    ranking_decisions=5,
    reconcile_nodes=50,
    reconcile_placements=500,
    simulator_nodes=10,
    simulator_days=7,
    tick_claims=50,
    soak_ops=120,
    soak_workers=4,
    soak_check_every=0.2,
    name="tiny",
    soak_parallel=False,
    simulator_large_nodes=20,
    simulator_large_days=2,
    simulator_scaling=(10, 20),
    simulator_scaling_days=1,
    startup_rounds=1,
)

PROFILES = {"full": FULL, "quick": QUICK, "tiny": TINY}
