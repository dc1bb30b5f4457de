"""The placement walk and its waiver decision (capacity spec 5.2, with defect 3 fixed).

The first pass tries every ranked candidate with the demand clause on. If none admitted and some
refused on demand alone, one waiver pass retries *only those* candidates, in the same order, with
the clause waived: a spreader must never fail a placement that a node has real room for.
Candidates refused on a real dimension (or cordoned) are not retried.

A walk may be given what the snapshot knows (``presume``): a first-pass candidate the snapshot
says has no room on a real dimension is not tried, its presumed refusal stands in for one. Before
such a walk refuses, it asks its driver for a read that started after it began (``needs_recheck``;
``rechecked``): the presumed refusals that read confirms are the answer, the others are tried. So
a full fleet answers with one read and at most one guarded attempt instead of one per candidate,
a stale snapshot costs at worst tries, never a refusal, and the guarded UPDATE stays the only
judge of what is admitted. A walk that tried nothing tries its first presumed candidate anyway:
only the admission transaction can say whether the namespace side (a claim) refuses first.

The candidates may be a lazy iterator (``ranking.CandidateOrder``): the first pass draws one
candidate per try, so a walk that admits at once never orders the rest of the fleet. The waiver
pass only runs once the first pass has drawn every candidate, so by then the whole order is
known and it revisits exactly that list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass
from typing import Final

from fleetgate.domain.capacity.denials import Denial

#: The demand budget factor of a waived attempt: ``guards.node_guard`` drops the demand clause
#: for any factor <= 0, so only the allocation dimensions (and the cordon) can refuse.
WAIVED_TARGET_LOAD: Final = 0.0

#: What is known of a candidate before trying it: its presumed refusal on a real dimension, or
#: ``None`` when it may have room (then it is tried).
Presume = Callable[[str], Denial | None]


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
    pass is over. ``presumed`` are the refusals that stand for candidates never tried.
    """

    def __init__(self, candidates: Iterable[str], presume: Presume | None = None) -> None:
        if isinstance(candidates, Sized) and len(set(candidates)) != len(candidates):
            raise ValueError("candidates: a node may appear only once")
        self._source = iter(candidates)
        self._presume = presume
        self.candidates: list[str] = []
        self._seen: set[str] = set()
        self.denials: dict[str, Denial] = {}
        self.presumed: dict[str, Denial] = {}
        self.waived = False
        self.admitted_on: str | None = None
        #: Attempts handed out so far (each one guarded transaction).
        self.attempts = 0
        self._queue: deque[Attempt] = deque()
        self._first_pass_done = False
        self._rechecked = False
        self._waiver_decided = False

    def next_attempt(self) -> Attempt | None:
        """The next candidate to try, or ``None`` when the walk is over (or ``needs_recheck``)."""
        if self.admitted_on is not None:
            return None
        if not self._first_pass_done:
            step = self._draw()
            if step is not None:
                return self._handed(step)
            self._first_pass_done = True
        if self._queue:
            return self._handed(self._queue.popleft())
        if self.needs_recheck or self._waiver_decided:
            return None
        self._waiver_decided = True
        retry = waiver_candidates(self.candidates, self.denials)
        if not retry:
            return None
        self.waived = True
        self._queue.extend(
            Attempt(n, enforce_demand=False, opens_waiver=(i == 0)) for i, n in enumerate(retry)
        )
        return self._handed(self._queue.popleft())

    def _draw(self) -> Attempt | None:
        """The first pass: the next drawn candidate not presumed to refuse."""
        while (name := next(self._source, None)) is not None:
            if name in self._seen:
                raise ValueError(f"candidates: {name} appeared twice")
            self._seen.add(name)
            self.candidates.append(name)
            presumed = None if self._presume is None else self._presume(name)
            if presumed is None:
                return Attempt(name, enforce_demand=True)
            self.presumed[name] = self.denials[name] = presumed
        return None

    def _handed(self, step: Attempt) -> Attempt:
        self.attempts += 1
        return step

    @property
    def needs_recheck(self) -> bool:
        """The first pass is over, nothing admitted, and presumed refusals await a fresh read."""
        return (
            self.admitted_on is None
            and self._first_pass_done
            and not self._queue
            and bool(self.presumed)
            and not self._rechecked
        )

    def rechecked(self, presume: Presume | None) -> None:
        """Judge the presumed refusals again by ``presume``, from a read that started after the
        walk began (``None``: the walk's own presumptions came from such a read).

        Those it no longer presumes are tried, in drawn order, with the demand clause on; the
        rest stand as refusals. If nothing was tried yet, the first presumed one is tried.
        """
        self._rechecked = True
        retry: list[str] = []
        for name in list(self.presumed):
            denial = self.presumed[name] if presume is None else presume(name)
            if denial is None:
                retry.append(name)
                del self.presumed[name], self.denials[name]
            else:
                self.presumed[name] = self.denials[name] = denial
        if not retry and self.attempts == 0 and self.presumed:
            first = next(iter(self.presumed))
            del self.presumed[first]
            retry.append(first)
        self._queue.extend(Attempt(n, enforce_demand=True) for n in retry)

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
