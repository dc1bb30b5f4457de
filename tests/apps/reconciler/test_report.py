"""The ``--once`` report: the summary, the cluster row, each node, corrected and expired claims."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rich.console import Console

from fleetgate.apps.reconciler.report import claims_table, render
from fleetgate.domain.capacity.claims import Claim, ClaimState
from fleetgate.domain.capacity.dimensions import Resources
from fleetgate.domain.capacity.model import ClusterState
from fleetgate.domain.capacity.reconcile import NodeCounters, PassReport, Snapshot, reconcile

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def claim(cid: str, ns: str, used: Resources, expires_in: int) -> Claim:
    return Claim(
        cid,
        ns,
        Resources(4, 0, 0),
        used,
        ClaimState.ACTIVE,
        NOW + timedelta(seconds=expires_in),
        NOW,
        NOW,
    )


def text(report: PassReport) -> str:
    console = Console(record=True, width=160, color_system=None)
    render(report, console)
    return console.export_text()


def test_the_report_shows_what_the_pass_found_and_fixed() -> None:
    snapshot = Snapshot(
        nodes=[NodeCounters("node-a", Resources(12, 4096, 100), Resources(7, 512, 10), 2.0)],
        node_usage={"node-a": Resources(4, 512, 10)},
        namespace_usage={"ci": Resources(4, 512, 10)},
        charges=[],
        claims=[
            claim("claim-1", "ci", Resources(1, 0, 0), 600),
            claim("claim-2", "old", Resources(), -5),
        ],
        cluster=ClusterState(Resources(12, 4096, 100), Resources(8, 0, 0), Resources(), NOW),
    )
    out = text(PassReport(reconcile(snapshot, NOW, 600), 0.0125, reattributed=2))
    assert "drifted nodes" in out and "12.5 ms" in out
    assert "node-a" in out and "-3 / +0 / +0" in out and "2.00 -> 0.00" in out
    assert "claim-1" in out and "+3 / +512 / +10" in out
    assert "claim-2" in out and "expired" in out
    assert "placements re-attributed" in out


def test_a_clean_empty_pass_has_no_node_or_claim_table() -> None:
    snapshot = Snapshot(
        [], {}, {}, [], [], ClusterState(Resources(), Resources(), Resources(), NOW)
    )
    report = PassReport(reconcile(snapshot, NOW, 600), 0.001)
    out = text(report)
    assert "nodes (cpus" not in out and claims_table(report) is None
    assert "cluster row drifted" in out
