"""The hooks a fleetgate plugin may implement. Each docstring is the hook's contract.

Built-in adapters implement exactly these hooks and register through the same ``fleetgate``
entry-point group a third-party distribution would use.
"""

from __future__ import annotations

from typing import Any

import pluggy

from fleetgate.domain.capacity.demand import DemandPolicy
from fleetgate.domain.ports import CapacityLedger, Clock, ClusterGateway

hookspec = pluggy.HookspecMarker("fleetgate")

# --- capacity ledger backends ----------------------------------------------------------------


@hookspec
def fleetgate_ledger_schemes() -> list[str]:
    """Return the SQLAlchemy URL schemes this plugin serves (e.g. ``["sqlite+aiosqlite"]``).

    Called on every plugin; used to list the choices in an error message. Must not do I/O.
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def fleetgate_make_ledger(
    url: str, options: dict[str, Any], clock: Clock | None, demand: DemandPolicy
) -> CapacityLedger | None:
    """Return a ``CapacityLedger`` for ``url`` if this plugin serves its scheme, else ``None``.

    Stops at the first non-None result. ``options`` carries the capacity and claims settings as
    plain values. ``clock`` is the composition root's ``Clock`` (``None``: the wall clock); the
    ledger stamps every row with it. ``demand`` is the process's one ``DemandPolicy`` (the one the
    placement services walk with): the ledger decays and credits demand by it, never by a policy
    of its own. Must not connect yet: connecting happens in ``start()``.
    """
    raise NotImplementedError


# --- cluster backends ------------------------------------------------------------------------


@hookspec
def fleetgate_cluster_names() -> list[str]:
    """Return the cluster backend names this plugin serves (e.g. ``["fake"]``). No I/O."""
    raise NotImplementedError


@hookspec(firstresult=True)
def fleetgate_make_cluster(
    name: str, options: dict[str, Any], clock: Clock | None, namespace: str
) -> ClusterGateway | None:
    """Return a ``ClusterGateway`` for backend ``name`` if this plugin serves it, else ``None``.

    Stops at the first non-None result. ``clock`` is the composition root's ``Clock``: a backend
    that simulates time must read it instead of the wall clock. ``namespace`` is the controller's
    (its placeholders, Lease and Events live there): a backend with namespaces uses it unless
    ``options`` names another; one without ignores it. Must not connect yet.
    """
    raise NotImplementedError
