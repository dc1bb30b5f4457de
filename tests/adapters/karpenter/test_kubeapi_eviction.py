"""The local API server's Eviction API and PodDisruptionBudget status, as a real server's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.adapters.karpenter.karpenter_sim import KarpenterSim, nodepool
from tests.adapters.karpenter.kubeapi import KubeAPIServer
from tests.adapters.karpenter.kubeapi_eviction import NAME_MISMATCH, TOO_MANY, TWO_BUDGETS

PODS = "/api/v1/namespaces/apps/pods"


def budget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


@pytest.fixture
async def http(api: KubeAPIServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(api.url) as session:
        yield session


@pytest.fixture
def web(api: KubeAPIServer, sim: KarpenterSim) -> list[str]:
    """Two Ready replicas of ``app: web`` on one node; their names."""
    api.seed(nodepool("pool"))
    _, node = sim.node("pool")
    for name in ("web-0", "web-1"):
        sim.pod(name, node, {"cpu": "1"}, labels={"app": "web"})
    return ["web-0", "web-1"]


async def _evict(http: aiohttp.ClientSession, pod: str, **options: Any) -> tuple[int, Any]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
    if options:
        body["deleteOptions"] = options
    async with http.post(f"{PODS}/{pod}/eviction", json=body) as response:
        return response.status, await response.json()


async def test_a_budget_with_room_lets_one_pod_go_then_refuses_the_next(
    api: KubeAPIServer, http: aiohttp.ClientSession, web: list[str]
) -> None:
    api.seed(budget("web", minAvailable=1))
    status = api.get("PodDisruptionBudget", "web", "apps")["status"]  # type: ignore[index]
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (
        2,
        2,
        1,
    )

    assert (await _evict(http, "web-0", gracePeriodSeconds=0))[0] == 201
    assert api.get("Pod", "web-0", "apps") is None
    code, answer = await _evict(http, "web-1")

    assert (code, answer["reason"], answer["message"]) == (429, "TooManyRequests", TOO_MANY)
    assert api.get("Pod", "web-1", "apps") is not None  # refused: nothing changed
    status = api.get("PodDisruptionBudget", "web", "apps")["status"]  # type: ignore[index]
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (1, 0)


async def test_a_percentage_budget_rounds_up(
    api: KubeAPIServer, http: aiohttp.ClientSession, web: list[str]
) -> None:
    api.seed(budget("web", maxUnavailable="10%"))  # 10% of 2 rounds up to 1
    assert (await _evict(http, "web-0"))[0] == 201


async def test_a_pod_under_two_budgets_is_a_500_and_a_wrong_uid_a_409(
    api: KubeAPIServer, http: aiohttp.ClientSession, web: list[str]
) -> None:
    code, _ = await _evict(http, "web-0", preconditions={"uid": "not-its-uid"})
    assert code == 409
    api.seed(budget("a", maxUnavailable=1))
    api.seed(budget("b", maxUnavailable=1))
    code, answer = await _evict(http, "web-0")
    assert (code, answer["message"]) == (500, TWO_BUDGETS)


async def test_a_pending_or_terminating_pod_goes_whatever_the_budget(
    api: KubeAPIServer, http: aiohttp.ClientSession, web: list[str]
) -> None:
    api.seed(budget("web", maxUnavailable=0))
    api.modify("Pod", "web-0", lambda p: p.update(status={"phase": "Pending"}), namespace="apps")
    assert (await _evict(http, "web-0"))[0] == 201
    assert (await _evict(http, "web-1"))[0] == 429


async def test_an_unhealthy_pod_goes_only_as_its_policy_allows(
    api: KubeAPIServer, http: aiohttp.ClientSession, web: list[str]
) -> None:
    # web-1 Running but not Ready: with minAvailable 2 the budget is not healthy, so under the
    # default IfHealthyBudget it stays; under AlwaysAllow it goes.
    api.modify("Pod", "web-1", lambda p: p["status"].update(conditions=[]), namespace="apps")
    api.seed(budget("web", minAvailable=2))
    assert (await _evict(http, "web-1"))[0] == 429
    api.modify(
        "PodDisruptionBudget",
        "web",
        lambda b: b["spec"].update(unhealthyPodEvictionPolicy="AlwaysAllow"),
        namespace="apps",
    )
    assert (await _evict(http, "web-1"))[0] == 201


async def test_a_budget_is_judged_before_a_uid_precondition(
    api: KubeAPIServer, http: aiohttp.ClientSession, web: list[str]
) -> None:
    # EvictionREST.Create checks the budget first; the UID precondition is the delete's own.
    api.seed(budget("web", maxUnavailable=0))
    code, answer = await _evict(http, "web-0", preconditions={"uid": "not-its-uid"})
    assert (code, answer["reason"]) == (429, "TooManyRequests")
    assert api.get("Pod", "web-0", "apps") is not None


@pytest.mark.parametrize("named", ["web-1", "", None])
async def test_an_eviction_naming_another_pod_is_a_400_before_anything_else(
    api: KubeAPIServer, http: aiohttp.ClientSession, web: list[str], named: str | None
) -> None:
    api.seed(budget("web", maxUnavailable=0))  # would be a 429: the name is judged first
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {}}
    if named is not None:
        body["metadata"]["name"] = named
    async with http.post(f"{PODS}/web-0/eviction", json=body) as response:
        answer = await response.json()
    assert (response.status, answer["reason"], answer["message"]) == (
        400,
        "BadRequest",
        NAME_MISMATCH,
    )
    assert api.get("Pod", "web-0", "apps") is not None and api.get("Pod", "web-1", "apps")
    # Even for a Pod that does not exist, the name is judged before the look-up.
    async with http.post(f"{PODS}/nobody/eviction", json=body) as response:
        assert response.status == 400


@pytest.mark.parametrize(("ready_left", "code"), [(0, 429), (1, 201)])
async def test_an_unhealthy_pod_under_a_budget_desiring_none_needs_a_healthy_one(
    api: KubeAPIServer,
    http: aiohttp.ClientSession,
    web: list[str],
    ready_left: int,
    code: int,
) -> None:
    # maxUnavailable 100%: DesiredHealthy 0, so the IfHealthyBudget shortcut does not apply and
    # checkAndDecrement needs DisruptionsAllowed (= CurrentHealthy) above 0.
    api.modify("Pod", "web-1", lambda p: p["status"].update(conditions=[]), namespace="apps")
    if not ready_left:
        api.modify("Pod", "web-0", lambda p: p["status"].update(conditions=[]), namespace="apps")
    api.seed(budget("web", maxUnavailable="100%"))
    status = api.get("PodDisruptionBudget", "web", "apps")["status"]  # type: ignore[index]
    assert (status["desiredHealthy"], status["currentHealthy"]) == (0, ready_left)
    assert (await _evict(http, "web-1"))[0] == code
