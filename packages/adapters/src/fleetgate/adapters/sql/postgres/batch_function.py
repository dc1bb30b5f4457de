"""A batch of admissions as one PostgreSQL call: ``fleetgate_admit_batch`` and its executor.

The function takes ``fleetgate_admit``'s arguments as arrays, one element per admission, and
calls ``fleetgate_admit`` on each element in turn, so its guards are the generated ones
(``admit_function``), never a second copy. Each element runs in a PL/pgSQL ``BEGIN … EXCEPTION``
block, a subtransaction: an element that is not admitted raises inside its block to roll its
own work back, so "a non-admitted item changed nothing" holds (``batch_items``). Its errors are
caught there too: a duplicate request id (the placements' UNIQUE key) is ``duplicate``; a
deadlock, the NOWAIT claim check meeting a held claim row, or a serialization failure is met
by that element alone (its wait is rolled back, the others keep theirs) and it is admitted on
its own afterwards. Any other error aborts the call, and with it the batch's transaction.

Each admitted element keeps the id of the subtransaction it wrote in (a rolled-back one gives
its id up): past 64 in one transaction PostgreSQL's per-backend cache of them overflows, and
every other session's visibility checks get slower until it ends. Group commit's bound on a
batch should stay at or below 64 here.

The function bounds each lock wait itself (``SET lock_timeout``, see ``BATCH_LOCK_TIMEOUT_MS``):
the setting holds for the call and the caller's value is back after it, so a batch sends no
``SET LOCAL`` first. An element refused (or whose node is gone) was looked up by its request id
before ``fleetgate_admit`` answered: its result says so (``repeat_checked``), and nothing reads
for it after the COMMIT, unless a later element of the same batch admitted its twin.

Alembic installs it (revision 0004, reinstalled by 0005). Its comment holds a digest of its own text
*and* of ``fleetgate_admit``'s, since it runs that function: the ledger uses it only while both are
current (``installed``)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.admission import ChargedClaim, record
from fleetgate.adapters.sql.batch_items import BatchItem, ItemResult, Outcome
from fleetgate.adapters.sql.postgres import admit_function, stored_functions
from fleetgate.adapters.sql.rows import guard_row
from fleetgate.adapters.sql.schema import claims, cluster, nodes, placements
from fleetgate.domain.capacity.claims import ClaimEnforcement
from fleetgate.domain.capacity.denials import deny
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.errors import LedgerError
from fleetgate.domain.capacity.guards import CLAIM_GUARD, CLUSTER_GUARD, node_guard

NAME: Final = "fleetgate_admit_batch"
#: ``fleetgate_admit``'s arguments, each an array of one element per admission.
ARGUMENTS: Final = tuple((name, f"{sql_type}[]") for name, sql_type in admit_function.ARGUMENTS)
SIGNATURE: Final = f"{NAME}({', '.join(t for _, t in ARGUMENTS)})"

#: An element's request id is already taken: the placements' UNIQUE(namespace, request_id)
#: met it, or ``fleetgate_admit`` found it before answering a refusal (the same outcome).
DUPLICATE: Final = admit_function.DUPLICATE
#: How long an element may wait for one lock: long enough for another process's batch to commit
#: (a few ms), short next to the second PostgreSQL waits before it looks for a deadlock. The
#: function carries it (``SET lock_timeout``), so it holds for the call and the caller's value
#: is back when the call returns: the batch sends no ``SET LOCAL`` of its own.
BATCH_LOCK_TIMEOUT_MS: Final = 50
#: The errors an element meets alone, by PL/pgSQL condition name, as the outcome they report.
RETRIED: Final = {
    "deadlock_detected": "deadlock",
    "lock_not_available": "lock_held",  # the NOWAIT claim check met a claim row being written
    "serialization_failure": "serialization_failure",
}
#: The SQLSTATE an element raises to roll back its own work (a code no server error uses).
_UNDO: Final = "FGU01"


def _request_id_constraint() -> str:
    """The name of the placements' UNIQUE(namespace, request_id), as the schema names it."""
    for constraint in placements.constraints:
        if isinstance(constraint, sa.UniqueConstraint) and [c.name for c in constraint.columns] == [
            "namespace",
            "request_id",
        ]:
            return str(constraint.name)
    raise LookupError("placements has no UNIQUE(namespace, request_id)")  # pragma: no cover


#: The result columns: the element's index (from 0), then ``fleetgate_admit``'s own columns.
_RESULT: Final = ("fg_index", "fg_outcome", "fg_claim_id", "fg_refused", "fg_node")


@cache
def definition() -> str:
    """``CREATE OR REPLACE FUNCTION fleetgate_admit_batch …``, running ``fleetgate_admit``."""
    element = ", ".join(f"{name}[i]" for name, _ in ARGUMENTS)
    # PL/pgSQL variables are not rolled back: an undone element keeps its outcome and its
    # refused row (read under the lock the rollback then gives up), so the domain explains the
    # refusal with no second read.
    retried = "\n".join(
        f"      WHEN {condition} THEN\n"
        f"        fg_outcome := '{outcome}'; fg_claim_id := NULL; fg_refused := NULL; "
        "fg_node := NULL;"
        for condition, outcome in RETRIED.items()
    )
    body = f"""
DECLARE
  v_constraint text;
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_namespace, 1), 0) LOOP
    fg_index := i - 1;
    BEGIN
      SELECT * INTO fg_outcome, fg_claim_id, fg_refused, fg_node
        FROM {admit_function.NAME}({element});
      IF fg_outcome <> '{admit_function.ADMITTED}' THEN
        -- Not admitted: undo whatever it charged (an advisory claim, the cluster's sums).
        RAISE EXCEPTION USING ERRCODE = '{_UNDO}', MESSAGE = 'fleetgate: element not admitted';
      END IF;
    EXCEPTION
      WHEN SQLSTATE '{_UNDO}' THEN
        NULL;  -- rolled back; its outcome and refused row stand
      WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
        IF v_constraint IS DISTINCT FROM '{_request_id_constraint()}' THEN
          RAISE;  -- not a repeated request id: the whole batch fails, as the statement would
        END IF;
        fg_outcome := '{DUPLICATE}'; fg_claim_id := NULL; fg_refused := NULL; fg_node := NULL;
{retried}
    END;
    RETURN NEXT;
  END LOOP;
END
"""
    arguments = ", ".join(f"{n} {t}" for n, t in ARGUMENTS)
    returns = "TABLE({} integer, {} text, {} text, {} json, {} json)".format(*_RESULT)
    return (
        f"CREATE OR REPLACE FUNCTION {NAME}({arguments}) RETURNS {returns} "
        f"LANGUAGE plpgsql SET lock_timeout = '{BATCH_LOCK_TIMEOUT_MS}ms' "
        f"AS $fleetgate${body}$fleetgate$"
    )


def digest() -> str:
    """A digest of this function's text and of the ``fleetgate_admit`` it runs."""
    text = f"{definition()}\n{admit_function.digest()}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def install_statements() -> list[str]:
    """The statements that install (or replace) the function and record its digest."""
    return stored_functions.install_statements(SIGNATURE, definition(), digest())


def drop_statement() -> str:
    """The statement that removes the function."""
    return stored_functions.drop_statement(SIGNATURE)


async def installed(conn: AsyncConnection) -> bool:
    """Whether this code's batch function *and* its ``fleetgate_admit`` are installed."""
    return await stored_functions.all_current(
        conn, {admit_function.SIGNATURE: admit_function.digest(), SIGNATURE: digest()}
    )


#: What each result column is called in Python (``index`` would shadow ``Row.index``).
_LABELS: Final = ("element", "outcome", "claim_id", "refused", "node")
_CALL = sa.text(
    f"SELECT {', '.join(f'{r} AS {label}' for r, label in zip(_RESULT, _LABELS, strict=True))}"
    f" FROM {NAME}("
    + ", ".join(f"CAST(:{n} AS {t})" for n, t in ARGUMENTS)
    + f") ORDER BY {_RESULT[0]}"
).columns(
    sa.column("element", sa.Integer()),
    sa.column("outcome", sa.Text()),
    sa.column("claim_id", sa.Text()),
    sa.column("refused", postgresql.JSON()),
    sa.column("node", postgresql.JSON()),
)


async def call(conn: AsyncConnection, elements: Sequence[Mapping[str, Any]]) -> list[sa.Row[Any]]:
    """Run the function on ``elements`` (each named as ``fleetgate_admit``'s arguments)."""
    arrays = {name: [element[name] for element in elements] for name, _ in ARGUMENTS}
    rows = list(await conn.execute(_CALL, arrays))
    if [row.element for row in rows] != list(range(len(elements))):  # pragma: no cover
        raise LedgerError(f"{NAME} answered {len(rows)} rows for {len(elements)} admissions")
    return rows


def _solo(reason: str) -> ItemResult:
    return ItemResult(Outcome.SOLO, reason=reason)


#: What each refusing stage's row is, and the guard that refused it (the node's: per request).
_REFUSING: Final = {
    admit_function.REFUSED["claim"]: (claims, CLAIM_GUARD),
    admit_function.REFUSED["cluster"]: (cluster, CLUSTER_GUARD),
    admit_function.REFUSED["node"]: (nodes, None),
}
_SOLO_REASONS: Final = {
    admit_function.CLAIM_OVER: "an advisory claim charged past its limit",
    admit_function.CLAIM_APPEARED: "a claim for the namespace committed meanwhile",
    **{outcome: f"{condition} met inside the batch" for condition, outcome in RETRIED.items()},
}


async def _result(
    conn: AsyncConnection, item: BatchItem, row: sa.Row[Any], now: float
) -> ItemResult:
    """One element's row as the item's result (the domain's verdict on a refused row)."""
    request, outcome = item.request, row.outcome
    if outcome == admit_function.ADMITTED:
        claimed = None
        if row.claim_id is not None:  # charged within its limit: no overage, no overrun
            claimed = ChargedClaim(row.claim_id, (), Resources(), None)
        node_row = admit_function.typed(nodes, row.node)
        admission = await record(
            conn, request, item.placement_id, now, claimed, node_row, [], None, inserted=True
        )
        events = tuple(item.audit(admission)) if item.audit is not None else ()
        return ItemResult(Outcome.ADMITTED, admission=admission, events=events)
    if outcome in _SOLO_REASONS:
        return _solo(_SOLO_REASONS[outcome])
    if outcome == DUPLICATE:
        return ItemResult(Outcome.DUPLICATE)
    if outcome == admit_function.NO_NODE:  # its request id was looked for first: no repeat
        return ItemResult(Outcome.NO_NODE, repeat_checked=True)
    if outcome == admit_function.NO_CLUSTER:
        raise LedgerError("the cluster row is missing: run `fleetgate db upgrade`")
    if outcome not in _REFUSING:  # pragma: no cover - the function returns only the above
        raise LedgerError(f"{NAME} returned an unknown outcome {outcome!r}")
    table, guard = _REFUSING[outcome]
    refusing = guard if guard is not None else node_guard(request.target_load)
    row_then = guard_row(admit_function.typed(table, row.refused))
    denial = deny(refusing, row_then, request.guard_params())
    if denial is None:  # the row changed between the guarded UPDATE and its lock
        return _solo("the refused row admits under the lock after all")
    return ItemResult(Outcome.REFUSED, denial=denial, repeat_checked=True)


async def postgres_batch_executor(
    conn: AsyncConnection,
    items: Sequence[BatchItem],
    now: float,
    enforcement: ClaimEnforcement,
) -> list[ItemResult]:
    """The batch's enforced items in one call of ``fleetgate_admit_batch`` (a ``BatchExecutor``).

    Unenforced requests are rare and never sent: they are admitted alone, in-process.
    """
    sent = [i for i, item in enumerate(items) if item.request.enforce]
    results = [_solo("an unenforced write runs in-process") for _ in items]
    if not sent:
        return results
    elements = [
        admit_function.arguments_for(items[i].request, items[i].placement_id, now, enforcement)
        for i in sent
    ]
    for i, row in zip(sent, await call(conn, elements), strict=True):
        results[i] = await _result(conn, items[i], row, now)
    return _twins_admitted_later(items, results)


def _twins_admitted_later(
    items: Sequence[BatchItem], results: list[ItemResult]
) -> list[ItemResult]:
    """A refusal whose request id a *later* item of the batch admitted is read for after all.

    The function looked for an earlier placement when it refused, before the later twin was
    written; after the COMMIT the twin is there, and the group committer's read finds it, as
    it did before the function looked (the refusal stands only if that read finds nothing).
    """
    admitted = {
        (r.admission.placement.namespace, r.admission.placement.request_id)
        for r in results
        if r.admission is not None and r.admission.placement is not None
    }
    return [
        dataclasses.replace(result, repeat_checked=False)
        if result.repeat_checked
        and item.request.request_id is not None
        and (item.request.namespace, item.request.request_id) in admitted
        else result
        for item, result in zip(items, results, strict=True)
    ]


__all__ = [
    "ARGUMENTS",
    "BATCH_LOCK_TIMEOUT_MS",
    "DUPLICATE",
    "NAME",
    "RETRIED",
    "call",
    "definition",
    "digest",
    "drop_statement",
    "install_statements",
    "installed",
    "postgres_batch_executor",
]
