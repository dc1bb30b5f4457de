"""The placement walk and its waiver decision (capacity spec 5.2, with defect 3 fixed).

The first pass tries every ranked candidate with the demand clause on. If none admitted and some
refused on demand alone, one waiver pass retries *only those* candidates, in the same order, with
the clause waived: a spreader must never fail a placement that a node has real room for.
Candidates refused on a real dimension (or cordoned) are not retried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fleetgate.domain.capacity.denials import Denial


@dataclass(frozen=True)
class Attempt:
    """One try: ``node``, with or without the demand clause, and whether it opens the waiver."""

    node: str
    enforce_demand: bool
    opens_waiver: bool = False


@dataclass
class Walk:
    """The state of one placement's walk. Drive it with ``next_attempt`` / ``refused``."""

    candidates: Sequence[str]
    denials: dict[str, Denial] = field(default_factory=dict)
    waived: bool = False
    admitted_on: str | None = None
    _queue: list[Attempt] = field(default_factory=list)
    _first_pass_done: bool = False

    def __post_init__(self) -> None:
        if len(set(self.candidates)) != len(self.candidates):
            raise ValueError("candidates: a node may appear only once")
        self._queue = [Attempt(n, enforce_demand=True) for n in self.candidates]

    def next_attempt(self) -> Attempt | None:
        """The next candidate to try, or ``None`` when the walk is over."""
        if self.admitted_on is not None:
            return None
        if not self._queue and not self._first_pass_done:
            self._first_pass_done = True
            retry = waiver_candidates(self.candidates, self.denials)
            if retry:
                self.waived = True
                self._queue = [
                    Attempt(n, enforce_demand=False, opens_waiver=(i == 0))
                    for i, n in enumerate(retry)
                ]
        return self._queue.pop(0) if self._queue else None

    def refused(self, node: str, denial: Denial) -> None:
        """Record that ``node`` refused (a waiver-pass refusal replaces the first-pass one)."""
        self.denials[node] = denial

    def admitted(self, node: str) -> None:
        """Record that ``node`` admitted: the walk is over."""
        self.admitted_on = node
        self._queue.clear()


def waiver_candidates(candidates: Sequence[str], denials: dict[str, Denial]) -> list[str]:
    """The candidates a waiver pass retries: those refused on demand alone, in ranked order."""
    return [n for n in candidates if n in denials and denials[n].demand_only]
