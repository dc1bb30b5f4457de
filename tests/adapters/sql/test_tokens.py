"""The ledger as a TokenStore: digests in, tokens out, revocation, namespaces kept apart."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.ports import TokenStore
from fleetgate.domain.tokens import digest
from tests.ledgers import START


def test_the_sql_ledger_is_a_token_store(ledger: SqlLedger) -> None:
    assert isinstance(ledger, TokenStore)


async def test_a_created_token_is_found_by_its_digest_only(ledger: SqlLedger) -> None:
    token = await ledger.create_token("team-a", digest("fgt_one"), START)
    assert token.namespace == "team-a" and token.active and token.created_at == START
    found = await ledger.token_by_digest(digest("fgt_one"))
    assert found == token
    assert await ledger.token_by_digest(digest("fgt_two")) is None


async def test_revoking_keeps_the_row_but_marks_it_and_only_once(ledger: SqlLedger) -> None:
    token = await ledger.create_token("team-a", digest("fgt_r"), START)
    later = START + timedelta(minutes=5)
    assert await ledger.revoke_token("team-a", token.id, later)
    assert not await ledger.revoke_token("team-a", token.id, later)
    found = await ledger.token_by_digest(digest("fgt_r"))
    assert found is not None and not found.active and found.revoked_at == later


async def test_a_token_cannot_be_revoked_through_another_namespace(ledger: SqlLedger) -> None:
    token = await ledger.create_token("team-a", digest("fgt_x"), START)
    assert not await ledger.revoke_token("team-b", token.id, START)
    assert not await ledger.revoke_token("team-a", "no-such-id", START)
    assert (await ledger.token_by_digest(digest("fgt_x"))) == token


async def test_listing_is_per_namespace_oldest_first_revoked_included(ledger: SqlLedger) -> None:
    first = await ledger.create_token("team-a", digest("fgt_1"), START)
    second = await ledger.create_token("team-a", digest("fgt_2"), START + timedelta(seconds=1))
    await ledger.create_token("team-b", digest("fgt_3"), START)
    await ledger.revoke_token("team-a", first.id, START + timedelta(seconds=2))
    listed = await ledger.list_tokens("team-a")
    assert [t.id for t in listed] == [first.id, second.id]
    assert [t.active for t in listed] == [False, True]
    assert await ledger.list_tokens("team-c") == []


async def test_bad_input_is_refused_naming_the_field(ledger: SqlLedger) -> None:
    with pytest.raises(ValueError, match="namespace"):
        await ledger.create_token("Not A Namespace", digest("fgt_n"), START)
    with pytest.raises(ValueError, match="token_digest"):
        await ledger.create_token("team-a", "short", START)
