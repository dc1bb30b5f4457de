"""The first release's schema: nodes, placements, claims, cluster, events, api_tokens.

Revision ID: 0001_initial
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

DIMS = ("cpus", "memory_mb", "disk_gb")
OPTS: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}


def counters(prefix: str) -> list[sa.Column[int]]:
    return [sa.Column(f"{prefix}{d}", sa.BigInteger(), nullable=False, server_default="0")
            for d in DIMS]


def checks(table: str, prefix: str) -> list[sa.CheckConstraint]:
    return [sa.CheckConstraint(f"{prefix}{d} >= 0", name=op.f(f"ck_{table}_{prefix}{d}_non_negative"))
            for d in DIMS]


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("pool", sa.String(253), nullable=False, server_default=""),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.BigInteger(), nullable=False),
        sa.Column("disk_gb", sa.BigInteger(), nullable=False),
        *counters("limit_"),
        *counters("used_"),
        sa.Column("expected_demand", sa.Double(), nullable=False, server_default="0"),
        sa.Column("cpu_load_1", sa.Double(), nullable=True),
        sa.Column("cpu_schedulable", sa.Integer(), nullable=True),
        sa.Column("schedulable", sa.Boolean(), nullable=False),
        sa.Column("metrics_at", sa.Double(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        *checks("nodes", "limit_"),
        *checks("nodes", "used_"),
        sa.CheckConstraint("expected_demand >= 0",
                           name=op.f("ck_nodes_expected_demand_non_negative")),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_nodes")),
        **OPTS,
    )
    op.create_index("ix_nodes_pool", "nodes", ["pool"])

    op.create_table(
        "placements",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("cpus", sa.BigInteger(), nullable=False),
        sa.Column("memory_mb", sa.BigInteger(), nullable=False),
        sa.Column("disk_gb", sa.BigInteger(), nullable=False),
        sa.Column("demand", sa.Double(), nullable=False),
        sa.Column("admitted_at", sa.Double(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("claim_id", sa.String(36), nullable=True),
        sa.CheckConstraint("cpus >= 0 AND memory_mb >= 0 AND disk_gb >= 0",
                           name=op.f("ck_placements_size_non_negative")),
        sa.ForeignKeyConstraint(["node"], ["nodes.name"], ondelete="RESTRICT",
                                name=op.f("fk_placements_node_nodes")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placements")),
        sa.UniqueConstraint("namespace", "request_id",
                            name=op.f("uq_placements_namespace_request_id")),
        **OPTS,
    )
    op.create_index("ix_placements_node", "placements", ["node"])
    op.create_index("ix_placements_claim_id", "placements", ["claim_id"])

    op.create_table(
        "claims",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        *counters("limit_"),
        *counters("used_"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("active_namespace", sa.String(63), nullable=True),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        *checks("claims", "limit_"),
        *checks("claims", "used_"),
        sa.CheckConstraint("state IN ('active', 'expired')", name=op.f("ck_claims_state_known")),
        sa.CheckConstraint(
            "(state = 'active' AND active_namespace = namespace)"
            " OR (state <> 'active' AND active_namespace IS NULL)",
            name=op.f("ck_claims_active_namespace_matches_state"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_claims")),
        sa.UniqueConstraint("active_namespace", name=op.f("uq_claims_active_namespace")),
        **OPTS,
    )
    op.create_index("ix_claims_namespace", "claims", ["namespace"])

    cluster = op.create_table(
        "cluster",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        *counters("total_"),
        *counters("claimed_"),
        *counters("unclaimed_used_"),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_cluster_singleton")),
        *checks("cluster", "total_"),
        *checks("cluster", "claimed_"),
        *checks("cluster", "unclaimed_used_"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster")),
        **OPTS,
    )
    # The singleton exists from the start, so no admission ever runs without a cluster guard.
    op.bulk_insert(cluster, [{"id": 1, "updated_at": 0.0}])

    op.create_table(
        "events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True,
                  nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False, server_default=""),
        sa.Column("namespace", sa.String(63), nullable=True),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        **OPTS,
    )
    op.create_index("ix_events_namespace_id", "events", ["namespace", "id"])
    op.create_index("ix_events_subject_id", "events", ["subject", "id"])

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
        **OPTS,
    )
    op.create_index("ix_api_tokens_namespace", "api_tokens", ["namespace"])


def downgrade() -> None:
    for table in ("api_tokens", "events", "cluster", "claims", "placements", "nodes"):
        op.drop_table(table)
