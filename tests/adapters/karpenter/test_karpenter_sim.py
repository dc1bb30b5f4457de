"""The fake Karpenter's drain against the local API server, as Karpenter's terminator drains:
Pods force-deleted at the node's deadline less their own grace period, with what is left of it;
a do-not-disrupt Pod held until then; the claim's deadline written on it first."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.adapters.clock import VirtualClock
from tests.adapters.karpenter.karpenter_sim import (
    TERMINATION_TIMESTAMP,
    KarpenterSim,
    nodepool,
)
from tests.adapters.karpenter.kubeapi import KubeAPIServer, rfc3339

TGP = timedelta(hours=1)


def _deleting_claim(api: KubeAPIServer, sim: KarpenterSim, clock: VirtualClock) -> tuple[str, str]:
    api.seed(nodepool("pool"))
    claim, node = sim.node("pool", tgp="1h")
    return claim, node


def test_the_deadline_is_written_on_the_claim_and_pods_are_forced_at_it_less_their_grace(
    api: KubeAPIServer, sim: KarpenterSim, clock: VirtualClock
) -> None:
    claim, node = _deleting_claim(api, sim, clock)
    sim.pod("slow", node, {"cpu": "1"}, labels={"app": "web"})
    api.modify("Pod", "slow", lambda p: p["spec"].update(terminationGracePeriodSeconds=600), "apps")
    sim.pod("quick", node, {"cpu": "1"}, labels={"app": "web"})  # the API server's 30 s
    api.seed(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    deleted = clock.now()
    api.delete("NodeClaim", claim)
    deadline = deleted + TGP

    assert sim.terminate() == []
    annotations = (api.get("NodeClaim", claim) or {})["metadata"]["annotations"]
    assert annotations[TERMINATION_TIMESTAMP] == rfc3339(deadline)
    assert sim.forced == [] and ("slow", 429) in sim.evictions

    # At the deadline less 600 s the slow Pod's grace would run past it: deleted regardless of
    # the budget, with exactly what is left; the quick one is still only evicted (and refused).
    clock.set(deadline - timedelta(seconds=599))
    assert sim.terminate() == []
    slow = api.get("Pod", "slow", "apps") or {}
    assert slow["metadata"]["deletionTimestamp"] == rfc3339(deadline)
    assert slow["metadata"]["deletionGracePeriodSeconds"] == 599
    assert not (api.get("Pod", "quick", "apps") or {})["metadata"].get("deletionTimestamp")
    assert sim.forced == [claim]

    clock.set(deadline - timedelta(seconds=29))
    assert sim.terminate() == []  # both Pods terminating now; the node waits for them
    quick = api.get("Pod", "quick", "apps") or {}
    assert quick["metadata"]["deletionGracePeriodSeconds"] == 29

    clock.set(deadline)
    assert sim.terminate() == [claim]  # both gone: the drain ends at the deadline
    assert api.get("Node", node) is None


def test_a_do_not_disrupt_pod_holds_the_drain_until_it_is_forced(
    api: KubeAPIServer, sim: KarpenterSim, clock: VirtualClock
) -> None:
    claim, node = _deleting_claim(api, sim, clock)
    sim.pod("batch", node, {"cpu": "1"}, annotations={"karpenter.sh/do-not-disrupt": "true"})
    sim.pod("web", node, {"cpu": "1"})
    api.delete("NodeClaim", claim)
    deadline = clock.now() + TGP

    assert sim.terminate() == []  # web is evicted; batch is not even tried
    assert api.get("Pod", "web", "apps") is None
    assert sim.held == ["batch"] and [p for p, _ in sim.evictions] == ["web"]
    assert not (api.get("Pod", "batch", "apps") or {})["metadata"].get("deletionTimestamp")

    clock.set(deadline - timedelta(seconds=31))
    assert sim.terminate() == []  # still held: its 30 s grace still fits before the deadline
    clock.set(deadline - timedelta(seconds=29))
    assert sim.terminate() == []
    assert (api.get("Pod", "batch", "apps") or {})["metadata"]["deletionTimestamp"]
    assert sim.forced == [claim]
    clock.set(deadline)
    assert sim.terminate() == [claim]


def test_a_run_out_duration_opt_out_no_longer_holds(
    api: KubeAPIServer, sim: KarpenterSim, clock: VirtualClock
) -> None:
    claim, node = _deleting_claim(api, sim, clock)
    sim.pod("batch", node, {"cpu": "1"}, annotations={"karpenter.sh/do-not-disrupt": "10m"})
    api.modify(
        "Pod",
        "batch",
        lambda p: p["status"].update(startTime=rfc3339(clock.now())),
        "apps",
    )
    api.delete("NodeClaim", claim)
    assert sim.terminate() == [] and sim.held == ["batch"]
    clock.advance(timedelta(minutes=10))
    assert sim.terminate() == [claim]  # evicted once its opt-out ran out, not forced
    assert sim.forced == [] and ("batch", 201) in sim.evictions
