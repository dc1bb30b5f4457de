"""Kubernetes label selectors, as a RotationPolicy's ``nodePoolSelector`` uses them (spec §7.9).

``{}`` selects every NodePool with specificity 0; the most specific matching policy governs a
pool. A selector that cannot be compiled matches nothing (and validation reports it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

__all__ = ["OPERATORS", "LabelSelector", "SelectorRequirement", "parse_selector"]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class SelectorRequirement:
    """One ``matchExpressions`` entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """Why this requirement cannot be compiled (empty when it can), without field paths."""
        if not self.key:
            return ["key: must not be empty"]
        if self.operator not in OPERATORS:
            return [f"operator: must be one of {', '.join(OPERATORS)}, got {self.operator!r}"]
        if self.operator in ("In", "NotIn") and not self.values:
            return [f"values: must not be empty for operator {self.operator}"]
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            return [f"values: must be empty for operator {self.operator}"]
        return []

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (assumes it compiles)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present


@dataclass(frozen=True)
class LabelSelector:
    """``matchLabels`` AND every ``matchExpressions`` entry."""

    match_labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    match_expressions: tuple[SelectorRequirement, ...] = ()

    @property
    def specificity(self) -> int:
        """How specific the selector is: ``#matchLabels + #matchExpressions``."""
        return len(self.match_labels) + len(self.match_expressions)

    def errors(self, path: str) -> list[str]:
        """Every reason this selector cannot be compiled, each prefixed with its field path."""
        return [
            f"{path}.matchExpressions[{index}].{problem}"
            for index, requirement in enumerate(self.match_expressions)
            for problem in requirement.problems()
        ]

    @cached_property
    def _compiles(self) -> bool:
        # Asked on every pass of every pool: a selector is a value, checked once.
        return not self.errors("")

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a pool with ``labels`` is selected; an uncompilable selector matches nothing."""
        if not self._compiles:
            return False
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)


# kubectl's ``-l`` text: comma-separated terms, the set-based ones carrying their own commas.
_TERM = re.compile(
    r"\s*(?:(?P<set_key>[^\s,=!()]+)\s+(?P<set_op>in|notin)\s*\((?P<values>[^)]*)\)"
    r"|!(?P<absent>[^\s,=!()]+)"
    r"|(?P<key>[^\s,=!()]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s,=!()]*))?)\s*(?:,|$)"
)


def parse_selector(text: str) -> LabelSelector:
    """A selector from kubectl's ``-l`` syntax: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``,
    ``k in (a,b)``, ``k notin (a,b)``, comma-separated (all must hold).

    Raises ``ValueError`` naming the first term it cannot read.
    """
    labels: dict[str, str] = {}
    requirements: list[SelectorRequirement] = []
    position, text = 0, text.strip()
    while position < len(text):
        term = _TERM.match(text, position)
        if term is None or term.end() == position:
            raise ValueError(f"cannot read the selector at {text[position:]!r}")
        position = term.end()
        if term["set_key"]:
            values = tuple(v.strip() for v in term["values"].split(",") if v.strip())
            operator = "In" if term["set_op"] == "in" else "NotIn"
            requirements.append(SelectorRequirement(term["set_key"], operator, values))
        elif term["absent"]:
            requirements.append(SelectorRequirement(term["absent"], "DoesNotExist"))
        elif term["op"] == "!=":
            requirements.append(SelectorRequirement(term["key"], "NotIn", (term["value"],)))
        elif term["op"]:
            labels[term["key"]] = term["value"]
        else:
            requirements.append(SelectorRequirement(term["key"], "Exists"))
    selector = LabelSelector(match_labels=labels, match_expressions=tuple(requirements))
    problems = selector.errors("selector")
    if problems:
        raise ValueError(problems[0])
    return selector
