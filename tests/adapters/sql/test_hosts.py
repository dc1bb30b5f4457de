"""A database URL that lists several hosts (issue 29 item 4): the ledger connects to the first
that serves, on MariaDB (the plugin's own connect, hosts in order) and on PostgreSQL (asyncpg's,
with ``target_session_attrs``). Here the first host is a port nothing listens on.

The failover tests (``test_failover.py``) kill a real server under load; this checks the URL form
on the machine's own server in every backend session.
"""

from __future__ import annotations

import pytest
from sqlalchemy import make_url

from fleetgate.adapters import plugins
from fleetgate.adapters.sql.ledger import SqlLedger
from fleetgate.domain.capacity.dimensions import Capacity, Resources
from fleetgate.domain.capacity.model import AdmitRequest, NodeSpec
from tests.clusters import free_ports
from tests.conftest import Backend
from tests.ledgers import open_ledger


def several_hosts(url: str) -> str:
    """``url`` with a dead host first and its own host second, as ``?host=`` parameters."""
    parsed = make_url(url)
    dead = free_ports(1)[0]
    default = 3306 if parsed.get_backend_name() == "mysql" else 5432
    # A server reached through its Unix socket (pgserver's PostgreSQL 16) names the socket's
    # directory in ``host=`` and no port: asyncpg takes it with the default port as the host.
    socket = parsed.query.get("host")
    own = (
        f"{socket}:{parsed.port or default}"
        if socket
        else f"{parsed.host}:{parsed.port or default}"
    )
    hosts = f"host=127.0.0.1:{dead}&host={own}"
    base = parsed.set(host=None, port=None, query={}).render_as_string(hide_password=False)
    extra = "&target_session_attrs=read-write" if parsed.get_backend_name() == "postgresql" else ""
    return f"{base}?{hosts}{extra}"


async def test_the_ledger_connects_through_the_first_host_that_serves(backend: Backend) -> None:
    if backend.kind == "sqlite":
        pytest.skip("a file has no hosts; the servers' URLs are tested here")
    url = several_hosts(backend.url)
    async with open_ledger(Backend(url=url, kind=backend.kind)) as ledger:
        assert isinstance(ledger, SqlLedger)
        await ledger.add_node(NodeSpec("a", Capacity(4, 1000, 10)))
        admission = await ledger.admit(AdmitRequest("team", "a", Resources(1, 1, 1)))
        assert admission.placement is not None
        assert [p.id for p in await ledger.placements("team")] == [admission.placement.id]


async def test_a_url_whose_hosts_all_refuse_is_unavailable(backend: Backend) -> None:
    if backend.kind == "sqlite":
        pytest.skip("a file has no hosts; the servers' URLs are tested here")
    from fleetgate.domain.capacity.errors import LedgerUnavailable

    first, second = free_ports(2)
    parsed = make_url(backend.url)
    base = parsed.set(host=None, port=None, query={}).render_as_string(hide_password=False)
    url = f"{base}?host=127.0.0.1:{first}&host=127.0.0.1:{second}"
    options = {**backend.ledger_options(), "migrate": False}
    ledger = plugins.make_ledger(plugins.plugin_manager(), url, options, None)
    assert isinstance(ledger, SqlLedger)
    try:
        with pytest.raises(LedgerUnavailable):
            await ledger.start()
    finally:
        await ledger.close()
