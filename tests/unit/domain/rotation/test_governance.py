"""Which policy governs a pool (spec §7.9 "Resolution")."""

from __future__ import annotations

from datetime import timedelta

from fleetgate.domain.rotation.governance import Status, govern
from fleetgate.domain.rotation.labelselector import LabelSelector, SelectorRequirement
from fleetgate.domain.rotation.policy import RotationPolicy, Surge
from fleetgate.domain.rotation.windows import MaintenanceWindow

WINDOW = (MaintenanceWindow("UTC", ("Sun",), "00:00", "04:00"),)
LABELS = {"team": "web", "tier": "front"}


def pol(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    expressions: tuple[SelectorRequirement, ...] = (),
    **kw: object,
) -> RotationPolicy:
    return RotationPolicy(
        name=name,
        node_pool_selector=LabelSelector(labels or {}, expressions),
        maintenance_windows=WINDOW,
        **kw,
    )  # type: ignore[arg-type]


def test_no_matching_policy_leaves_the_pool_ungoverned() -> None:
    gov = govern(LABELS, [pol("other", {"team": "db"})], None)
    assert gov.status is Status.UNGOVERNED and gov.resolved is None


def test_the_most_specific_selector_wins() -> None:
    policies = [
        pol("all"),
        pol("team", {"team": "web"}),
        pol("both", {"team": "web"}, expressions=(SelectorRequirement("tier", "In", ("front",)),)),
    ]
    gov = govern(LABELS, policies, timedelta(hours=1))
    assert gov.governed and gov.winner == "both"
    assert gov.resolved is not None and gov.resolved.tgp == timedelta(hours=1)


def test_a_tie_at_the_top_is_a_conflict_naming_the_tied_policies() -> None:
    gov = govern(LABELS, [pol("b", {"team": "web"}), pol("a", {"tier": "front"}), pol("c")], None)
    assert gov.status is Status.CONFLICT and "['a', 'b']" in gov.detail


def test_an_invalid_winner_is_a_conflict_not_a_fallback_to_the_next_policy() -> None:
    bad = pol("bad", {"team": "web"}, surge=Surge(ready_timeout=timedelta(0)))
    gov = govern(LABELS, [bad, pol("fallback")], None)
    assert gov.status is Status.CONFLICT and gov.winner == "bad"
    assert "readyTimeout" in gov.detail


def test_a_missing_selector_selects_nothing() -> None:
    none = RotationPolicy(name="none", node_pool_selector=None, maintenance_windows=WINDOW)
    assert govern(LABELS, [none], None).status is Status.UNGOVERNED
