"""A batch of admissions as one PostgreSQL call (``fleetgate_admit_batch``), for group commit.

It runs ``fleetgate_admit`` (revision 0003) on each element, inside a subtransaction per
element, so its guards are the generated ones. Only PostgreSQL gets it. Its digest covers its own
text and ``fleetgate_admit``'s: a migration that reinstalls either must reinstall this one too,
and until one does the ledger finds it stale and admits one by one instead.

Revision ID: 0004_admit_batch_function
Revises: 0003_admit_function
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from fleetgate.adapters.sql.postgres import batch_function

revision = "0004_admit_batch_function"
down_revision = "0003_admit_function"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in batch_function.install_statements():
            op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(batch_function.drop_statement())
