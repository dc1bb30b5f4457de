"""A dialect lives in one place: its room's plugin module (a ``DialectSupport``), its entry point
and its test backend (``tests/backends.py``).

Three ways this could rot, one test each: a module outside the plugins starts switching on a
dialect's name again (read from the source, like the import contracts); an installed dialect
plugin lacks a decision or a test backend; the SQL ledger stops asking the plugin for a decision
it carries (a recording dialect on the database under test sees every one asked).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from fleetgate.adapters import plugins
from fleetgate.adapters.sql.dialect import DialectSupport
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.adapters.sql.schema import nodes
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from fleetgate.domain.capacity.reconcile import NodeResult
from tests.backends import SERVERS, server_of
from tests.conftest import Backend

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted(ROOT.glob("packages/*/src/fleetgate/**/*.py"))
SQL = ROOT / "packages/adapters/src/fleetgate/adapters/sql"
#: Where a dialect's name may decide something: the plugins (each in its dialect's room) and the
#: interface they implement.
#: The migration scripts too: they are the schema's history, run by Alembic without a ledger
#: (also from its command line), and install PL/pgSQL on PostgreSQL alone because that is the
#: language it is written in; a new dialect adds nothing to them.
ALLOWED = {SQL / "dialect.py", *SQL.glob("*/plugin.py"), *SQL.glob("migrations/versions/*.py")}
#: SQLAlchemy's dialect names and the plugins' own.
NAMES = frozenset({"sqlite", "mysql", "mariadb", "postgresql", "postgres", "oracle", "mssql"})


def _is_dialect_name(node: ast.AST) -> bool:
    """``<anything>.dialect.name``, or a dialect's name as a literal (alone or in a collection)."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        inner = node.value
        return isinstance(inner, ast.Attribute) and inner.attr == "dialect"
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_dialect_name(e) for e in node.elts)
    return False


def switches(source: str) -> list[int]:
    """Lines of ``source`` that decide by a dialect's name: a comparison with one (``==``,
    ``in``, ``match``), or a per-dialect compilation (``@compiles(element, "mysql")``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if any(_is_dialect_name(n) for n in (node.left, *node.comparators)):
                found.append(node.lineno)
        elif isinstance(node, ast.Match) and _is_dialect_name(node.subject):
            found.append(node.lineno)
        elif isinstance(node, ast.Call):
            callee = node.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if name == "compiles" and any(_is_dialect_name(a) for a in node.args[1:]):
                found.append(node.lineno)
    return sorted(found)


@pytest.mark.parametrize(
    "source",
    [
        'if conn.dialect.name == "sqlite":\n    pass',
        'if self.store.dialect.name != "postgres":\n    pass',
        'ok = name in ("mysql", "mariadb")',
        'ok = "postgresql" == kind',
        "match op.get_bind().dialect.name:\n    case _:\n        pass",
        '@compiles(as_double, "mysql")\ndef f():\n    pass',
    ],
)
def test_the_check_finds_a_switch_on_a_dialect_name(source: str) -> None:
    assert switches(source) == [1]


def test_the_check_leaves_other_names_alone() -> None:
    assert switches('if row.name == "web":\n    pass\nvalue = {"sqlite": 1}["sqlite"]') == []


def test_no_module_outside_the_dialect_plugins_switches_on_a_dialect_name() -> None:
    assert len(SOURCES) > 100 and set(SOURCES) >= ALLOWED
    found = {
        str(path.relative_to(ROOT)): lines
        for path in SOURCES
        if path not in ALLOWED and (lines := switches(path.read_text()))
    }
    assert found == {}, "move these decisions into DialectSupport and the plugins"


def _dialect_plugins() -> list[tuple[str, DialectSupport]]:
    pm = plugins.plugin_manager()
    return sorted(
        (name, plugin)
        for name, plugin in pm.list_name_plugin()
        if isinstance(plugin, DialectSupport)
    )


def test_every_dialect_plugin_carries_its_decisions_and_has_a_test_backend() -> None:
    found = _dialect_plugins()
    assert [name for name, _ in found] == ["mariadb", "postgres", "sqlite"]
    pm = plugins.plugin_manager()
    for name, plugin in found:
        assert plugin.name == name and plugin.schemes, name
        # Its ledger is built on it, by its own hook, through the plugin manager.
        ledger = plugins.make_ledger(pm, f"{plugin.schemes[0]}://user@host/db", {})
        assert isinstance(ledger, SqlLedger) and ledger.store.dialect is plugin
        # Its test backend: the embedded one (a fresh file) or a server's entry.
        assert name == "sqlite" or server_of(name).kind == name
    assert {s.kind for s in SERVERS} <= {name for name, _ in found}


@dataclass
class Asked:
    """The decisions a recording dialect was asked for."""

    grouped: list[str] = field(default_factory=list)
    written: list[list[str]] = field(default_factory=list)


def recording(support: DialectSupport, asked: Asked) -> DialectSupport:
    """``support``'s own behaviour, noting each reconcile decision the ledger asks it for."""

    class Recording(type(support)):  # type: ignore[misc]
        def grouping(self, column: ColumnElement[str]) -> ColumnElement[str]:
            asked.grouped.append(str(column))
            result: ColumnElement[str] = super().grouping(column)
            return result

        async def write_node_counters(
            self, conn: AsyncConnection, rows: list[NodeResult], now: float
        ) -> None:
            asked.written.append([r.name for r in rows])
            await super().write_node_counters(conn, rows, now)

    made: DialectSupport = Recording()
    return made


async def test_the_ledger_asks_its_dialect_for_the_reconcile_passes_decisions(
    ledger: SqlLedger, backend: Backend
) -> None:
    asked = Asked()
    dialect = recording(ledger.store.dialect, asked)
    assert dialect.name == backend.kind
    again = SqlLedger(ledger.url, ledger.options, dialect, ledger.store.clock)
    await again.start()
    try:
        for name in ("a", "b"):
            await again.add_node(NodeSpec(name, Capacity(8, 8192, 80)))
        assert (await again.admit(AdmitRequest("web", "a", Resources(2, 20, 2)))).admitted
        async with again.store.engine.begin() as conn:  # drift on b, for the pass to write
            await conn.execute(sa.update(nodes).where(nodes.c.name == "b").values(used_cpus=5))
        report = await again.reconcile()
        assert asked.grouped == ["placements.node"]
        assert asked.written == [["b"]]
        assert [n.name for n in report.reconciliation.nodes if n.changed] == ["b"]
        by_name = {n.name: n for n in await again.nodes()}
        assert by_name["b"].used.cpus == 0 and by_name["a"].used.cpus == 2
    finally:
        await again.close()
