"""Lists at a resourceVersion: the local API server answers 410, 504 and 422 where a real one
would (kubeapi_lists' model: the history is etcd's, ``compact()`` its compaction)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.adapters.karpenter.kubeapi import KubeAPIServer
from tests.adapters.karpenter.kubeapi_lists import EXPIRED, INCONSISTENT_CONTINUE

NODES = "/api/v1/nodes"


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}


@pytest.fixture
async def http(api: KubeAPIServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(api.url) as session:
        yield session


async def _list(http: aiohttp.ClientSession, **query: Any) -> tuple[int, Any]:
    params = {k: str(v) for k, v in query.items()}
    async with http.get(NODES, params=params) as response:
        return response.status, await response.json()


def _names(answer: Any) -> list[str]:
    return [i["metadata"]["name"] for i in answer["items"]]


async def test_an_exact_list_reads_the_past_until_it_is_compacted(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    api.seed(node("a"))
    before = api.resource_version
    api.seed(node("b"))
    api.delete("Node", "a")

    code, answer = await _list(http, resourceVersion=before, resourceVersionMatch="Exact")
    assert code == 200 and _names(answer) == ["a"]
    assert answer["metadata"]["resourceVersion"] == str(before)
    # Not older than: the current state, stamped with the current revision.
    code, answer = await _list(http, resourceVersion=before)
    assert code == 200 and _names(answer) == ["b"]
    assert answer["metadata"]["resourceVersion"] == str(api.resource_version)

    api.compact()
    code, answer = await _list(http, resourceVersion=before, resourceVersionMatch="Exact")
    assert (code, answer["reason"], answer["message"]) == (410, "Expired", EXPIRED)
    # With a limit and no match, the server reads exactly too (the legacy corner case).
    code, answer = await _list(http, resourceVersion=before, limit=10)
    assert (code, answer["reason"]) == (410, "Expired")
    # Served from the watch cache: never a 410.
    for query in ({"resourceVersion": before}, {"resourceVersion": "0"}, {}):
        code, answer = await _list(http, **query)
        assert code == 200 and _names(answer) == ["b"]


async def test_a_continue_token_reads_on_at_its_revision_then_expires(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    for name in ("a", "b", "c", "d"):
        api.seed(node(name))
    code, first = await _list(http, limit=2)
    assert code == 200 and _names(first) == ["a", "b"]
    token = first["metadata"]["continue"]
    api.delete("Node", "c")  # after the first page: the snapshot still has it

    code, second = await _list(http, limit=2, **{"continue": token})
    assert code == 200 and _names(second) == ["c", "d"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]

    api.compact()
    code, gone = await _list(http, limit=2, **{"continue": token})
    assert (code, gone["reason"], gone["message"]) == (410, "Expired", INCONSISTENT_CONTINUE)
    # The 410 carries a token that goes on from the same place at the current revision.
    code, rest = await _list(http, limit=2, **{"continue": gone["metadata"]["continue"]})
    assert code == 200 and _names(rest) == ["d"]


async def test_a_revision_not_yet_reached_is_a_504(
    api: KubeAPIServer, http: aiohttp.ClientSession
) -> None:
    future = api.resource_version + 100
    for query in ({}, {"resourceVersionMatch": "Exact"}, {"resourceVersionMatch": "NotOlderThan"}):
        code, answer = await _list(http, resourceVersion=future, **query)
        assert (code, answer["reason"]) == (504, "Timeout")
        assert "Too large resource version" in answer["message"]


@pytest.mark.parametrize(
    ("query", "code", "says"),
    [
        ({"resourceVersionMatch": "Exact"}, 422, "forbidden unless resourceVersion is provided"),
        ({"resourceVersion": "0", "resourceVersionMatch": "Exact"}, 422, '"0"'),
        ({"resourceVersion": "5", "resourceVersionMatch": "Newest"}, 422, "Unsupported value"),
        (
            {"continue": "x", "resourceVersionMatch": "Exact", "resourceVersion": "5"},
            422,
            "continue",
        ),
        ({"continue": "x", "resourceVersion": "5"}, 400, "not allowed when using continue"),
        ({"continue": "not-a-token"}, 400, "continue key is not valid"),
        ({"resourceVersion": "soon"}, 400, "invalid resource version"),
    ],
)
async def test_list_options_the_real_server_refuses(
    api: KubeAPIServer, http: aiohttp.ClientSession, query: dict[str, str], code: int, says: str
) -> None:
    status, answer = await _list(http, **query)
    assert status == code and says in answer["message"]
