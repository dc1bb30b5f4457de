"""Members compared by identity: what joined, was rebuilt or left between two observations."""

from __future__ import annotations

from dataclasses import replace

from fleetgate.domain.rotation.census_members import MemberMarks, added_and_gone, member_diff
from fleetgate.domain.rotation.cluster import MemberChanges, NodeView


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


def test_the_marks_count_the_not_ready_nodes_from_the_changes_alone() -> None:
    marks = MemberMarks()
    first = (NodeView("a", ready=True), NodeView("b"), NodeView("c"))
    marks.refresh_nodes(first, None)
    assert marks.not_ready == 2
    # "b" becomes Ready (rebuilt in its place), "c" leaves, "d" joins not Ready.
    second = (first[0], replace(first[1], ready=True), NodeView("d"))
    marks.refresh_nodes(second, None)
    assert marks.not_ready == 1 == sum(not n.ready for n in second)
    # Handed over by a gateway: only the changes are read, the rest is not walked.
    third = (second[0], second[1], replace(second[2], ready=True))
    marks.refresh_nodes(third, None)
    assert marks.not_ready == 0
    fourth = (*third, NodeView("e"))
    handed = MemberChanges(0, nodes_added=(fourth[3],))
    marks.refresh_nodes(fourth, handed)
    assert marks.not_ready == 1
