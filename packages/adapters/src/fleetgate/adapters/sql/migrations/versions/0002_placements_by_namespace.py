"""An index for a namespace's placements in id order: the API's paged placement list.

``GET /v1/namespaces/{ns}/placements?after=…`` reads ``WHERE namespace = :ns AND id > :after
ORDER BY id LIMIT n``; without this index a page walked the primary key and filtered, or sorted
the namespace's rows, so its cost grew with the namespace instead of with the page.

Revision ID: 0002_placements_by_namespace
Revises: 0001_initial
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002_placements_by_namespace"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_placements_namespace_id", "placements", ["namespace", "id"])


def downgrade() -> None:
    op.drop_index("ix_placements_namespace_id", table_name="placements")
