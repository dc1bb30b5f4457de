"""The configuration reference, ``docs/configuration.md``, generated from the settings model.

Every setting is listed with its YAML path, its environment variable, its default and the values
it accepts (bounds and choices read from the model itself), so the page cannot drift from the
code: a test regenerates it and compares. Regenerate after changing ``settings.py``::

    python -m fleetgate.apps.configdoc > docs/configuration.md
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Iterator
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from fleetgate.apps.settings import Settings

ENV_PREFIX = "FLEETGATE_"

#: What each setting means, by YAML path. A setting missing here fails the reference's test.
DESCRIPTIONS: dict[str, str] = {
    "database_url": "SQLAlchemy async URL of the ledger (SQLite, MariaDB/MySQL or PostgreSQL).",
    "database_session_variables": "Session variables set on every database connection.",
    "database_timeouts.connect_seconds": "Longest wait to open a database connection, per host "
    "(then 503 `unavailable`); below `answer_seconds`, so a dead first host leaves the next one "
    "its whole bound.",
    "database_timeouts.pool_seconds": "Longest wait for a free pooled connection (then 503 `no "
    "free database connection`: a busy database, not a lost one); below `answer_seconds`.",
    "database_timeouts.statement_seconds": "Longest one statement may run on the server "
    "(MariaDB's `max_statement_time`; PostgreSQL's client-side `command_timeout`, which also "
    "bounds migrations); then 503.",
    "database_timeouts.answer_seconds": "Longest a ledger transaction waits for any one answer "
    "of the database (a connection, a statement's result, the COMMIT), counted afresh at each, on "
    "the client: a database that falls silent is a 503 naming the wait within it, logged once "
    "as a WARNING (and its return as INFO). Not on SQLite (a local file; its busy timeout).",
    "database_retry.attempts": "Tries in all of a transaction the database aborted for a "
    "conflict (deadlock, serialization failure), on one server; then 503.",
    "database_retry.base_delay_ms": "First backoff between those tries; it doubles, jittered.",
    "database_retry.multi_primary": "`auto`: retry by deadline instead once the server reports "
    "`wsrep_on=ON` (a Galera node, [HA guide](high-availability.md)); `on`/`off` force it.",
    "database_retry.multi_primary_deadline_seconds": "On a multi-primary cluster, how long an "
    "aborted transaction is run again before 503.",
    "database_retry.multi_primary_max_delay_ms": "Cap of the backoff between those tries.",
    "database_retry.multi_primary_serialize_writers": "On a multi-primary cluster, one writing "
    "transaction per process at a time (others join the next group-commit batch): fewer "
    "certification aborts.",
    "cluster": "The cluster plugin: `fake` (in-memory) or `karpenter`.",
    "cluster_options": "Options handed to the cluster plugin as they are.",
    "log_format": "Log lines as coloured `console` text or one `json` object per line.",
    "capacity.cpu_overcommit": "A node's vCPU limit per hardware thread.",
    "capacity.memory_overcommit": "A node's memory limit per MB it has.",
    "capacity.disk_overcommit": "A node's disk limit per GB it has.",
    "capacity.target_load": "The demand spreader's target load per schedulable thread (0: off).",
    "capacity.demand_per_vcpu": "Expected load one admitted vCPU adds to its node.",
    "capacity.demand_decay_seconds": "Time for a placement's demand charge to decay to zero.",
    "capacity.ranking_seed": "Seed of the candidate ranking's random draw (unset: random).",
    "capacity.snapshot_seconds": "Longest age of the node snapshot placements rank (0: none).",
    "database_pool.size": "Database connections each process keeps open and reuses.",
    "database_pool.overflow": "Connections opened beyond `size` under a burst, closed after.",
    "claims.enforcement": "`advisory`: a claim reports overage; `hard`: it refuses it (403).",
    "admission.group_commit_max_batch": (
        "Most concurrent admissions committed in one transaction (1: group commit off)."
    ),
    "admission.group_commit_max_wait_ms": (
        "Longest wait for more admissions to join a batch (0: a lone request never waits)."
    ),
    "reconciler.interval_seconds": "Seconds between reconcile passes.",
    "reconciler.metrics_host": "Address the reconciler serves `/metrics` on.",
    "reconciler.metrics_port": "Port of the reconciler's `/metrics` (null: not served).",
    "api.host": "Address `fleetgate api` listens on.",
    "api.port": "Port `fleetgate api` listens on.",
    "api.admin_token": "The admin bearer token (unset: one is generated per run and printed).",
    "controller.namespace": "Namespace of the placeholders and the leader-election Lease.",
    "controller.policies": "RotationPolicy manifest files (without a CRD in the cluster).",
    "controller.placeholder_image": "Image of the surge placeholder Pods.",
    "controller.priority_class": "PriorityClass of the surge placeholder Pods.",
    "controller.leader_election": "Act only while holding the Lease (for several replicas).",
    "controller.endpoints_host": "Address the controller's metrics and probes listen on.",
    "controller.metrics_port": "Port of the controller's `/metrics` (null: not served).",
    "controller.probes_port": "Port of `/healthz` and `/readyz` (null: not served).",
    "controller.sync_ledger": "Follow the cluster into the capacity ledger after every round.",
    "controller.ledger_gate_enabled": "With `sync_ledger`: never begin a drain whose ledger "
    "placements would not all find room (gate `ledgerCapacity`, [rotation.md](rotation.md#the-"
    "ledger-gate-ledgercapacity)); `false` drains regardless, to compare or step out of the way.",
    "controller.ledger_reservation_seconds": (
        "With the ledger gate: seconds the destination room a drain's plan reserved in the "
        "ledger is held when no move comes first; then the reconciler hands it back "
        "([rotation.md](rotation.md#the-ledger-gate-ledgercapacity))."
    ),
    "controller.reference_controller_gone": (
        "node-rotation-controller is uninstalled: release the markers it left (migration step 5)."
    ),
    "controller.nrc_metrics": (
        "Also serve node-rotation-controller's `noderotation_*` series (its names and labels, "
        "fleetgate's values) on the controller's `/metrics`, so its alerts and dashboards keep "
        "working ([migration guide](migrating-from-node-rotation-controller.md#metrics))."
    ),
}

_BOUNDS = (
    (annotated_types.Gt, ">", "gt"),
    (annotated_types.Ge, ">=", "ge"),
    (annotated_types.Lt, "<", "lt"),
    (annotated_types.Le, "<=", "le"),
)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "string"
    if origin in (types.UnionType, typing.Union):
        parts = [a for a in typing.get_args(annotation) if a is not type(None)]
        name = " or ".join(_type_name(a) for a in parts)
        return f"{name} or null"
    if origin is not None:
        return getattr(origin, "__name__", str(origin)).replace("dict", "mapping")
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "string"  # an enum setting is written as one of its values
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _accepts(info: FieldInfo) -> str:
    """The values a field accepts: its choices, or its bounds (``> 0``, ``0 to 65535``)."""
    annotation = info.annotation
    choices = [
        a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal
    ] or ([annotation] if typing.get_origin(annotation) is typing.Literal else [])
    if choices:
        values = [v for c in choices for v in typing.get_args(c)]
        return ", ".join(f"`{v}`" for v in values)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return ", ".join(f"`{member.value}`" for member in annotation)
    bounds: dict[str, float] = {}
    for meta in info.metadata:
        for kind, _, name in _BOUNDS:
            if isinstance(meta, kind):
                bounds[name] = getattr(meta, name)
    if "ge" in bounds and "le" in bounds:
        return f"{bounds['ge']:g} to {bounds['le']:g}"
    shown = [f"{sign} {bounds[name]:g}" for _, sign, name in _BOUNDS if name in bounds]
    return ", ".join(shown) or "any"


def _default(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        value = value.model_dump()
    return f"`{json.dumps(value, default=str)}`"


def settings_rows(
    model: type[BaseModel] = Settings, prefix: str = ""
) -> Iterator[tuple[str, FieldInfo]]:
    """Every leaf setting as ``(yaml path, field)``, sections expanded, in declaration order."""
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from settings_rows(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def env_var(path: str) -> str:
    """The environment variable of a YAML path: ``capacity.target_load`` is
    ``FLEETGATE_CAPACITY__TARGET_LOAD``."""
    return ENV_PREFIX + path.replace(".", "__").upper()


def render() -> str:
    """The whole ``docs/configuration.md``."""
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m fleetgate.apps.configdoc > docs/configuration.md`;"
        " a test checks it is current. -->",
        "",
        "fleetgate reads its settings from `FLEETGATE_*` environment variables over an optional"
        " YAML file",
        "(`FLEETGATE_CONFIG` or `fleetgate --config FILE`); the environment wins. In YAML a"
        " setting is nested",
        "by its path (`capacity: {target_load: 0.8}`); in the environment the path's dots become"
        " `__`.",
        "Mappings and lists are given as JSON in the environment. An invalid value stops the"
        " process with",
        "exit code 2 and one line per problem naming the variable as written and the setting, with"
        " the",
        "rule (`FLEETGATE_DATABASE_POOL__SIZE (database_pool.size): must be a whole number from 1"
        " to 1000,",
        "got '1e26'`); a misspelt name inside a section gets the closest setting"
        " (`FLEETGATE_CAPACITY__TARGT_LOAD",
        "(capacity.targt_load): not a setting; did you mean FLEETGATE_CAPACITY__TARGET_LOAD?`)."
        " Every",
        "command that reads a setting validates it: `fleetgate check --ledger`/`--ledger-snapshot`"
        " reads the",
        "`capacity` ones. A `FLEETGATE_*` variable that is no setting (a typo)",
        "is ignored with a warning on stderr naming the closest setting:"
        " `fleetgate: warning: FLEETGATE_DATABSE_URL",
        "is not a setting and is ignored; did you mean FLEETGATE_DATABASE_URL?`"
        " (`FLEETGATE_CONFIG`,",
        "`FLEETGATE_PLUGINS`, `FLEETGATE_SERVER` and `FLEETGATE_TOKEN` are read elsewhere).",
        "",
        "| setting | environment variable | type | default | accepts | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for path, info in settings_rows():
        lines.append(
            f"| `{path}` | `{env_var(path)}` | {_type_name(info.annotation)} | {_default(info)} "
            f"| {_accepts(info)} | {DESCRIPTIONS.get(path, '')} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the regeneration command in the docstring
    print(render(), end="")
