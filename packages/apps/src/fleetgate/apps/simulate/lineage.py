"""Slots and generations: which node carried each initial node's workload, and when.

Every initial node carries one workload Pod; its *slot* is that workload. Each NodeClaim the
workload runs on in turn is a *generation* of the slot: the initial one, then the surge node a
rotation prepared, the node Karpenter launched after a surge-less drain, or the replacement it
launched after a forced expiry. A generation that outlives its ``expireAfter`` deadline is a
breach — whether Karpenter had to force it or it was still draining (in-flight counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetgate.apps.simulate.fleet import Fleet
from fleetgate.apps.simulate.recorder import Recorder, Rotation
from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.rotation.annotations import format_timestamp
from fleetgate.domain.rotation.constants import DRAIN_FALLBACK
from fleetgate.domain.rotation.policy import ResolvedPolicy


@dataclass
class Lineage:
    """The per-slot history of a run, JSON-ready."""

    generations: list[dict[str, Any]] = field(default_factory=list)
    rotations: list[dict[str, Any]] = field(default_factory=list)
    breach_events: list[dict[str, Any]] = field(default_factory=list)
    breaches: int = 0
    #: The fleet's slots (an initial node and its replacements) with at least one breach.
    breached_slots: set[int] = field(default_factory=set)


def _ts(value: datetime | None) -> str | None:
    return format_timestamp(value) if value is not None else None


def chains(cluster: Any, fleet: Fleet) -> list[list[str]]:
    """For each slot, the claims its workload ran on, in order."""
    # The bindings by Pod, gathered in one walk over the history (not one walk per slot).
    hosts: dict[str, list[str]] = {}
    for record in cluster.history:
        if record.kind == "pod-bound":
            hosts.setdefault(record.name, []).append(dict(record.data)["node"])
    out = []
    for node in fleet.nodes:
        chain = [node.name]
        for host in hosts.get(f"{node.name}-app", ()):
            if host != chain[-1]:
                chain.append(host)
        out.append(chain)
    return out


def build_lineage(
    cluster: Any, fleet: Fleet, recorder: Recorder, resolved: ResolvedPolicy, through: datetime
) -> Lineage:
    """Generations, rotations and breaches of a finished run."""
    ready_at: dict[str, datetime] = {}
    removed_at: dict[str, datetime] = {}
    for record in cluster.history:
        if record.kind == "claim-ready":
            ready_at.setdefault(record.name, record.at)
        elif record.kind == "claim-removed":
            removed_at[record.name] = record.at
    forced = {record.name for record in cluster.breaches}
    by_node: dict[str, list[Rotation]] = {}
    for rotation in recorder.rotations:
        by_node.setdefault(rotation.node, []).append(rotation)
    lineage = Lineage()
    position: dict[str, tuple[int, int]] = {}
    slot_chains = chains(cluster, fleet)
    # A claim may carry more than one slot's workload (a Pod displaced by a forced expiry lands
    # on a neighbour): its breach is counted once, in its home slot, the one where it comes
    # earliest (an initial node is its own slot's generation 0).
    home: dict[str, tuple[int, int]] = {}
    for slot, chain in enumerate(slot_chains):
        for gen, name in enumerate(chain):
            home[name] = min(home.get(name, (gen, slot)), (gen, slot))
    for slot, chain in enumerate(slot_chains):
        for gen, name in enumerate(chain):
            position[name] = (slot, gen)
            claim = cluster.archive[name]
            deadline = (
                claim.created_at + claim.expire_after if claim.expire_after is not None else None
            )
            tgp = claim.termination_grace_period
            if resolved.override is not None:
                boundary = claim.created_at + resolved.override
            elif deadline is not None:
                boundary = deadline - resolved.lead_time_for(tgp)
            else:
                boundary = None
            removed = removed_at.get(name)
            breached = (
                deadline is not None
                and deadline <= through
                and (removed is None or removed > deadline)
            )
            if breached and deadline is not None and home[name] == (gen, slot):
                lineage.breaches += 1
                lineage.breached_slots.add(slot)
                lineage.breach_events.append(
                    {
                        "at": deadline,
                        "type": "expire-after-breach",
                        "node": name,
                        "slot": slot,
                        "generation": gen,
                        "forced": name in forced,
                    }
                )
            lineage.generations.append(
                {
                    "slot": slot,
                    "gen": gen,
                    "name": name,
                    "birthMode": _birth(chain, gen, by_node),
                    "predecessorGen": gen - 1 if gen else None,
                    "createdAt": _ts(claim.created_at),
                    "expireAfter": fmt(claim.expire_after) if claim.expire_after else "Never",
                    "drainCap": fmt(tgp if tgp is not None else DRAIN_FALLBACK),
                    "drainCapSource": "explicit" if tgp is not None else "fallback",
                    "deadline": _ts(deadline),
                    "eligibilityBoundary": _ts(boundary),
                    "readyAt": _ts(ready_at.get(name)),
                    "removedAt": _ts(removed),
                    "breached": breached,
                    "provisional": removed is None,
                }
            )
    for rotation in recorder.rotations:
        where = position.get(rotation.node)
        row, gen_from = where if where is not None else (None, None)
        to_gen = None
        if row is not None and gen_from is not None and rotation.outcome == "success":
            to_gen = gen_from + 1 if gen_from + 1 < len(slot_chains[row]) else None
        replacement = slot_chains[row][to_gen] if row is not None and to_gen is not None else None
        lineage.rotations.append(
            {
                "slot": row,
                "fromGen": gen_from,
                "toGen": to_gen,
                "node": rotation.node,
                "replacement": replacement,
                "mode": rotation.mode,
                "outcome": rotation.outcome or "in-flight",
                "start": _ts(rotation.start),
                "ready": _ts(rotation.ready),
                "done": _ts(rotation.done),
                "deadline": _ts(rotation.deadline),
            }
        )
    return lineage


def _birth(chain: list[str], gen: int, by_node: dict[str, list[Rotation]]) -> str:
    if gen == 0:
        return "initial"
    done = [r for r in by_node.get(chain[gen - 1], []) if r.outcome == "success"]
    if not done:
        return "replacement"  # Karpenter replaced a node it expired or lost
    if done[-1].mode == "surgeless":
        return "surgeless"
    return "surge"
