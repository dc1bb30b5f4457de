"""The ``FLEETGATE_*`` environment variables fleetgate reads, and the warning for one it does not.

Every command warns of a misspelt variable (``FLEETGATE_TOKN``: did you mean
``FLEETGATE_TOKEN``?), the client commands and ``check`` included, which must start without
pydantic (docs/performance.md, CLI start-up). So the names of the settings' variables are a
constant here rather than read from the settings model; ``tests/apps/test_variables.py`` holds
the constant equal to the model (``settings.setting_variables()``) and prints the new one when a
setting is added or renamed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

#: Every variable that sets a setting (a section may also be given whole, as JSON).
SETTING_VARIABLES: tuple[str, ...] = (
    "FLEETGATE_DATABASE_URL",
    "FLEETGATE_DATABASE_SESSION_VARIABLES",
    "FLEETGATE_DATABASE_TIMEOUTS",
    "FLEETGATE_DATABASE_TIMEOUTS__CONNECT_SECONDS",
    "FLEETGATE_DATABASE_TIMEOUTS__POOL_SECONDS",
    "FLEETGATE_DATABASE_TIMEOUTS__STATEMENT_SECONDS",
    "FLEETGATE_DATABASE_TIMEOUTS__ANSWER_SECONDS",
    "FLEETGATE_DATABASE_RETRY",
    "FLEETGATE_DATABASE_RETRY__ATTEMPTS",
    "FLEETGATE_DATABASE_RETRY__BASE_DELAY_MS",
    "FLEETGATE_DATABASE_RETRY__MULTI_PRIMARY",
    "FLEETGATE_DATABASE_RETRY__MULTI_PRIMARY_DEADLINE_SECONDS",
    "FLEETGATE_DATABASE_RETRY__MULTI_PRIMARY_MAX_DELAY_MS",
    "FLEETGATE_DATABASE_RETRY__MULTI_PRIMARY_SERIALIZE_WRITERS",
    "FLEETGATE_DATABASE_POOL",
    "FLEETGATE_DATABASE_POOL__SIZE",
    "FLEETGATE_DATABASE_POOL__OVERFLOW",
    "FLEETGATE_CLUSTER",
    "FLEETGATE_CLUSTER_OPTIONS",
    "FLEETGATE_LOG_FORMAT",
    "FLEETGATE_CAPACITY",
    "FLEETGATE_CAPACITY__CPU_OVERCOMMIT",
    "FLEETGATE_CAPACITY__MEMORY_OVERCOMMIT",
    "FLEETGATE_CAPACITY__DISK_OVERCOMMIT",
    "FLEETGATE_CAPACITY__TARGET_LOAD",
    "FLEETGATE_CAPACITY__DEMAND_PER_VCPU",
    "FLEETGATE_CAPACITY__DEMAND_DECAY_SECONDS",
    "FLEETGATE_CAPACITY__RANKING_SEED",
    "FLEETGATE_CAPACITY__SNAPSHOT_SECONDS",
    "FLEETGATE_CLAIMS",
    "FLEETGATE_CLAIMS__ENFORCEMENT",
    "FLEETGATE_ADMISSION",
    "FLEETGATE_ADMISSION__GROUP_COMMIT_MAX_BATCH",
    "FLEETGATE_ADMISSION__GROUP_COMMIT_MAX_WAIT_MS",
    "FLEETGATE_RECONCILER",
    "FLEETGATE_RECONCILER__INTERVAL_SECONDS",
    "FLEETGATE_RECONCILER__METRICS_HOST",
    "FLEETGATE_RECONCILER__METRICS_PORT",
    "FLEETGATE_API",
    "FLEETGATE_API__HOST",
    "FLEETGATE_API__PORT",
    "FLEETGATE_API__ADMIN_TOKEN",
    "FLEETGATE_CONTROLLER",
    "FLEETGATE_CONTROLLER__NAMESPACE",
    "FLEETGATE_CONTROLLER__POLICIES",
    "FLEETGATE_CONTROLLER__PLACEHOLDER_IMAGE",
    "FLEETGATE_CONTROLLER__PRIORITY_CLASS",
    "FLEETGATE_CONTROLLER__LEADER_ELECTION",
    "FLEETGATE_CONTROLLER__ENDPOINTS_HOST",
    "FLEETGATE_CONTROLLER__METRICS_PORT",
    "FLEETGATE_CONTROLLER__PROBES_PORT",
    "FLEETGATE_CONTROLLER__SYNC_LEDGER",
    "FLEETGATE_CONTROLLER__LEDGER_GATE_ENABLED",
    "FLEETGATE_CONTROLLER__LEDGER_RESERVATION_SECONDS",
    "FLEETGATE_CONTROLLER__REFERENCE_CONTROLLER_GONE",
    "FLEETGATE_CONTROLLER__NRC_METRICS",
)
#: ``FLEETGATE_*`` variables that are not settings: read elsewhere, by the CLI and the plugins.
NOT_SETTINGS = frozenset(
    {"FLEETGATE_CONFIG", "FLEETGATE_PLUGINS", "FLEETGATE_SERVER", "FLEETGATE_TOKEN"}
)
_warned: set[str] = set()


def unknown_variable_warnings(environ: Mapping[str, str]) -> list[str]:
    """The warning for each ``FLEETGATE_*`` variable of ``environ`` that nothing reads, naming
    the closest variable that is read (a setting's, or the client's own)."""
    read = {*SETTING_VARIABLES, *NOT_SETTINGS}
    warnings = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith("FLEETGATE_") or upper in read:
            continue
        if upper.startswith("FLEETGATE_TEST_"):  # the test suite's own variables
            continue
        import difflib  # only for a variable nothing reads

        close = difflib.get_close_matches(upper, sorted(read), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        # A known section's unknown member is refused where the settings are read (a server
        # command's error names it too); a command that reads no settings only says so here.
        nested = upper.partition("__")[0] in read
        fate = "" if nested else " and is ignored"
        warnings.append(f"fleetgate: warning: {name} is not a setting{fate}{hint}")
    return warnings


def settings_given(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` sets any setting (so that a command which reads none of them in this
    run still has them validated: a bad value is refused by every command, not only by those
    that happen to read it)."""
    return any(
        name.upper() in SETTING_VARIABLES or name.upper().partition("__")[0] in SETTING_VARIABLES
        for name in environ
    )


def warn_unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """Print on stderr each warning of :func:`unknown_variable_warnings` (once per process,
    however often a command asks); the warnings given."""
    warnings = unknown_variable_warnings(environ)
    for warning in warnings:
        if warning not in _warned:
            _warned.add(warning)
            print(warning, file=sys.stderr)
    return warnings
