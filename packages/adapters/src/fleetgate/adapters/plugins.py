"""The plugin manager: loads every ``fleetgate`` entry point and picks adapters by configuration."""

from __future__ import annotations

import os
from typing import Any

import pluggy

from fleetgate.adapters import hookspecs
from fleetgate.adapters.urlredaction import redact_urls as redact_urls
from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.ports import CapacityLedger, Clock, ClusterGateway
from fleetgate.domain.rotation.context import MachineConfig

ENTRY_POINT_GROUP = "fleetgate"
hookimpl = pluggy.HookimplMarker("fleetgate")


class PluginNotFound(LookupError):
    """No installed plugin serves the requested database scheme or cluster name."""


def plugin_manager(allow: set[str] | None = None) -> pluggy.PluginManager:
    """Build a manager with the hookspecs and every installed ``fleetgate`` entry point.

    ``allow`` (or ``FLEETGATE_PLUGINS``, comma separated) restricts loading to the named entry
    points, so a test or an operator can exclude a stray installed plugin.
    """
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    env = os.environ.get("FLEETGATE_PLUGINS")
    if allow is None and env:
        allow = {name.strip() for name in env.split(",") if name.strip()}
    if allow is None:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    else:
        for name in sorted(allow):
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
    return pm


def redact_url(url: str) -> str:
    """``url`` as it may be shown: the password replaced by ``***`` (SQLAlchemy's rendering)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # not a URL SQLAlchemy reads: mask it textually
        return redact_urls(url)


def scheme_of(url: str) -> str:
    """Return a database URL's scheme: ``sqlite+aiosqlite:///x.db`` -> ``sqlite+aiosqlite``."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        scheme, sep, _ = url.partition(":")
    if not sep or not scheme:
        raise PluginNotFound(
            f"database_url: {redact_urls(url)!r} is not a URL (expected scheme://...)"
        )
    return scheme


def make_ledger(
    pm: pluggy.PluginManager,
    url: str,
    options: dict[str, Any],
    clock: Clock | None = None,
    demand: DemandPolicy | None = None,
) -> CapacityLedger:
    """Ask the plugins for the ledger that serves ``url``; fail naming the known schemes.

    ``demand`` is the process's demand policy (``None``: the domain's defaults).
    """
    scheme_of(url)
    ledger: CapacityLedger | None = pm.hook.fleetgate_make_ledger(
        url=url, options=options, clock=clock, demand=demand or DemandPolicy()
    )
    if ledger is None:
        known = sorted({s for group in pm.hook.fleetgate_ledger_schemes() for s in group})
        raise PluginNotFound(
            f"database_url: no installed plugin serves scheme {scheme_of(url)!r}; known: "
            + ", ".join(known)
        )
    return ledger


def make_cluster(
    pm: pluggy.PluginManager,
    name: str,
    options: dict[str, Any],
    clock: Clock | None,
    namespace: str = MachineConfig.namespace,
) -> ClusterGateway:
    """Ask the plugins for the cluster backend ``name``; fail naming the known backends."""
    cluster: ClusterGateway | None = pm.hook.fleetgate_make_cluster(
        name=name, options=options, clock=clock, namespace=namespace
    )
    if cluster is None:
        known = sorted({n for group in pm.hook.fleetgate_cluster_names() for n in group})
        raise PluginNotFound(
            f"cluster: no installed plugin serves {name!r}; known: " + ", ".join(known)
        )
    return cluster
