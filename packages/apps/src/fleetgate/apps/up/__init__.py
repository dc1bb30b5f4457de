"""``fleetgate up``: the whole system on the embedded default, with a dashboard.

``command`` wires and runs it; ``fleet`` is the sample fleet and its default policies;
``workload`` the generator of placements and node load; ``runtime`` the accelerated-time loop;
``status`` the dashboard's snapshot.
"""

from fleetgate.apps.up.command import run_up

__all__ = ["run_up"]
