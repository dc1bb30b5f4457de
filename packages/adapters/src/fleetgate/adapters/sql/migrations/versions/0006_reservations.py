"""Room reservations: the destination room of a drain's relocation plan, held in the ledger.

Issue 41, "reserve before you drain": a reservation is charged to its destination node's
``used`` counters, so admissions see reserved room as taken; this table records what each
charge is for (the placement being moved, the node being drained, until when).

Revision ID: 0006_reservations
Revises: 0005_function_repeat_check
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_reservations"
down_revision = "0005_function_repeat_check"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("placement_id", sa.String(36), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("owner", sa.String(253), nullable=False),
        sa.Column("cpus", sa.BigInteger(), nullable=False),
        sa.Column("memory_mb", sa.BigInteger(), nullable=False),
        sa.Column("disk_gb", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.CheckConstraint(
            "cpus >= 0 AND memory_mb >= 0 AND disk_gb >= 0",
            name=op.f("ck_reservations_size_non_negative"),
        ),
        sa.ForeignKeyConstraint(
            ["node"],
            ["nodes.name"],
            ondelete="CASCADE",
            name=op.f("fk_reservations_node_nodes"),
        ),
        sa.PrimaryKeyConstraint("placement_id", name=op.f("pk_reservations")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index("ix_reservations_owner", "reservations", ["owner"])
    op.create_index("ix_reservations_node", "reservations", ["node"])


def downgrade() -> None:
    # The table takes its indexes with it; MariaDB refuses to drop the node index on its own
    # while the foreign key needs it.
    op.drop_table("reservations")
