"""The composition root: the only place that constructs adapters and wires them to services.

Adapters are reached through the plugin manager (never imported), so a third-party ledger or
cluster plugin is chosen by configuration alone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from random import Random
from typing import TYPE_CHECKING, Any

import pluggy
from dependency_injector import containers, providers
from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import SystemClock, VirtualClock
from fleetgate.apps.controller.metrics import RotationMetrics
from fleetgate.apps.controller.policies import policy_source
from fleetgate.apps.controller.shell import RotationController
from fleetgate.apps.eventsink import FanOutEventSink, LoggingEventSink, RequestIdEventSink
from fleetgate.apps.reconciler.loop import Reconciler
from fleetgate.apps.reconciler.metrics import ReconcilerMetrics
from fleetgate.apps.services.claims import ClaimService
from fleetgate.apps.services.dryrun import DryRun
from fleetgate.apps.services.nodes import NodeAdmin
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.placement import PlacementService
from fleetgate.apps.services.relocation import RelocationCheck
from fleetgate.apps.services.rotationstatus import RotationStatus
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.apps.services.tokens import TokenService
from fleetgate.apps.settings import Settings, load_settings
from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.ports import (
    CapacityLedger,
    Clock,
    ClusterGateway,
    ClusterRuntime,
    EventSink,
    SimulatedCluster,
    TokenStore,
)
from fleetgate.domain.rotation.context import MachineConfig

if TYPE_CHECKING:  # imported where built: the API, `up` and the CLI need them, not every process
    from fleetgate.apps.services.simulation import Simulator
    from fleetgate.apps.up.runtime import Cadence, UpRuntime
    from fleetgate.apps.up.status import UpStatus
    from fleetgate.apps.up.workload import Workload


def _ledger(
    pm: pluggy.PluginManager, settings: Settings, clock: Clock, policy: DemandPolicy
) -> CapacityLedger:
    # The ledger decays demand by the same policy instance the services charge it by.
    return plugins.make_ledger(pm, settings.database_url, settings.ledger_options(), clock, policy)


def _token_store(ledger: CapacityLedger) -> TokenStore:
    # The SQL ledger implements TokenStore: tokens live in its database, beside what they guard.
    if not isinstance(ledger, TokenStore):
        raise TypeError(f"database_url: the {type(ledger).__name__} ledger keeps no API tokens")
    return ledger


def _capacity_events(ledger: CapacityLedger) -> RequestIdEventSink:
    # Capacity audit events go to the log and to the ledger's events table (read back by the API),
    # each carrying the id of the API request that caused it.
    return RequestIdEventSink(FanOutEventSink(LoggingEventSink(), ledger.event_sink()))


def _demand_policy(settings: Settings) -> DemandPolicy:
    return settings.capacity.demand_policy()


def _node_snapshot(
    ledger: CapacityLedger, clock: Clock, policy: DemandPolicy, settings: Settings
) -> NodeSnapshot:
    return NodeSnapshot(ledger, clock, policy.target_load, settings.capacity.snapshot_seconds)


def _placement_service(
    ledger: CapacityLedger,
    clock: Clock,
    events: EventSink,
    policy: DemandPolicy,
    settings: Settings,
    snapshot: NodeSnapshot,
) -> PlacementService:
    rng = Random(settings.capacity.ranking_seed)
    return PlacementService(ledger, clock, events, policy, rng, snapshot)


def _dry_run(service: PlacementService, ledger: Any, clock: Any, settings: Settings) -> DryRun:
    return DryRun(
        service,
        ledger,
        clock,
        hard_claims=settings.claims.enforcement is ClaimEnforcement.HARD,
        seed=settings.capacity.ranking_seed,
    )


def _ledger_gate(
    settings: Settings, relocation: Callable[[], RelocationCheck]
) -> RelocationCheck | None:
    # Gate 9's judge, decided here once for the controller and the status alike: with the node
    # sync on (and the gate not switched off), the controller judges a node's ledger placements
    # before it drains it, and the status must report what that controller would (issue 41: a
    # status built without it said ledger_hold: null during a hold the controller showed).
    ctl = settings.controller
    return relocation() if ctl.sync_ledger and ctl.ledger_gate_enabled else None


def _rotation_status(
    settings: Settings,
    cluster: ClusterGateway,
    clock: Clock,
    config: MachineConfig,
    relocation: Callable[[], RelocationCheck],
) -> RotationStatus:
    # The same policies, machine configuration and ledger gate as the controller.
    return RotationStatus(
        cluster,
        policy_source(settings.controller.policies, cluster),
        clock,
        config,
        _ledger_gate(settings, relocation),
    )


def _reconciler(
    ledger: CapacityLedger,
    clock: Clock,
    events: EventSink,
    registry: CollectorRegistry,
    settings: Settings,
) -> Reconciler:
    metrics = ReconcilerMetrics(registry)
    return Reconciler(ledger, clock, events, metrics, settings.reconciler.interval_seconds)


def _node_sync(
    ledger: CapacityLedger,
    cluster: ClusterGateway,
    clock: Clock,
    events: EventSink,
    policy: DemandPolicy,
) -> NodeSync:
    # Relocations carry out plans judged with the same demand policy as new placements.
    return NodeSync(ledger, cluster, clock, events, policy)


def _relocation_check(
    ledger: CapacityLedger, policy: DemandPolicy, settings: Settings
) -> RelocationCheck:
    # Gate 9 judges the relocation plan with the node sync's own demand policy, and holds a
    # drain's reserved room for the configured time.
    ttl = timedelta(seconds=settings.controller.ledger_reservation_seconds)
    return RelocationCheck(ledger, policy, ttl)


def _cluster(pm: pluggy.PluginManager, settings: Settings, clock: Clock) -> ClusterGateway:
    # The controller's namespace reaches the backend by one route, the hook's ``namespace``
    # (placeholders, the Lease and Events live there); ``cluster_options`` may still name another.
    return plugins.make_cluster(
        pm, settings.cluster, dict(settings.cluster_options), clock, settings.controller.namespace
    )


def _simulated_cluster(cluster: ClusterGateway, settings: Settings) -> SimulatedCluster:
    if not isinstance(cluster, SimulatedCluster):
        raise TypeError(f"cluster: {settings.cluster!r} cannot run in virtual time")
    return cluster


def _machine_config(settings: Settings) -> MachineConfig:
    ctl = settings.controller
    return MachineConfig(namespace=ctl.namespace, reference_gone=ctl.reference_controller_gone)


def _rotation_events(cluster: ClusterGateway, events: EventSink) -> EventSink:
    # A backend with a real cluster also records rotation events as Kubernetes Events there.
    if isinstance(cluster, ClusterRuntime):
        return FanOutEventSink(events, cluster.event_sink())
    return events


def _rotation_controller(
    settings: Settings,
    cluster: ClusterGateway,
    clock: Clock,
    events: EventSink,
    registry: CollectorRegistry,
    config: MachineConfig,
    relocation: Callable[[], RelocationCheck],
) -> RotationController:
    ctl = settings.controller
    # The placeholder image and priority class reach the cluster on each PlaceholderSpec only.
    return RotationController(
        cluster,
        policy_source(ctl.policies, cluster),
        clock,
        events,
        RotationMetrics(registry, nrc_names=ctl.nrc_metrics),
        config,
        placeholder_image=ctl.placeholder_image,
        priority_class=ctl.priority_class,
        relocation=_ledger_gate(settings, relocation),
    )


def _simulator() -> Simulator:
    # The simulation's world is composed in simulate/world.py, which ``fleetgate simulate``
    # imports without this module (docs/decisions.md); imported where built, like the rest.
    from fleetgate.apps.simulate.world import simulator

    return simulator()


def _up_workload(
    ledger: CapacityLedger,
    placements: PlacementService,
    clock: Clock,
    rng: Random,
    claims: ClaimService,
) -> Workload:
    from fleetgate.apps.up.workload import Workload

    return Workload(ledger, placements, clock, rng, claims=claims)


def _up_status(
    ledger: CapacityLedger,
    cluster: SimulatedCluster,
    clock: Clock,
    settings: Settings,
    workload: Workload,
    speed: float,
) -> UpStatus:
    from fleetgate.apps.up.status import UpStatus

    return UpStatus(
        ledger,
        cluster,
        clock,
        speed=speed,
        target_load=settings.capacity.target_load,
        counters=workload.counters,
    )


def _up_cadence(settings: Settings, speed: float) -> Cadence:
    from fleetgate.apps.up.runtime import cadence_for

    return cadence_for(settings, speed)


def _up_runtime(
    clock: Clock,
    cluster: SimulatedCluster,
    controller: RotationController,
    sync: NodeSync,
    workload: Workload,
    reconciler: Reconciler,
    status: UpStatus,
    speed: float,
    cadence: Cadence,
) -> UpRuntime:
    from fleetgate.apps.up.runtime import UpRuntime

    return UpRuntime(
        clock=clock,
        cluster=cluster,
        controller=controller,
        sync=sync,
        workload=workload,
        reconcile=reconciler.run_pass,
        status=status,
        speed=speed,
        cadence=cadence,
    )


class Container(containers.DeclarativeContainer):
    """Providers for everything fleetgate runs with. Override any of them in tests."""

    settings = providers.Singleton(load_settings)
    plugin_manager = providers.Singleton(plugins.plugin_manager)
    clock = providers.Singleton(SystemClock)
    metrics_registry = providers.Singleton(CollectorRegistry)
    # One per process: the services walk with it and the ledger decays demand by it.
    demand_policy = providers.Singleton(_demand_policy, settings=settings)
    ledger = providers.Singleton(
        _ledger, pm=plugin_manager, settings=settings, clock=clock, policy=demand_policy
    )
    cluster = providers.Singleton(_cluster, pm=plugin_manager, settings=settings, clock=clock)
    simulated_cluster = providers.Singleton(_simulated_cluster, cluster=cluster, settings=settings)
    event_sink = providers.Singleton(LoggingEventSink)
    capacity_events = providers.Singleton(_capacity_events, ledger=ledger)
    # One per process: the API's node routes invalidate the snapshot the placements rank.
    node_snapshot = providers.Singleton(
        _node_snapshot, ledger=ledger, clock=clock, policy=demand_policy, settings=settings
    )
    placement_service = providers.Singleton(
        _placement_service,
        ledger=ledger,
        clock=clock,
        events=capacity_events,
        policy=demand_policy,
        settings=settings,
        snapshot=node_snapshot,
    )
    dry_run = providers.Singleton(
        _dry_run, service=placement_service, ledger=ledger, clock=clock, settings=settings
    )
    token_store = providers.Singleton(_token_store, ledger=ledger)
    token_service = providers.Singleton(
        TokenService, store=token_store, clock=clock, events=capacity_events
    )
    node_admin = providers.Singleton(
        NodeAdmin, ledger=ledger, clock=clock, events=capacity_events, snapshot=node_snapshot
    )
    node_sync = providers.Singleton(
        _node_sync,
        ledger=ledger,
        cluster=cluster,
        clock=clock,
        events=capacity_events,
        policy=demand_policy,
    )
    relocation_check = providers.Singleton(
        _relocation_check, ledger=ledger, policy=demand_policy, settings=settings
    )
    claim_service = providers.Singleton(
        ClaimService, ledger=ledger, clock=clock, events=capacity_events
    )
    reconciler = providers.Singleton(
        _reconciler,
        ledger=ledger,
        clock=clock,
        events=capacity_events,
        registry=metrics_registry,
        settings=settings,
    )
    machine_config = providers.Singleton(_machine_config, settings=settings)
    rotation_status = providers.Singleton(
        _rotation_status,
        settings=settings,
        cluster=cluster,
        clock=clock,
        config=machine_config,
        relocation=relocation_check.provider,
    )
    rotation_events = providers.Singleton(_rotation_events, cluster=cluster, events=event_sink)
    rotation_controller = providers.Singleton(
        _rotation_controller,
        settings=settings,
        cluster=cluster,
        clock=clock,
        events=rotation_events,
        registry=metrics_registry,
        config=machine_config,
        relocation=relocation_check.provider,
    )
    simulator = providers.Singleton(_simulator)
    #: Whether the clock is virtual time (virtual_container): the API then says so in every
    #: answer (wire.CLOCK_HEADER), and the client labels the instants it prints.
    virtual_clock = providers.Object(False)
    # `fleetgate up` (up_container): the workload, the status, and the runtime driving them all.
    up_speed = providers.Object(1.0)
    up_rng = providers.Singleton(Random)
    up_workload = providers.Singleton(
        _up_workload,
        ledger=ledger,
        placements=placement_service,
        clock=clock,
        rng=up_rng,
        claims=claim_service,
    )
    up_status = providers.Singleton(
        _up_status,
        ledger=ledger,
        cluster=simulated_cluster,
        clock=clock,
        settings=settings,
        workload=up_workload,
        speed=up_speed,
    )
    up_cadence = providers.Singleton(_up_cadence, settings=settings, speed=up_speed)
    up_runtime = providers.Singleton(
        _up_runtime,
        clock=clock,
        cluster=simulated_cluster,
        controller=rotation_controller,
        sync=node_sync,
        workload=up_workload,
        reconciler=reconciler,
        status=up_status,
        speed=up_speed,
        cadence=up_cadence,
    )


def build_container(settings: Settings | None = None, **overrides: Any) -> Container:
    """A container for one process. ``settings`` replaces the environment-derived settings."""
    container = Container()
    if settings is not None:
        container.settings.override(providers.Object(settings))
    for name, value in overrides.items():
        getattr(container, name).override(providers.Object(value))
    return container


def virtual_container(settings: Settings, start: datetime, **overrides: Any) -> Container:
    """A container whose clock is virtual time from ``start`` (the simulator, ``fleetgate up``)."""
    return build_container(settings, clock=VirtualClock(start), virtual_clock=True, **overrides)


def up_container(settings: Settings, start: datetime, speed: float, **overrides: Any) -> Container:
    """The container of ``fleetgate up``: virtual time from ``start`` run at ``speed``, and the
    rotation events in the audit trail too, beside the capacity events."""
    container = virtual_container(settings, start, up_speed=speed, **overrides)
    container.event_sink.override(container.capacity_events)
    return container
