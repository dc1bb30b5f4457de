"""The ledger's tables (SQLAlchemy Core), identical on SQLite, MariaDB and PostgreSQL.

Timestamps are epoch seconds in a DOUBLE, computed in Python from the ledger's clock. One
representation behaves the same on all three databases (no server clock, no time zones, no
DATETIME precision differences), orders correctly, and runs on virtual time in tests and in
``fleetgate up``. Counters are BIGINT with CHECK constraints that they never go negative, so a
bug that would drive one below zero fails its transaction instead of corrupting the ledger.

On MariaDB every table uses ``utf8mb4_bin``: names compare byte for byte, as they do on SQLite
and PostgreSQL (the default ``_general_ci`` collation would make ``Node-A`` equal ``node-a``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from fleetgate.domain.capacity.dimensions import ALLOCATION

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

#: Table options: binary collation on MariaDB; ignored by the other dialects.
TABLE_ARGS: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}

NODE_NAME = 253
NAMESPACE = 63
UUID = 36
REQUEST_ID = 128

# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY.
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _epoch(name: str, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.Double(), nullable=nullable)


def _counters(prefix: str) -> list[sa.Column[Any]]:
    return [
        sa.Column(f"{prefix}{d}", sa.BigInteger(), nullable=False, server_default="0")
        for d in ALLOCATION
    ]


def _non_negative(prefix: str) -> list[sa.CheckConstraint]:
    return [
        sa.CheckConstraint(f"{prefix}{d} >= 0", name=f"{prefix}{d}_non_negative")
        for d in ALLOCATION
    ]


nodes = sa.Table(
    "nodes",
    metadata,
    sa.Column("name", sa.String(NODE_NAME), primary_key=True),
    sa.Column("pool", sa.String(NODE_NAME), nullable=False, server_default=""),
    sa.Column("labels", sa.JSON(), nullable=False),
    sa.Column("threads", sa.Integer(), nullable=False),
    sa.Column("memory_mb", sa.BigInteger(), nullable=False),
    sa.Column("disk_gb", sa.BigInteger(), nullable=False),
    *_counters("limit_"),
    *_counters("used_"),
    sa.Column("expected_demand", sa.Double(), nullable=False, server_default="0"),
    sa.Column("cpu_load_1", sa.Double(), nullable=True),
    sa.Column("cpu_schedulable", sa.Integer(), nullable=True),
    sa.Column("schedulable", sa.Boolean(), nullable=False),
    _epoch("metrics_at", nullable=True),
    _epoch("created_at"),
    _epoch("updated_at"),
    *_non_negative("limit_"),
    *_non_negative("used_"),
    sa.CheckConstraint("expected_demand >= 0", name="expected_demand_non_negative"),
    sa.Index("ix_nodes_pool", "pool"),
    **TABLE_ARGS,
)

placements = sa.Table(
    "placements",
    metadata,
    sa.Column("id", sa.String(UUID), primary_key=True),
    sa.Column("namespace", sa.String(NAMESPACE), nullable=False),
    # RESTRICT: a node row cannot disappear from under its placements, even in a race.
    sa.Column(
        "node",
        sa.String(NODE_NAME),
        sa.ForeignKey("nodes.name", ondelete="RESTRICT"),
        nullable=False,
    ),
    sa.Column("cpus", sa.BigInteger(), nullable=False),
    sa.Column("memory_mb", sa.BigInteger(), nullable=False),
    sa.Column("disk_gb", sa.BigInteger(), nullable=False),
    sa.Column("demand", sa.Double(), nullable=False),
    _epoch("admitted_at"),
    sa.Column("request_id", sa.String(REQUEST_ID), nullable=True),
    # The claim this placement was charged to (NULL: the cluster's unclaimed side). No foreign
    # key: deleting a claim hands its usage back to the cluster and must not touch placements.
    sa.Column("claim_id", sa.String(UUID), nullable=True),
    # Two racing requests with the same id cannot both commit: the loser's INSERT fails here.
    sa.UniqueConstraint("namespace", "request_id"),
    sa.CheckConstraint("cpus >= 0 AND memory_mb >= 0 AND disk_gb >= 0", name="size_non_negative"),
    sa.Index("ix_placements_node", "node"),
    sa.Index("ix_placements_claim_id", "claim_id"),
    # A namespace's placements in id order: the API's paged list (revision 0002).
    sa.Index("ix_placements_namespace_id", "namespace", "id"),
    **TABLE_ARGS,
)

reservations = sa.Table(
    "reservations",
    metadata,
    # One reservation per placement: a placement leaves one node at a time.
    sa.Column("placement_id", sa.String(UUID), primary_key=True),
    # No foreign key to the placement: a release leaves the reservation behind (orphaned) for
    # the reconciler to end, so a release takes no lock beyond its own.
    # CASCADE on the node: a destination leaves the ledger once it holds no placement, and the
    # room reserved on it goes with it; the move planned there then finds no node, and the
    # placement stays where it is, counted and planned again.
    sa.Column(
        "node",
        sa.String(NODE_NAME),
        sa.ForeignKey("nodes.name", ondelete="CASCADE"),
        nullable=False,
    ),
    # The node being drained: the placement's node when it was reserved.
    sa.Column("owner", sa.String(NODE_NAME), nullable=False),
    sa.Column("cpus", sa.BigInteger(), nullable=False),
    sa.Column("memory_mb", sa.BigInteger(), nullable=False),
    sa.Column("disk_gb", sa.BigInteger(), nullable=False),
    _epoch("expires_at"),
    _epoch("created_at"),
    sa.CheckConstraint("cpus >= 0 AND memory_mb >= 0 AND disk_gb >= 0", name="size_non_negative"),
    sa.Index("ix_reservations_owner", "owner"),
    sa.Index("ix_reservations_node", "node"),
    **TABLE_ARGS,
)

claims = sa.Table(
    "claims",
    metadata,
    sa.Column("id", sa.String(UUID), primary_key=True),
    sa.Column("namespace", sa.String(NAMESPACE), nullable=False),
    *_counters("limit_"),
    *_counters("used_"),
    sa.Column("state", sa.String(16), nullable=False),
    # Equal to ``namespace`` while the claim is active, NULL otherwise. UNIQUE makes "at most one
    # active claim per namespace" a database fact on all three backends (NULLs never collide).
    sa.Column("active_namespace", sa.String(NAMESPACE), nullable=True, unique=True),
    _epoch("expires_at"),
    _epoch("created_at"),
    _epoch("updated_at"),
    *_non_negative("limit_"),
    *_non_negative("used_"),
    sa.CheckConstraint("state IN ('active', 'expired')", name="state_known"),
    sa.CheckConstraint(
        "(state = 'active' AND active_namespace = namespace)"
        " OR (state <> 'active' AND active_namespace IS NULL)",
        name="active_namespace_matches_state",
    ),
    sa.Index("ix_claims_namespace", "namespace"),
    **TABLE_ARGS,
)

cluster = sa.Table(
    "cluster",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
    *_counters("total_"),
    *_counters("claimed_"),
    *_counters("unclaimed_used_"),
    _epoch("updated_at"),
    sa.CheckConstraint("id = 1", name="singleton"),
    *_non_negative("total_"),
    *_non_negative("claimed_"),
    *_non_negative("unclaimed_used_"),
    **TABLE_ARGS,
)

#: The id of the one cluster row.
CLUSTER_ID = 1

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", BIG_ID, primary_key=True, autoincrement=True),
    _epoch("at"),
    sa.Column("kind", sa.String(128), nullable=False),
    sa.Column("subject", sa.String(255), nullable=False, server_default=""),
    sa.Column("namespace", sa.String(NAMESPACE), nullable=True),
    sa.Column("level", sa.String(16), nullable=False),
    sa.Column("data", sa.JSON(), nullable=False),
    sa.Index("ix_events_namespace_id", "namespace", "id"),
    sa.Index("ix_events_subject_id", "subject", "id"),
    **TABLE_ARGS,
)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.String(UUID), primary_key=True),
    # The namespace the token acts for; NULL for a token with admin scope.
    sa.Column("namespace", sa.String(NAMESPACE), nullable=True),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    _epoch("created_at"),
    _epoch("revoked_at", nullable=True),
    sa.Index("ix_api_tokens_namespace", "namespace"),
    **TABLE_ARGS,
)
