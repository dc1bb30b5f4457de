"""The admission as one PostgreSQL function: one round trip instead of five statements.

The function's SQL is generated, not written: each of its guarded UPDATEs is the statement
``prepared`` sends on the in-process path (so its ``WHERE`` is ``compile.where`` of the domain's
guard, the one the property tests hold equal to the domain), compiled for PostgreSQL with the
placeholders renamed to the function's arguments. Its order is the canonical one: the claim (or the
cluster's unclaimed sums, then the check that no claim committed meanwhile), the node, the placement
row. It never explains a refusal: it stops at the first guard that refused and returns that row,
locked, so the domain evaluates the guard on it with no second read (the same verdict
``guarded.charge`` reaches). Before it answers a refusal or an unknown node it looks for an earlier
placement of the request id (``DUPLICATE`` if there is one), so the caller needs no read of its own
to tell a retry from a new request; the admitted path never looks. Whatever the function does not
finish (an advisory claim that goes over its limit, a row that admits under the lock after all) the
caller finishes in Python, in the same transaction or a fresh one; nothing is ever committed half
done, since the function runs inside the caller's transaction.

Alembic installs it (revision 0003; 0005 reinstalls it); its comment holds the digest of its text,
and the ledger uses it only when the installed digest is this code's (``installed``): a guard
changed without a migration that reinstalls the function falls back to the in-process path instead
of admitting by a stale rule."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from functools import cache
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from fleetgate.adapters.sql import prepared
from fleetgate.adapters.sql.admission import (
    ChargedClaim,
    ClaimAppeared,
    Duplicate,
    NodeGone,
    Recheck,
    Refused,
    after_claim,
    charged_claim,
    lock_held,
    record,
)
from fleetgate.adapters.sql.postgres import stored_functions
from fleetgate.adapters.sql.rows import guard_row
from fleetgate.adapters.sql.schema import CLUSTER_ID, claims, cluster, nodes, placements
from fleetgate.domain.capacity.claims import ClaimEnforcement, claim_charge
from fleetgate.domain.capacity.denials import deny
from fleetgate.domain.capacity.dimensions import ALLOCATION, Resources
from fleetgate.domain.capacity.errors import LedgerError
from fleetgate.domain.capacity.guards import (
    CLAIM_GUARD,
    CLUSTER_GUARD,
    NODE_GUARD,
    NODE_GUARD_WAIVED,
    Guard,
    node_guard,
)
from fleetgate.domain.capacity.model import Admission, AdmitRequest
from fleetgate.domain.ports import Audit

NAME: Final = "fleetgate_admit"
#: The function's arguments, in order, with their PostgreSQL types.
ARGUMENTS: Final = (
    ("p_namespace", "text"),
    ("p_node", "text"),
    ("p_cpus", "bigint"),
    ("p_memory_mb", "bigint"),
    ("p_disk_gb", "bigint"),
    ("p_demand", "double precision"),
    ("p_target_load", "double precision"),
    ("p_demand_clause", "boolean"),
    ("p_hard", "boolean"),
    ("p_now", "double precision"),
    ("p_id", "text"),
    ("p_request_id", "text"),
)
SIGNATURE: Final = f"{NAME}({', '.join(t for _, t in ARGUMENTS)})"

#: What the function reports in its ``outcome`` column.
ADMITTED: Final = "admitted"
CLAIM_OVER: Final = "claim_over"  # an advisory claim charged past its limit: the caller goes on
CLAIM_APPEARED: Final = "claim_appeared"
NO_CLUSTER: Final = "no_cluster"
NO_NODE: Final = "no_node"
#: A refusal, by the stage whose guard refused it.
REFUSED: Final = {"claim": "refused_claim", "cluster": "refused_cluster", "node": "refused_node"}
#: Refused (or its node gone), but the request id already has a placement: the caller reads it
#: and answers the replay, as when the placement row's UNIQUE key finds the repeat.
DUPLICATE: Final = "duplicate"
#: The outcomes the function returns only after it looked for an earlier placement of the
#: request id and found none: the caller answers them with no read of its own.
REPEAT_CHECKED: Final = frozenset({NO_NODE, *REFUSED.values()})

_PG = postgresql.dialect(paramstyle="named")  # type: ignore[no-untyped-call]
_SIZE = Resources(1, 1, 1)
_PARAMS = {**_SIZE.as_dict(), "demand": 0.5, "target_load": 0.5}
#: Each placeholder of the in-process statements, as the function's argument it binds.
_ARGUMENT_OF: Final = {
    "k_active_namespace": "p_namespace",
    "k_expires_at": "p_now",
    "k_name": "p_node",
    "k_namespace": "p_namespace",
    "k_request_id": "p_request_id",
    "k_now": "p_now",
    "k_id": str(CLUSTER_ID),
    "g_demand": "p_demand",
    "g_target_load": "p_target_load",
    "s_expected_demand": "p_demand",
    "s_updated_at": "p_now",
    **{f"g_{d}": f"p_{d}" for d in ALLOCATION},
    **{f"s_used_{d}": f"p_{d}" for d in ALLOCATION},
    **{f"s_unclaimed_used_{d}": f"p_{d}" for d in ALLOCATION},
}
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def _sql(statement: sa.ClauseElement) -> str:
    """``statement`` as PostgreSQL text over the function's arguments (constants inlined)."""
    compiled = statement.compile(dialect=_PG)
    assert isinstance(compiled, SQLCompiler)

    def argument(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in _ARGUMENT_OF:
            return _ARGUMENT_OF[name]
        value = compiled.binds[name].value  # a constant of the guard, e.g. an unknown load's 0
        if not isinstance(value, int | float) or isinstance(value, bool):  # pragma: no cover
            raise TypeError(f"{name}: a guard constant must be a number, got {value!r}")
        return repr(value)

    return _PLACEHOLDER.sub(argument, compiled.string)


def _charge(
    table: sa.Table, keys: prepared.Keys, guard: Guard | None, prefix: str, demand: bool = False
) -> str:
    sets = prepared.charge_sets(prefix, _SIZE, 0.0, demand=0.5 if demand else None)
    statement, _ = prepared.guarded_update(table, keys, guard, _PARAMS, sets, returning=True)
    return _sql(statement)


def _touch(table: sa.Table, keys: prepared.Keys) -> str:
    statement, _ = prepared.touch(table, keys)
    return _sql(statement.returning(*table.c))


#: Whether the request id already has a placement (the UNIQUE key's columns: one index probe).
_EARLIER: Final = sa.select(placements.c.id).where(
    placements.c.namespace == sa.bindparam("k_namespace"),
    placements.c.request_id == sa.bindparam("k_request_id"),
)


def _stop(outcome: str, refused: str = "NULL", claim: str = "NULL") -> str:
    answer = f"RETURN QUERY SELECT '{outcome}'::text, {claim}::text, {refused}::json, NULL::json;"
    if outcome not in REPEAT_CHECKED:
        return answer
    # Before a refusal (never on the admission path): a retry whose first attempt was admitted
    # gets its placement, not the refusal. At READ COMMITTED this statement sees every placement
    # committed before it started, so it finds what the caller's own read after the refusal
    # used to find; the caller no longer sends that read.
    earlier = _sql(_EARLIER).replace("SELECT", "PERFORM", 1)
    return (
        f"IF p_request_id IS NOT NULL THEN {earlier}; "
        f"IF FOUND THEN {_stop(DUPLICATE)} RETURN; END IF; END IF; {answer}"
    )


def _refused(table: sa.Table, keys: prepared.Keys, stage: str, missing: str) -> str:
    """After a guarded UPDATE matched nothing: return the row, locked, or that there is none."""
    return (
        f"{_touch(table, keys)} INTO v_row; "
        f"IF NOT FOUND THEN {_stop(missing)} RETURN; END IF; "
        f"{_stop(REFUSED[stage], 'row_to_json(v_row)')} RETURN;"
    )


#: The result columns (prefixed: in PL/pgSQL they are variables, and must not shadow a column).
_RESULT: Final = ("fg_outcome", "fg_claim_id", "fg_refused", "fg_node")


@cache
def definition() -> str:
    """``CREATE OR REPLACE FUNCTION fleetgate_admit …``, generated from the guards."""
    claim_key = {("active_namespace", "eq"): "", ("expires_at", "gt"): 0.0}
    cluster_key = {("id", "eq"): CLUSTER_ID}
    node_key = {("name", "eq"): ""}
    columns = ", ".join(c.name for c in placements.c)
    values = ", ".join(
        {"admitted_at": "p_now", "claim_id": "v_claim_id", "id": "p_id"}.get(c.name, f"p_{c.name}")
        for c in placements.c
    )
    claim_now = _sql(prepared.CLAIM_NOW)
    body = f"""
#variable_conflict use_column
DECLARE
  v_claim_id text;
  v_row record;
  v_node record;
BEGIN
  -- 1. The namespace side: the active claim within its limit (hard and advisory alike) ...
  {_charge(claims, claim_key, CLAIM_GUARD, "used_")} INTO v_row;
  IF FOUND THEN
    v_claim_id := v_row.id;
  ELSIF p_hard THEN
    {_touch(claims, claim_key)} INTO v_row;
    IF FOUND THEN
      {_stop(REFUSED["claim"], "row_to_json(v_row)")}
      RETURN;
    END IF;
  ELSE
    -- ... an advisory claim past its limit: charged, the overage is the caller's to charge.
    {_charge(claims, claim_key, None, "used_")} INTO v_row;
    IF FOUND THEN
      {_stop(CLAIM_OVER, "row_to_json(v_row)", "v_row.id")}
      RETURN;
    END IF;
  END IF;
  IF v_claim_id IS NULL THEN
    -- ... or, with no active claim, the cluster's unclaimed sums.
    {_charge(cluster, cluster_key, CLUSTER_GUARD, "unclaimed_used_")} INTO v_row;
    IF NOT FOUND THEN
      {_refused(cluster, cluster_key, "cluster", NO_CLUSTER)}
    END IF;
    {claim_now.replace("SELECT", "PERFORM", 1)};
    IF FOUND THEN
      {_stop(CLAIM_APPEARED)}
      RETURN;
    END IF;
  END IF;
  -- 2. The node, under the node guard (with the demand clause unless it is waived).
  IF p_demand_clause THEN
    {_charge(nodes, node_key, NODE_GUARD, "used_", demand=True)} INTO v_node;
  ELSE
    {_charge(nodes, node_key, NODE_GUARD_WAIVED, "used_", demand=True)} INTO v_node;
  END IF;
  IF NOT FOUND THEN
    {_refused(nodes, node_key, "node", NO_NODE)}
  END IF;
  -- 3. The placement row (a duplicate request id fails here, as on the in-process path).
  INSERT INTO placements ({columns}) VALUES ({values});
  RETURN QUERY SELECT '{ADMITTED}'::text, v_claim_id, NULL::json, row_to_json(v_node);
END
"""
    arguments = ", ".join(f"{n} {t}" for n, t in ARGUMENTS)
    returns = "TABLE({} text, {} text, {} json, {} json)".format(*_RESULT)
    return (
        f"CREATE OR REPLACE FUNCTION {NAME}({arguments}) RETURNS {returns} "
        f"LANGUAGE plpgsql AS $fleetgate${body}$fleetgate$"
    )


def digest() -> str:
    """A digest of the function's text: what the installed function's comment must say."""
    return hashlib.sha256(definition().encode()).hexdigest()[:32]


def install_statements() -> list[str]:
    """The statements that install (or replace) the function and record its digest."""
    return stored_functions.install_statements(SIGNATURE, definition(), digest())


def drop_statement() -> str:
    """The statement that removes the function."""
    return stored_functions.drop_statement(SIGNATURE)


async def installed(conn: AsyncConnection) -> bool:
    """Whether this code's function is installed (a missing or stale one is not used)."""
    return await stored_functions.all_current(conn, {SIGNATURE: digest()})


_CALL = sa.text(
    f"SELECT {', '.join(f'{r} AS {r[3:]}' for r in _RESULT)} FROM {NAME}("
    + ", ".join(f":{n}" for n, _ in ARGUMENTS)
    + ")"
).columns(
    sa.column("outcome", sa.Text()),
    sa.column("claim_id", sa.Text()),
    sa.column("refused", postgresql.JSON()),
    sa.column("node", postgresql.JSON()),
)


def arguments_for(
    request: AdmitRequest, placement_id: str, now: float, enforcement: ClaimEnforcement
) -> dict[str, Any]:
    """The function's arguments for one admission (the one call's and each batch element's).

    The domain decides as on the in-process path: which claim rule (``claim_charge``: hard
    under the claim guard, else advisory) and whether the node guard keeps its demand clause
    (``node_guard``).
    """
    x = request.resources
    return {
        "p_namespace": request.namespace,
        "p_node": request.node,
        "p_cpus": x.cpus,
        "p_memory_mb": x.memory_mb,
        "p_disk_gb": x.disk_gb,
        "p_demand": float(request.demand),
        "p_target_load": float(request.target_load),
        "p_demand_clause": node_guard(request.target_load) is NODE_GUARD,
        "p_hard": claim_charge(enforcement, request.enforce).guard is not None,
        "p_now": now,
        "p_id": placement_id,
        "p_request_id": request.request_id,
    }


async def call(conn: AsyncConnection, arguments: Mapping[str, Any]) -> sa.Row[Any]:
    """Run the function with ``arguments`` (named as in ``ARGUMENTS``); its one result row."""
    return (await conn.execute(_CALL, dict(arguments))).one()


def typed(table: sa.Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """A row the function returned as JSON, with its DOUBLE columns as floats again."""
    out = dict(row)
    for column in table.c:
        value = out.get(column.name)
        if value is not None and isinstance(column.type, sa.Double):
            out[column.name] = float(value)
    return out


async def admit_by_function(
    conn: AsyncConnection,
    request: AdmitRequest,
    placement_id: str,
    now: float,
    enforcement: ClaimEnforcement,
    audit: Audit | None = None,
) -> Admission:
    """The admission as one call of the PostgreSQL function, finished here where it stops.

    Only for enforced requests (an unenforced write is rare and runs in-process). The domain
    decides as on the in-process path: which claim rule (``claim_charge``), which node guard
    (``node_guard``), and the verdict on a refused row the function returns.
    """
    rule = claim_charge(enforcement, request.enforce)
    guard = node_guard(request.target_load)
    params = request.guard_params()
    arguments = arguments_for(request, placement_id, now, enforcement)
    try:
        result = await call(conn, arguments)
    except DBAPIError as exc:
        if lock_held(exc):  # the function's claim check (NOWAIT) met a claim being written
            raise ClaimAppeared(request.namespace) from exc
        raise
    outcome = result.outcome
    if outcome == ADMITTED:
        claimed = None
        if result.claim_id is not None:  # charged within its limit: no overage, no overrun
            claimed = ChargedClaim(result.claim_id, (), Resources(), None)
        node_row = typed(nodes, result.node)
        return await record(
            conn, request, placement_id, now, claimed, node_row, [], audit, inserted=True
        )
    if outcome == CLAIM_OVER:
        row = typed(claims, result.refused)
        claimed = charged_claim(row, request, rule, None)
        return await after_claim(conn, request, placement_id, now, claimed, [], audit)
    if outcome == CLAIM_APPEARED:
        raise ClaimAppeared(request.namespace)
    if outcome == DUPLICATE:
        raise Duplicate(request.request_id)
    if outcome == NO_NODE:
        raise NodeGone(request.node)
    if outcome == NO_CLUSTER:
        raise LedgerError("the cluster row is missing: run `fleetgate db upgrade`")
    stages = {
        REFUSED["claim"]: (claims, CLAIM_GUARD),
        REFUSED["cluster"]: (cluster, CLUSTER_GUARD),
        REFUSED["node"]: (nodes, guard),
    }
    if outcome not in stages:  # pragma: no cover - the function returns only the above
        raise LedgerError(f"{NAME} returned an unknown outcome {outcome!r}")
    table, refusing = stages[outcome]
    denial = deny(refusing, guard_row(typed(table, result.refused)), params)
    if denial is None:
        raise Recheck(outcome)  # the row changed between the UPDATE and its lock
    raise Refused(denial, repeat_checked=True)  # the function found no earlier placement


__all__ = [
    "ADMITTED",
    "ARGUMENTS",
    "CLAIM_APPEARED",
    "CLAIM_OVER",
    "DUPLICATE",
    "NAME",
    "NO_CLUSTER",
    "NO_NODE",
    "REFUSED",
    "REPEAT_CHECKED",
    "admit_by_function",
    "arguments_for",
    "call",
    "definition",
    "digest",
    "drop_statement",
    "install_statements",
    "installed",
    "typed",
]
