"""The admission as one PostgreSQL function (``fleetgate_admit``): one round trip per admission.

Generated from the domain's guards (``admit_function``), so its WHERE clauses are the ones the
in-process path sends and the property tests hold equal to the domain. Only PostgreSQL gets it;
SQLite and MariaDB keep the in-process path. A later change to a guard must ship a migration that
runs ``install_statements()`` again: until it does, the ledger finds the installed digest stale
and admits in-process instead (never by the old rule).

Revision ID: 0003_admit_function
Revises: 0002_placements_by_namespace
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from fleetgate.adapters.sql.postgres import admit_function

revision = "0003_admit_function"
down_revision = "0002_placements_by_namespace"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in admit_function.install_statements():
            op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(admit_function.drop_statement())
