"""The port check itself: what ``isinstance`` lets through, :func:`assert_implements` catches."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fleetgate.domain import ports
from fleetgate.domain.events import Event
from fleetgate.domain.ports import EventSink
from tests.ports import assert_implements, signature_problems


class Renamed:
    async def emit(self, batch: Sequence[Event]) -> None:
        """A parameter named otherwise than the port names it."""


class Blocking:
    def emit(self, events: Sequence[Event]) -> None:
        """Not a coroutine where the port awaits one."""


class Greedy:
    async def emit(self, events: Sequence[Event], sink: str) -> None:
        """Needs a parameter no caller of the port passes."""


class Fine:
    async def emit(self, events: Sequence[Event], *, flush: bool = False) -> None:
        """Takes more than the port passes, all of it optional."""


@pytest.mark.parametrize(
    ("sink", "problem"),
    [(Renamed(), "parameter 1 is batch"), (Blocking(), "async"), (Greedy(), "needs parameter")],
)
def test_what_isinstance_admits_the_signature_check_refuses(sink: object, problem: str) -> None:
    assert isinstance(sink, EventSink)
    assert any(problem in p for p in signature_problems(sink, EventSink))
    with pytest.raises(AssertionError):
        assert_implements(sink, EventSink)


def test_an_implementation_may_take_more_optional_parameters() -> None:
    assert_implements(Fine(), EventSink)


#: The ledger's roles, each what one kind of caller uses (``domain.ports``).
LEDGER_ROLES = (
    ports.LedgerLifecycle,
    ports.InventoryReader,
    ports.NodeInventory,
    ports.PlacementReader,
    ports.Admissions,
    ports.ClaimReader,
    ports.ClaimBook,
    ports.LedgerReconciler,
    ports.AuditTrail,
)


def test_the_ledger_is_its_roles_and_nothing_else() -> None:
    """Each member of ``CapacityLedger`` is declared by exactly one role, and it declares none of
    its own: an operation added to the ledger has to say which callers it is for."""
    assert not [n for n in vars(ports.CapacityLedger) if not n.startswith("_")]
    owners: dict[str, list[str]] = {}
    for role in LEDGER_ROLES:
        for name in (n for n in vars(role) if not n.startswith("_")):
            owners.setdefault(name, []).append(role.__name__)
    assert {n: o for n, o in owners.items() if len(o) > 1} == {}
    every = {n for base in ports.CapacityLedger.__mro__ for n in vars(base) if n in owners}
    assert every == set(owners) and len(owners) == 27


class _OnlyNodes:
    async def nodes(self, *, after: str | None = None, limit: int | None = None) -> list[object]:
        return []


def test_a_narrow_implementation_is_its_role_and_not_the_ledger() -> None:
    """A role is satisfied alone: a stand-in for one caller need not carry the other 24."""

    class Reader(_OnlyNodes):
        async def node(self, name: str) -> None:
            return None

        async def cluster(self) -> None:
            return None

    assert_implements(Reader(), ports.InventoryReader)
    assert not isinstance(Reader(), ports.CapacityLedger)
    assert not isinstance(_OnlyNodes(), ports.InventoryReader)
