"""The one driver of the placement walk: ``place``, ``move`` and a relocation all use it.

The domain's ``walk.Walk`` decides which candidate is tried next, with or without the demand
clause, and when the waiver pass runs; ``try_candidates`` only carries out those attempts with
the caller's attempt function (one guarded ledger transaction each) and tells the walk what
happened. What an attempt reports (audit events) and which errors end the walk stay with the
caller, so each use case keeps its own event names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fleetgate.domain.capacity.model import Admission
from fleetgate.domain.capacity.walk import Attempt, Presume, Walk

#: Tries one attempt; ``None`` when the candidate is skipped (it left the ledger, say).
AttemptFn = Callable[[Attempt], Awaitable[Admission | None]]
#: A fresh judgement of the presumed refusals (``None``: the walk's own read is fresh enough).
RecheckFn = Callable[[], Awaitable[Presume | None]]


async def try_candidates(
    walk: Walk, attempt: AttemptFn, recheck: RecheckFn | None = None
) -> Admission | None:
    """Drive ``walk`` to its end; return the last admission result (``None``: nothing tried).

    A result with a denial is recorded as that candidate's refusal; any other result (an
    admission, or a replay of an earlier one) ends the walk on that candidate. A walk that
    presumed refusals asks ``recheck`` once before it refuses.
    """
    last: Admission | None = None
    while True:
        step = walk.next_attempt()
        if step is None:
            if not walk.needs_recheck:
                break
            walk.rechecked(None if recheck is None else await recheck())
            continue
        result = await attempt(step)
        if result is None:
            continue
        last = result
        if result.denial is not None:
            walk.refused(step.node, result.denial)
        else:
            walk.admitted(step.node)
    return last
