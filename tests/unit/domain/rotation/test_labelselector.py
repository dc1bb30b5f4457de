"""nodePoolSelector: matching, specificity, and uncompilable selectors that match nothing."""

from __future__ import annotations

import pytest

from fleetgate.domain.rotation.labelselector import (
    LabelSelector,
    SelectorRequirement,
    parse_selector,
)

POOL = {"team": "web", "tier": "gold"}


def test_empty_selector_matches_everything_with_specificity_zero() -> None:
    assert LabelSelector().matches({}) and LabelSelector().matches(POOL)
    assert LabelSelector().specificity == 0


@pytest.mark.parametrize(
    ("requirement", "matches"),
    [
        (SelectorRequirement("tier", "In", ("gold", "silver")), True),
        (SelectorRequirement("tier", "In", ("bronze",)), False),
        (SelectorRequirement("tier", "NotIn", ("bronze",)), True),
        (SelectorRequirement("absent", "NotIn", ("x",)), True),
        (SelectorRequirement("tier", "Exists"), True),
        (SelectorRequirement("absent", "Exists"), False),
        (SelectorRequirement("absent", "DoesNotExist"), True),
        (SelectorRequirement("tier", "DoesNotExist"), False),
    ],
)
def test_expressions(requirement: SelectorRequirement, matches: bool) -> None:
    assert LabelSelector(match_expressions=(requirement,)).matches(POOL) is matches


def test_labels_and_expressions_all_apply() -> None:
    selector = LabelSelector({"team": "web"}, (SelectorRequirement("tier", "In", ("gold",)),))
    assert selector.matches(POOL) and selector.specificity == 2
    assert not selector.matches({"team": "web", "tier": "silver"})
    assert not LabelSelector({"team": "db"}).matches(POOL)


@pytest.mark.parametrize(
    ("requirement", "problem"),
    [
        (SelectorRequirement("", "Exists"), "key: must not be empty"),
        (
            SelectorRequirement("a", "Equals", ("x",)),
            "operator: must be one of In, NotIn, Exists, DoesNotExist, got 'Equals'",
        ),
        (SelectorRequirement("a", "NotIn"), "values: must not be empty for operator NotIn"),
        (SelectorRequirement("a", "Exists", ("x",)), "values: must be empty for operator Exists"),
    ],
)
def test_uncompilable_selector_is_reported_and_matches_nothing(requirement, problem) -> None:
    selector = LabelSelector(match_expressions=(requirement,))
    assert selector.errors("spec.nodePoolSelector") == [
        f"spec.nodePoolSelector.matchExpressions[0].{problem}"
    ]
    assert not selector.matches(POOL) and not selector.matches({})


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("", {"a": "1"}, True),
        ("tier=gold", {"tier": "gold"}, True),
        ("tier==gold", {"tier": "silver"}, False),
        ("tier!=gold", {}, True),  # as kubectl: an absent key is "not gold"
        ("tier!=gold", {"tier": "gold"}, False),
        ("tier", {"tier": ""}, True),
        ("!tier", {"tier": "gold"}, False),
        ("zone in (a, b),tier=gold", {"zone": "b", "tier": "gold"}, True),
        ("zone notin (a,b)", {"zone": "a"}, False),
        ("zone in (a,b), !gpu", {"zone": "a", "gpu": "yes"}, False),
    ],
)
def test_parse_selector_reads_kubectl_syntax(
    text: str, labels: dict[str, str], matches: bool
) -> None:
    assert parse_selector(text).matches(labels) is matches


@pytest.mark.parametrize("text", ["=gold", "zone in ()", "a=b=c", "tier gold"])
def test_parse_selector_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError, match="selector"):
        parse_selector(text)
