"""Token digests: what the store keeps instead of the secret, and the constant-time comparisons."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from fleetgate.domain import tokens

AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_digest_is_sha256_hex_of_the_secret() -> None:
    # The SHA-256 of "abc" is a published test vector (FIPS 180-2).
    assert tokens.digest("abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert len(tokens.digest("fgt_x")) == tokens.DIGEST_LENGTH


@given(st.text(max_size=80), st.text(max_size=80))
def test_a_secret_matches_its_own_digest_and_no_other(a: str, b: str) -> None:
    assert tokens.matches(a, tokens.digest(a))
    assert tokens.matches(b, tokens.digest(a)) == (a == b)


@given(st.text(max_size=40), st.text(max_size=40))
def test_same_secret_is_equality(a: str, b: str) -> None:
    assert tokens.same_secret(a, b) == (a == b)


def test_a_token_is_active_until_revoked() -> None:
    token = tokens.ApiToken(id="1", namespace="team-a", created_at=AT)
    assert token.active
    assert not tokens.ApiToken(id="1", namespace="team-a", created_at=AT, revoked_at=AT).active
