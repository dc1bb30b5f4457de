"""Configuration: ``FLEETGATE_*`` environment variables over an optional YAML file, validated.

Nested fields use ``__`` in environment variables: ``FLEETGATE_CAPACITY__TARGET_LOAD=0.8``.
The YAML file is named by ``FLEETGATE_CONFIG`` (or ``--config`` on the CLI); the environment wins.
"""

from __future__ import annotations

import difflib
import os
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import annotated_types
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.demand import DemandPolicy, demand_per_vcpu_problem
from fleetgate.domain.capacity.dimensions import Overcommit

# The capacity defaults are the domain's: the settings only read them.
_DEMAND = DemandPolicy()
_OVERCOMMIT = Overcommit()
DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./.fleetgate/fleetgate.db"
#: The schemes people paste (libpq, MySQL, SQLAlchemy without a driver) and the async driver
#: fleetgate uses for each.
PASTED_SCHEMES = {
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "mysql": "mysql+aiomysql",
    "mariadb": "mysql+aiomysql",
    "sqlite": "sqlite+aiosqlite",
}
_announced: set[str] = set()


def with_async_driver(url: str) -> str:
    """``url`` with a pasted scheme (``postgresql://``...) mapped to fleetgate's async driver."""
    scheme, sep, rest = url.partition("://")
    driver = PASTED_SCHEMES.get(scheme.lower()) if sep else None
    if driver is None:
        return url
    if scheme not in _announced:  # said once per process, however often settings are built
        _announced.add(scheme)
        print(f"fleetgate: database_url: reading {scheme}:// as {driver}://", file=sys.stderr)
    return f"{driver}://{rest}"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CapacitySettings(_Section):
    """Overcommit ratios and the demand spreader (capacity spec section 8)."""

    cpu_overcommit: float = Field(_OVERCOMMIT.cpu, gt=0)
    memory_overcommit: float = Field(_OVERCOMMIT.memory, gt=0)
    disk_overcommit: float = Field(_OVERCOMMIT.disk, gt=0)
    # 0 turns the spreader off; a negative target would refuse every node with any load.
    target_load: float = Field(_DEMAND.target_load, ge=0, allow_inf_nan=False)
    demand_per_vcpu: float = Field(_DEMAND.demand_per_vcpu, ge=0)
    demand_decay_seconds: float = Field(_DEMAND.decay_seconds, ge=0)
    ranking_seed: int | None = None
    # Placements rank a snapshot of the ledger's nodes read at most this often (spec 5.1 allows
    # 60 s of staleness; admission is guarded, so a stale order is safe). 0: read every request.
    snapshot_seconds: float = Field(1.0, ge=0, le=60)

    def demand_policy(self) -> DemandPolicy:
        """The domain's demand policy these settings configure (one per process)."""
        return DemandPolicy(self.target_load, self.demand_per_vcpu, self.demand_decay_seconds)

    @field_validator("demand_per_vcpu")
    @classmethod
    def _a_charge_or_none(cls, value: float) -> float:
        # The domain's rule, checked here too so the error names the setting.
        problem = demand_per_vcpu_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class DatabaseTimeoutSettings(_Section):
    """Bounds on every wait for the database, so a database that goes away is a quick 503."""

    # Below answer_seconds, so their own messages come first (docs/configuration.md).
    connect_seconds: float = Field(3.0, gt=0, le=3600, allow_inf_nan=False)
    pool_seconds: float = Field(3.0, gt=0, le=3600, allow_inf_nan=False)
    statement_seconds: float = Field(10.0, gt=0, le=3600, allow_inf_nan=False)
    # Each wait of a ledger transaction for the database's answer (a connection, a statement,
    # the COMMIT), on the client: a silent database is a 503 within it on every path.
    answer_seconds: float = Field(4.0, gt=0, le=3600, allow_inf_nan=False)


class DatabaseRetrySettings(_Section):
    """How often a transaction the database aborted to resolve a conflict is run again."""

    # On one server: this many tries in all, the backoff doubling from base_delay_ms.
    attempts: int = Field(4, ge=1, le=100)
    base_delay_ms: float = Field(5.0, gt=0, le=10_000, allow_inf_nan=False)
    # A multi-primary cluster (Galera, every node writing) aborts many more at certification:
    # auto retries by deadline once a server reports wsrep_on=ON; on/off force either budget.
    multi_primary: Literal["auto", "on", "off"] = "auto"
    multi_primary_deadline_seconds: float = Field(5.0, gt=0, le=300, allow_inf_nan=False)
    multi_primary_max_delay_ms: float = Field(250.0, gt=0, le=60_000, allow_inf_nan=False)
    # There, one writing transaction per process at a time: fewer certification aborts.
    multi_primary_serialize_writers: bool = True


#: More connections than any database server accepts from one process (MariaDB's default
#: ``max_connections`` is 151, PostgreSQL's 100): a larger pool is a typo, refused.
MAX_POOL_CONNECTIONS = 1000


class DatabasePoolSettings(_Section):
    """The connections each process keeps open to the database (a server database's pool)."""

    # Kept open and reused: enough for the API's concurrent requests (the group-commit writer,
    # the snapshot's read, replays, refusals' events), so a steady load opens no new sessions.
    size: int = Field(16, ge=1, le=MAX_POOL_CONNECTIONS)
    # Opened beyond ``size`` under a burst and closed again when returned.
    overflow: int = Field(16, ge=0, le=MAX_POOL_CONNECTIONS)


class ClaimSettings(_Section):
    """How a namespace's active claim binds its own placements."""

    enforcement: ClaimEnforcement = ClaimEnforcement.ADVISORY


class AdmissionSettings(_Section):
    """How the ledger runs admissions: group commit of concurrent ones (issue 18 item 4)."""

    # Admissions waiting at one moment share one transaction, up to this many (1: off). The
    # ledger's own default, repeated here because the apps never import an adapter.
    group_commit_max_batch: int = Field(32, ge=1)
    # How long the writer may hold a batch open for more (0: never adds latency to a request).
    group_commit_max_wait_ms: float = Field(0.0, ge=0, allow_inf_nan=False)


class ReconcilerSettings(_Section):
    """The capacity reconciler loop."""

    interval_seconds: float = Field(300.0, gt=0)
    # The loop serves its Prometheus series here (null: not served; --once never serves).
    metrics_host: str = "0.0.0.0"
    metrics_port: int | None = Field(8082, ge=0, le=65535)


class ApiSettings(_Section):
    """The HTTP API server."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    admin_token: str | None = None


class ControllerSettings(_Section):
    """The rotation controller."""

    namespace: str = "fleetgate-system"
    policies: list[Path] = Field(default_factory=list)
    placeholder_image: str = "registry.k8s.io/pause:3.10"
    priority_class: str = "fleetgate-placeholder"
    leader_election: bool = True
    endpoints_host: str = "0.0.0.0"  # probes and metrics must be reachable from outside the Pod
    metrics_port: int | None = Field(8080, ge=0, le=65535)
    probes_port: int | None = Field(8081, ge=0, le=65535)
    # The ledger follows the cluster after every round: nodes join when Ready, a node being
    # rotated is cordoned there too, and its placements are re-admitted elsewhere.
    sync_ledger: bool = False
    # With sync_ledger: judge each node's relocation plan before its drain begins (gate 9,
    # ledgerCapacity). Off, nodes drain whether or not their placements have room: a switch to
    # compare, or to step out of the way; the node sync still relocates what it can.
    ledger_gate_enabled: bool = True
    # With the gate: how long the room a drain's plan reserved in the ledger is held when no
    # move or end comes first (issue 41); then the reconciler hands it back.
    ledger_reservation_seconds: float = Field(900.0, gt=0)
    # Set at the migration guide's last step, once node-rotation-controller is uninstalled: the
    # controller then releases the markers that controller owned (docs/migrating-from-...).
    reference_controller_gone: bool = False
    # Also serve node-rotation-controller's noderotation_* series (same values, its names and
    # labels), so its alerts and dashboards keep working through and after the migration.
    nrc_metrics: bool = False


class Settings(BaseSettings):
    """Everything fleetgate can be configured with. Defaults run the embedded system."""

    model_config = SettingsConfigDict(
        env_prefix="FLEETGATE_", env_nested_delimiter="__", extra="forbid"
    )

    database_url: str = DEFAULT_DATABASE_URL
    database_session_variables: dict[str, str] = Field(default_factory=dict)
    database_timeouts: DatabaseTimeoutSettings = Field(default_factory=DatabaseTimeoutSettings)
    database_retry: DatabaseRetrySettings = Field(default_factory=DatabaseRetrySettings)
    database_pool: DatabasePoolSettings = Field(default_factory=DatabasePoolSettings)
    cluster: str = "fake"
    cluster_options: dict[str, Any] = Field(default_factory=dict)
    log_format: Literal["console", "json"] = "console"
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)
    claims: ClaimSettings = Field(default_factory=ClaimSettings)
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    reconciler: ReconcilerSettings = Field(default_factory=ReconcilerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        return with_async_driver(value)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Explicit values, then the environment, then the YAML file."""
        return (init_settings, env_settings, _YamlSource(settings_cls))

    def ledger_options(self) -> dict[str, Any]:
        """The plain values a ledger plugin needs."""
        return {
            "capacity": self.capacity.model_dump(),
            "claims": self.claims.model_dump(),
            "session_variables": dict(self.database_session_variables),
            "timeouts": self.database_timeouts.model_dump(),
            "retry": self.database_retry.model_dump(),
            "pool": self.database_pool.model_dump(),
            "group_commit": {
                "max_batch": self.admission.group_commit_max_batch,
                "max_wait_ms": self.admission.group_commit_max_wait_ms,
            },
        }


class _YamlSource(PydanticBaseSettingsSource):
    """Reads the file named by FLEETGATE_CONFIG, if any."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = os.environ.get("FLEETGATE_CONFIG")
        if not path:
            return {}
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"FLEETGATE_CONFIG: cannot read {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"FLEETGATE_CONFIG: {path} must hold a mapping")
        return data


class ConfigError(ValueError):
    """The configuration is invalid; the message names the field and the reason."""


def load_settings(**overrides: Any) -> Settings:
    """Build validated settings, turning pydantic's errors into one message naming each field.

    The admin token and the database password are registered for masking here, where every
    process's settings are made, so no log line or error message of the process shows them.
    """
    from fleetgate.apps.redaction import hide, hide_url_password

    warn_unknown_variables(os.environ)
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, os.environ)) from exc
    hide(settings.api.admin_token)
    hide_url_password(settings.database_url)
    return settings


def setting_variables() -> list[str]:
    """Every environment variable that sets a setting (``FLEETGATE_CAPACITY__TARGET_LOAD``...)."""
    names = []
    for name, field in Settings.model_fields.items():
        names.append(f"FLEETGATE_{name}".upper())  # a section may be given whole, as JSON
        section = field.annotation
        if isinstance(section, type) and issubclass(section, _Section):
            names += [f"FLEETGATE_{name}__{sub}".upper() for sub in section.model_fields]
    return names


def warn_unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """Warn on stderr of each ``FLEETGATE_*`` variable nothing reads (a typo is otherwise
    silently ignored), naming the closest one that is read; the warnings given. The rule is
    ``fleetgate.apps.variables``', which every command applies without loading this module."""
    from fleetgate.apps import variables

    return variables.warn_unknown_variables(environ)


def describe_validation_error(
    exc: ValidationError, environ: Mapping[str, str] | None = None
) -> str:
    """One line per error, naming the setting as the operator wrote it and why it is refused.

    A value read from ``environ`` is named by its variable (``FLEETGATE_CAPACITY__TARGET_LOAD``
    and the setting it sets); any other by its path (``capacity.target_load``, the YAML file's
    keys). A name that is no setting gets the closest one; a number out of its type or range
    gets the range (``a whole number from 1 to 1000``), not pydantic's wording.
    """
    lines = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        path = ".".join(loc) or "(root)"
        variable = _variable_for(loc, environ or {})
        where = f"{variable} ({path})" if variable else path
        lines.append(f"{where}: {_reason(err, loc, variable)}")
    return "\n".join(lines)


def _variable_for(loc: tuple[str, ...], environ: Mapping[str, str]) -> str | None:
    """The ``FLEETGATE_*`` variable (as spelt in ``environ``) that gave the value at ``loc``:
    the nested one (``FLEETGATE_A__B``) or its section's whole-JSON one (``FLEETGATE_A``)."""
    by_upper = {name.upper(): name for name in environ}
    for depth in range(len(loc), 0, -1):
        wanted = "FLEETGATE_" + "__".join(loc[:depth]).upper()
        if wanted in by_upper:
            return by_upper[wanted]
    return None


_NUMBER_ERRORS = frozenset(
    {
        "int_parsing",
        "int_parsing_size",
        "int_type",
        "int_from_float",
        "float_parsing",
        "float_type",
        "finite_number",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
    }
)


def _reason(err: Any, loc: tuple[str, ...], variable: str | None) -> str:
    if err["type"] == "extra_forbidden":
        return f"not a setting{_closest(loc, variable)}"
    field = _field_at(loc)
    if err["type"] in _NUMBER_ERRORS and field is not None:
        rule = _number_rule(field, finite=err["type"] == "finite_number")
        return f"must be {rule}, got {err['input']!r}"
    return str(err["msg"])


def _closest(loc: tuple[str, ...], variable: str | None) -> str:
    """``; did you mean <the closest setting>?`` for an unknown name at ``loc``, as written."""
    parent = _section_at(loc[:-1])
    if parent is None or not loc:
        return ""
    close = difflib.get_close_matches(loc[-1].lower(), list(parent.model_fields), n=1, cutoff=0.6)
    if not close:
        return ""
    path = (*loc[:-1], close[0])
    named = "FLEETGATE_" + "__".join(path).upper() if variable else ".".join(path)
    return f"; did you mean {named}?"


def _section_at(loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The model whose fields live at ``loc`` (``()`` is Settings itself)."""
    model: type[BaseModel] = Settings
    for part in loc:
        field = model.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _field_at(loc: tuple[str, ...]) -> Any:
    parent = _section_at(loc[:-1]) if loc else None
    return parent.model_fields.get(loc[-1]) if parent is not None else None


def _number_rule(field: Any, finite: bool = False) -> str:
    """``a whole number from 1 to 1000``, ``a number of more than 0``: the field's type and
    bounds, read from its declaration (the one definition of the rule)."""
    args = typing.get_args(field.annotation) or (field.annotation,)
    kind = "a whole number" if int in args and float not in args else "a number"
    kind = kind.replace("a ", "a finite ", 1) if finite else kind
    low = high = ""
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge):
            low = f"{bound.ge:g}"
        elif isinstance(bound, annotated_types.Gt):
            low = f"more than {bound.gt:g}"
        elif isinstance(bound, annotated_types.Le):
            high = f"{bound.le:g}"
        elif isinstance(bound, annotated_types.Lt):
            high = f"less than {bound.lt:g}"
    if low and high and low[0].isdigit() and high[0].isdigit():
        rule = f" from {low} to {high}"
    else:
        parts = [f"at least {low}" if low[:1].isdigit() else low]
        parts.append(f"at most {high}" if high[:1].isdigit() else high)
        rule = " of " + " and ".join(p for p in parts if p) if any(parts) else ""
    optional = " (or null)" if type(None) in args else ""
    return f"{kind}{rule}{optional}"
