"""The placement walk and its waiver decision (capacity spec 5.2, with defect 3 fixed).

The first pass tries every ranked candidate with the demand clause on. If none admitted and some
refused on demand alone, one waiver pass retries *only those* candidates, in the same order, with
the clause waived: a spreader must never fail a placement that a node has real room for.
Candidates refused on a real dimension (or cordoned) are not retried.

The candidates may be a lazy iterator (``ranking.CandidateOrder``): the first pass draws one
candidate per try, so a walk that admits at once never orders the rest of the fleet. The waiver
pass only runs once the first pass has drawn every candidate, so by then the whole order is
known and it revisits exactly that list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import Final

from fleetgate.domain.capacity.denials import Denial

#: The demand budget factor of a waived attempt: ``guards.node_guard`` drops the demand clause
#: for any factor <= 0, so only the allocation dimensions (and the cordon) can refuse.
WAIVED_TARGET_LOAD: Final = 0.0


@dataclass(frozen=True)
class Attempt:
    """One try: ``node``, with or without the demand clause, and whether it opens the waiver."""

    node: str
    enforce_demand: bool
    opens_waiver: bool = False

    def target_load(self, target_load: float) -> float:
        """The demand budget factor to admit with: the policy's, or the waiver's on a waived try."""
        return target_load if self.enforce_demand else WAIVED_TARGET_LOAD


class Walk:
    """The state of one placement's walk. Drive it with ``next_attempt`` / ``refused``.

    ``candidates`` lists the candidates drawn so far, in order: every candidate once the first
    pass is over.
    """

    def __init__(self, candidates: Iterable[str]) -> None:
        if isinstance(candidates, Sized) and len(set(candidates)) != len(candidates):
            raise ValueError("candidates: a node may appear only once")
        self._source = iter(candidates)
        self.candidates: list[str] = []
        self._seen: set[str] = set()
        self.denials: dict[str, Denial] = {}
        self.waived = False
        self.admitted_on: str | None = None
        self._queue: deque[Attempt] = deque()
        self._first_pass_done = False

    def next_attempt(self) -> Attempt | None:
        """The next candidate to try, or ``None`` when the walk is over."""
        if self.admitted_on is not None:
            return None
        if not self._first_pass_done:
            name = next(self._source, None)
            if name is not None:
                if name in self._seen:
                    raise ValueError(f"candidates: {name} appeared twice")
                self._seen.add(name)
                self.candidates.append(name)
                return Attempt(name, enforce_demand=True)
            self._first_pass_done = True
            retry = waiver_candidates(self.candidates, self.denials)
            if retry:
                self.waived = True
                self._queue.extend(
                    Attempt(n, enforce_demand=False, opens_waiver=(i == 0))
                    for i, n in enumerate(retry)
                )
        return self._queue.popleft() if self._queue else None

    def refused(self, node: str, denial: Denial) -> None:
        """Record that ``node`` refused (a waiver-pass refusal replaces the first-pass one)."""
        self.denials[node] = denial

    def admitted(self, node: str) -> None:
        """Record that ``node`` admitted: the walk is over."""
        self.admitted_on = node
        self._queue.clear()


def waiver_candidates(candidates: Iterable[str], denials: dict[str, Denial]) -> list[str]:
    """The candidates a waiver pass retries: those refused on demand alone, in ranked order."""
    return [n for n in candidates if n in denials and denials[n].demand_only]
