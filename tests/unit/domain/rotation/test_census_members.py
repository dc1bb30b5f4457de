"""Members compared by identity: what joined, was rebuilt or left between two observations."""

from __future__ import annotations

from dataclasses import replace

from fleetgate.domain.rotation.census_members import added_and_gone, member_diff
from fleetgate.domain.rotation.cluster import NodeView


def _nodes(*names: str) -> tuple[NodeView, ...]:
    return tuple(NodeView(name) for name in names)


def test_a_rebuilt_member_in_its_place_is_added_and_gone_without_a_move() -> None:
    before = _nodes("a", "b", "c")
    rebuilt = replace(before[1], ready=True)
    after = (before[0], rebuilt, before[2])
    added, gone, moved = member_diff(before, after)
    assert added == [rebuilt] and gone == [before[1]] and not moved
    assert added[0] is rebuilt and gone[0] is before[1]  # by identity, not by value


def test_a_member_joining_or_leaving_is_a_move() -> None:
    before = _nodes("a", "b")
    joined = NodeView("c")
    added, gone, moved = member_diff(before, (before[1], joined))
    assert added == [joined] and gone == [before[0]] and moved
    added, gone, moved = member_diff(None, before)  # the first observation: all joined
    assert added == list(before) and gone == [] and moved


def test_changes_handed_over_by_the_gateway_are_taken_as_they_are() -> None:
    before, after = _nodes("a"), _nodes("a")
    handed = ((after[0],), ())
    assert added_and_gone(before, after, handed) == handed  # no diff: a rebuilt "a" only
    assert added_and_gone(before, after, None) == ([after[0]], [before[0]])
