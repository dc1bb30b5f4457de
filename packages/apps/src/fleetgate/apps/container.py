"""The composition root: the only place that constructs adapters and wires them to services.

Adapters are reached through the plugin manager (never imported), so a third-party ledger or
cluster plugin is chosen by configuration alone.
"""

from __future__ import annotations

from datetime import datetime
from random import Random
from typing import Any

from dependency_injector import containers, providers
from prometheus_client import CollectorRegistry

from fleetgate.adapters import plugins
from fleetgate.adapters.clock import SystemClock, VirtualClock
from fleetgate.apps.eventsink import FanOutEventSink, LoggingEventSink, RequestIdEventSink
from fleetgate.apps.reconciler.loop import Reconciler
from fleetgate.apps.reconciler.metrics import ReconcilerMetrics
from fleetgate.apps.services.claims import ClaimService
from fleetgate.apps.services.dryrun import DryRun
from fleetgate.apps.services.nodesync import NodeSync
from fleetgate.apps.services.placement import PlacementService
from fleetgate.apps.services.snapshot import NodeSnapshot
from fleetgate.apps.settings import Settings, load_settings
from fleetgate.domain.capacity.demand import DemandPolicy


def _ledger(pm: Any, settings: Settings, clock: Any) -> Any:
    return plugins.make_ledger(pm, settings.database_url, settings.ledger_options(), clock)


def _token_store(ledger: Any) -> Any:
    # The SQL ledger implements TokenStore: tokens live in its database, beside what they guard.
    return ledger


def _api_app(container: Any) -> Any:
    from fleetgate.apps.api.app import create_app  # FastAPI is imported only by `fleetgate api`

    return create_app(container)


def _capacity_events(ledger: Any) -> RequestIdEventSink:
    # Capacity audit events go to the log and to the ledger's events table (read back by the API),
    # each carrying the id of the API request that caused it.
    return RequestIdEventSink(FanOutEventSink(LoggingEventSink(), ledger.event_sink()))


def _demand_policy(settings: Settings) -> DemandPolicy:
    capacity = settings.capacity
    return DemandPolicy(
        capacity.target_load, capacity.demand_per_vcpu, capacity.demand_decay_seconds
    )


def _node_snapshot(
    ledger: Any, clock: Any, policy: DemandPolicy, settings: Settings
) -> NodeSnapshot:
    return NodeSnapshot(ledger, clock, policy.target_load, settings.capacity.snapshot_seconds)


def _placement_service(
    ledger: Any,
    clock: Any,
    events: Any,
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
        hard_claims=settings.claims.enforcement == "hard",
        seed=settings.capacity.ranking_seed,
    )


def _rotation_status(settings: Settings, cluster: Any, clock: Any) -> Any:
    from fleetgate.apps.controller.command import policy_source
    from fleetgate.apps.services.rotationstatus import RotationStatus
    from fleetgate.domain.rotation.machine import MachineConfig

    ctl = settings.controller
    config = MachineConfig(namespace=ctl.namespace)
    return RotationStatus(cluster, policy_source(ctl.policies, cluster), clock, config)


def _reconciler(
    ledger: Any, clock: Any, events: Any, registry: Any, settings: Settings
) -> Reconciler:
    metrics = ReconcilerMetrics(registry)
    return Reconciler(ledger, clock, events, metrics, settings.reconciler.interval_seconds)


def _node_sync(
    ledger: Any, cluster: Any, clock: Any, events: Any, policy: DemandPolicy, settings: Settings
) -> NodeSync:
    # Relocations walk with the same demand policy and seed as new placements.
    return NodeSync(ledger, cluster, clock, events, policy, Random(settings.capacity.ranking_seed))


def _cluster(pm: Any, settings: Settings, clock: Any) -> Any:
    options = dict(settings.cluster_options)
    if settings.cluster == "karpenter":
        # The controller's own settings are the Karpenter backend's defaults, so the namespace
        # the machine puts placeholders in is the one the gateway reads them (and the Lease) from.
        ctl = settings.controller
        options = {
            "namespace": ctl.namespace,
            "placeholder_image": ctl.placeholder_image,
            "priority_class": ctl.priority_class,
            **options,
        }
    return plugins.make_cluster(pm, settings.cluster, options, clock)


def _rotation_controller(
    settings: Settings, cluster: Any, clock: Any, events: Any, registry: Any
) -> Any:
    from fleetgate.apps.controller.command import build_controller

    return build_controller(settings, cluster, clock, events, registry)


class Container(containers.DeclarativeContainer):
    """Providers for everything fleetgate runs with. Override any of them in tests."""

    __self__ = providers.Self()

    settings = providers.Singleton(load_settings)
    plugin_manager = providers.Singleton(plugins.plugin_manager)
    clock = providers.Singleton(SystemClock)
    metrics_registry = providers.Singleton(CollectorRegistry)
    ledger = providers.Singleton(_ledger, pm=plugin_manager, settings=settings, clock=clock)
    cluster = providers.Singleton(_cluster, pm=plugin_manager, settings=settings, clock=clock)
    event_sink = providers.Singleton(LoggingEventSink)
    capacity_events = providers.Singleton(_capacity_events, ledger=ledger)
    demand_policy = providers.Singleton(_demand_policy, settings=settings)
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
    rotation_status = providers.Singleton(
        _rotation_status, settings=settings, cluster=cluster, clock=clock
    )
    token_store = providers.Singleton(_token_store, ledger=ledger)
    node_sync = providers.Singleton(
        _node_sync,
        ledger=ledger,
        cluster=cluster,
        clock=clock,
        events=capacity_events,
        policy=demand_policy,
        settings=settings,
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
    api_app = providers.Singleton(_api_app, container=__self__)
    rotation_controller = providers.Singleton(
        _rotation_controller,
        settings=settings,
        cluster=cluster,
        clock=clock,
        events=event_sink,
        registry=metrics_registry,
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
    return build_container(settings, clock=VirtualClock(start), **overrides)
