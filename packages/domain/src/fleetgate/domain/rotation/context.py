"""What every part of one machine step shares: the pass's inputs and the small common moves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from fleetgate.domain.capacity.relocation import Verdict
from fleetgate.domain.rotation import annotations as ann
from fleetgate.domain.rotation.actions import Action, DeletePlaceholder
from fleetgate.domain.rotation.census import PoolCensus
from fleetgate.domain.rotation.cluster import PoolObservation
from fleetgate.domain.rotation.gates import PoolMarks
from fleetgate.domain.rotation.markers import unfreeze
from fleetgate.domain.rotation.placeholder import placeholder_name
from fleetgate.domain.rotation.policy import ResolvedPolicy

CLEAR_ANCHOR: dict[str, str | None] = {
    ann.ACTIVE_ROTATION: None,
    ann.ACTIVE_ROTATION_STATE: None,
    ann.DRAINING_AT: None,
    ann.SURGE_WAIT: None,
    ann.ROTATION_MODE: None,
}
"""The one pool write that ends a rotation (spec §7.1 "Clear anchor")."""


@dataclass(frozen=True)
class MachineConfig:
    """The controller's own settings the machine needs."""

    namespace: str = "fleetgate-system"
    reference_gone: bool = False
    """The operator says the reference controller is uninstalled: release its markers."""


@dataclass(frozen=True)
class Pass:
    """One pass over one pool: the observation, the governing policy resolved for it, now, and
    the pool's census brought to this observation (made by :meth:`begin`)."""

    obs: PoolObservation
    policy: ResolvedPolicy
    """The governing RotationPolicy resolved for this pool (``policy.written``: as written)."""
    now: datetime
    config: MachineConfig
    census: PoolCensus = field(compare=False)
    """The pool's census at ``now``: the one answer to every question about the pool's claims
    (their buckets, the candidate, the short-lead, due, unbound and surge-serving ones)."""
    relocation: Mapping[str, Verdict] | None = None
    """The capacity ledger's verdict on the pool's nodes that hold placements (None: the ledger
    is not consulted; the ledger gate, ledger_gate.py)."""

    @classmethod
    def begin(
        cls,
        obs: PoolObservation,
        policy: ResolvedPolicy,
        now: datetime,
        config: MachineConfig,
        carried: PoolCensus | None = None,
        relocation: Mapping[str, Verdict] | None = None,
    ) -> Pass:
        """The pass over ``obs`` at ``now``, with ``carried`` (the census from the last pass,
        which is spent; None: a new one) advanced to ``obs``."""
        census = PoolCensus() if carried is None else carried
        census = census.advanced(obs, policy.selection, policy.lead_time_base, now)
        return cls(obs, policy, now, config, census, relocation)

    @cached_property
    def marks(self) -> PoolMarks:
        """The pool's freeze and last rotation and failure instants, as the gates read them."""
        return PoolMarks.from_annotations(self.obs.annotations)

    @property
    def stamp(self) -> str:
        """``now`` as an annotation value."""
        return ann.format_timestamp(self.now)

    def release(self, name: str) -> list[Action]:
        """Delete the placeholder(s) of the rotation of ``name`` and unfreeze its nodes."""
        actions: list[Action] = []
        names = {placeholder_name(name)}
        for pod in self.obs.placeholders:
            if pod.labels.get(ann.SURGE_FOR) == name:
                names.add(pod.name)
        present = {p.name for p in self.obs.placeholders}
        for pod_name in sorted(names & present):
            actions.append(DeletePlaceholder(self.config.namespace, pod_name))
        for node in self.census.surge_hosts(name, self.obs):
            actions.extend(unfreeze(node))
        return actions
