"""Which of a pass's writes begin or give up a drain whose ledger room is reserved (gate 9).

Before the shell deletes a NodeClaim whose node holds ledger placements it reserves the room of
that node's relocation plan (``RelocationCheck.reserve``; ``capacity.reservations``), so no
admission can take it between the verdict and the node sync's moves. A rotation that fails
before its drain began gives the room back. These helpers only read the step's actions and the
observation: the step decided the drain, the shell carries it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation import actions as act
from fleetgate.domain.rotation.annotations import CLAIM_STATE, ClaimState
from fleetgate.domain.rotation.cluster import PoolObservation


def drains(
    obs: PoolObservation, actions: Sequence[act.Action], verdicts: Mapping[str, Verdict]
) -> list[tuple[str, Verdict]]:
    """(claim, plan) for each NodeClaim deletion of ``actions`` whose node has moves to make."""
    out = []
    for a in actions:
        if not isinstance(a, act.DeleteClaim):
            continue
        claim = obs.claim(a.name)
        verdict = None if claim is None else verdicts.get(claim.node_name or "")
        if verdict is not None and verdict.moves:
            out.append((a.name, verdict))
    return out


def given_up(obs: PoolObservation, actions: Sequence[act.Action]) -> list[str]:
    """The nodes whose rotation ``actions`` mark failed while their claim is not being deleted:
    no drain is under way there, so room reserved for one is no longer needed."""
    nodes = []
    for a in actions:
        if not isinstance(a, act.AnnotateClaim):
            continue
        if a.patch.get(CLAIM_STATE) != ClaimState.FAILED.value:
            continue
        claim = obs.claim(a.name)
        if claim is not None and not claim.deleting and claim.node_name:
            nodes.append(claim.node_name)
    return nodes


__all__ = ["drains", "given_up"]
