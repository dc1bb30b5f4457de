"""Service tests run on the in-memory ledger: their subject is a use case's logic, not SQL.

``ledger`` here replaces the root conftest's SQL ledger. The fake is held to the SQL ledger by
the contract suite (tests/fakes/test_ledger.py) on every backend, and the services meet the real
database in the API and end-to-end tests.
"""

from __future__ import annotations

import pytest

from fleetgate.adapters.clock import VirtualClock
from tests.fakes.ledger import InMemoryLedger


@pytest.fixture
def ledger(clock: VirtualClock) -> InMemoryLedger:
    """An empty in-memory ledger on ``clock`` (advisory claims, the default overcommit)."""
    return InMemoryLedger(clock)
