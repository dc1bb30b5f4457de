"""What fleetgate's PostgreSQL functions share: how one is installed, dropped and found current.

A function is installed with a comment naming the digest of the code that wrote it, so the
ledger calls it only while that comment matches the running code (a stale or missing function
is never used: the in-process path serves instead until a migration reinstalls it).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection


def marker(digest: str) -> str:
    """The comment an installed function carries for code of ``digest``."""
    return f"fleetgate {digest}"


def install_statements(signature: str, definition: str, digest: str) -> list[str]:
    """Install (or replace) the function ``definition`` and record ``digest`` on it."""
    return [definition, f"COMMENT ON FUNCTION {signature} IS '{marker(digest)}'"]


def drop_statement(signature: str) -> str:
    """Remove the function ``signature`` (if it is there)."""
    return f"DROP FUNCTION IF EXISTS {signature}"


async def all_current(conn: AsyncConnection, digests: dict[str, str]) -> bool:
    """Whether every function (signature -> digest) is installed with that digest."""
    signatures = list(digests)
    columns = ", ".join(
        f"obj_description(to_regprocedure(:s{i}), 'pg_proc')" for i in range(len(signatures))
    )
    found = await conn.execute(
        sa.text(f"SELECT {columns}"), {f"s{i}": s for i, s in enumerate(signatures)}
    )
    comments = found.one()
    return all(
        comment == marker(digests[s]) for s, comment in zip(signatures, comments, strict=True)
    )
