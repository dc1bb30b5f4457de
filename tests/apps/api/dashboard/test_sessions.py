"""Dashboard sessions: opaque, expiring, bounded, and revoked with the token that opened them."""

from __future__ import annotations

import pytest

from fleetgate.apps.api.dashboard.sessions import Sessions

TOKEN = "dashboard-admin-token-0123"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_id_is_random_and_reveals_nothing_of_the_token() -> None:
    sessions = Sessions()
    a, b = sessions.open(TOKEN), sessions.open(TOKEN)
    assert a != b and TOKEN not in a and len(a) >= 40
    assert sessions.principal(a, TOKEN) == "admin"


def test_a_session_expires_after_its_ttl() -> None:
    clock = Clock()
    sessions = Sessions(ttl=60, clock=clock)
    sid = sessions.open(TOKEN)
    clock.now += 59
    assert sessions.principal(sid, TOKEN) == "admin"
    clock.now += 1
    assert sessions.principal(sid, TOKEN) is None
    assert len(sessions) == 0


def test_revoking_the_token_ends_its_sessions_only() -> None:
    sessions = Sessions()
    mine, other = sessions.open(TOKEN), sessions.open("another-admin-token")
    assert sessions.revoke(TOKEN) == 1
    assert sessions.principal(mine, TOKEN) is None
    assert sessions.principal(other, "another-admin-token") == "admin"


def test_a_session_is_only_good_while_its_token_is_the_admin_token() -> None:
    sessions = Sessions()
    sid = sessions.open(TOKEN)
    assert sessions.principal(sid, "a-new-admin-token") is None
    assert sessions.principal(sid, TOKEN) is None  # dropped for good, not only refused once
    assert sessions.principal(sessions.open(TOKEN), None) is None  # no admin token: nobody


def test_the_store_is_bounded_and_drops_the_oldest() -> None:
    sessions = Sessions(limit=3)
    ids = [sessions.open(TOKEN) for _ in range(4)]
    assert len(sessions) == 3
    assert sessions.principal(ids[0], TOKEN) is None
    assert all(sessions.principal(i, TOKEN) == "admin" for i in ids[1:])


def test_nonsense_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="ttl"):
        Sessions(ttl=0)
