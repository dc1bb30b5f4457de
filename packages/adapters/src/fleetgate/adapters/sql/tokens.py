"""Namespace API tokens in the ledger's ``api_tokens`` table (the TokenStore port).

Only digests are stored. A revoked token keeps its row (``revoked_at`` set) so the admin can list
what existed; authentication treats it as unknown. Each operation is one short transaction, and a
write's audit events (``trail``: never the secret nor its digest) commit in it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetgate.adapters.sql.engine import Store
from fleetgate.adapters.sql.events import Audited
from fleetgate.adapters.sql.schema import api_tokens
from fleetgate.adapters.sql.sqltypes import epoch, instant, maybe_instant
from fleetgate.domain.capacity.model import check_namespace
from fleetgate.domain.tokens import DIGEST_LENGTH, ApiToken


def _token(row: Mapping[Any, Any]) -> ApiToken:
    return ApiToken(
        id=row["id"],
        namespace=row["namespace"],
        created_at=instant(row["created_at"]),
        revoked_at=maybe_instant(row["revoked_at"]),
    )


def _check_digest(token_digest: str) -> str:
    if not isinstance(token_digest, str) or len(token_digest) != DIGEST_LENGTH:
        raise ValueError(f"token_digest: must be {DIGEST_LENGTH} hex characters")
    return token_digest


async def create(
    store: Store,
    namespace: str,
    token_digest: str,
    at: datetime,
    trail: Audited[ApiToken] | None = None,
) -> ApiToken:
    """Insert an active token for ``namespace`` and return it."""
    check_namespace(namespace)
    _check_digest(token_digest)
    token_id = str(uuid.uuid4())

    async def work(conn: AsyncConnection) -> ApiToken:
        await conn.execute(
            sa.insert(api_tokens).values(
                id=token_id, namespace=namespace, token_hash=token_digest, created_at=epoch(at)
            )
        )
        return ApiToken(id=token_id, namespace=namespace, created_at=at)

    return await (trail or Audited(None)).write(store, work, what=f"create a token for {namespace}")


async def by_digest(store: Store, token_digest: str) -> ApiToken | None:
    """The namespace token with this digest, revoked or not; None if there is none."""
    query = sa.select(api_tokens).where(
        api_tokens.c.token_hash == token_digest, api_tokens.c.namespace.is_not(None)
    )

    async def work(conn: AsyncConnection) -> ApiToken | None:
        row = (await conn.execute(query)).mappings().first()
        return None if row is None else _token(row)

    return await store.read(work, what="look up a token")


async def of_namespace(store: Store, namespace: str) -> list[ApiToken]:
    """Every token of ``namespace``, revoked ones included, oldest first."""
    query = (
        sa.select(api_tokens)
        .where(api_tokens.c.namespace == namespace)
        .order_by(api_tokens.c.created_at, api_tokens.c.id)
    )

    async def work(conn: AsyncConnection) -> list[ApiToken]:
        return [_token(r) for r in (await conn.execute(query)).mappings()]

    return await store.read(work, what=f"list the tokens of {namespace}")


async def revoke(
    store: Store,
    namespace: str,
    token_id: str,
    at: datetime,
    trail: Audited[bool] | None = None,
) -> bool:
    """Revoke an active token of ``namespace``; False when there is no such active token."""
    statement = (
        sa.update(api_tokens)
        .where(
            api_tokens.c.id == token_id,
            api_tokens.c.namespace == namespace,
            api_tokens.c.revoked_at.is_(None),
        )
        .values(revoked_at=epoch(at))
    )

    async def work(conn: AsyncConnection) -> bool:
        return (await conn.execute(statement)).rowcount == 1

    return await (trail or Audited(None)).write(store, work, what=f"revoke a token of {namespace}")
