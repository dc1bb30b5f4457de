"""Fixtures for the service tests: a real ledger on the database under test, virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fleetgate.adapters.clock import VirtualClock
from fleetgate.adapters.sql.ledger import SqlLedger
from tests.conftest import Backend
from tests.ledgers import START, open_ledger


@pytest.fixture
def clock() -> VirtualClock:
    """Virtual time, starting at ``tests.ledgers.START``."""
    return VirtualClock(START)


@pytest.fixture
async def ledger(backend: Backend, clock: VirtualClock) -> AsyncIterator[SqlLedger]:
    """A started ledger with every table empty."""
    async with open_ledger(backend, clock) as opened:
        yield opened
