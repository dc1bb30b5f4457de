"""fleetgate's benchmarks and fault evidence (``python -m benchmarks``; ``nox -s bench``).

Throughput and latency of admission against the database's own ceiling, the scale of ranking,
reconcile, the simulator and the controller tick, and the reliability soak with connections
killed at every statement of the admission transaction. A full run rewrites
``docs/performance.md``; ``--quick`` is a small smoke run. None of this is part of the test suite
(``tests/benchmarks/test_smoke.py`` only checks that the harness still runs end to end).
"""
