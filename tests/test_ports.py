"""The port check itself: what ``isinstance`` lets through, :func:`assert_implements` catches."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

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
