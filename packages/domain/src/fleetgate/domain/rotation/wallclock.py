"""Local wall-clock times as real instants, across DST changes.

A window opens when a zone's wall clock reaches its start. Usually that is one instant; on a
fall-back day a wall time happens twice, and on a spring-forward day it never shows, so the
instant where the clock jumps past it is where a window opens or closes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["instants_of_wall_time", "transition_between"]

_ONE_SECOND = timedelta(seconds=1)


def instants_of_wall_time(wall: datetime, zone: ZoneInfo) -> set[datetime]:
    """UTC instants at which the wall clock of ``zone`` reaches or jumps past ``wall``.

    A normal wall time has one instant. A repeated fall-back time has two, and membership also
    flips at the DST transition between them. A spring-forward time never shows on the clock: the
    transition instant, where the clock jumps past it, is where membership changes.
    """
    readings = [wall.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1)]
    real = {r for r in readings if r.astimezone(zone).replace(tzinfo=None) == wall}
    if len(real) != 1:
        real.add(transition_between(min(readings), max(readings), zone))
    return real


def transition_between(low: datetime, high: datetime, zone: ZoneInfo) -> datetime:
    """The first whole second in ``(low, high]`` whose UTC offset differs from ``low``'s."""
    offset = low.astimezone(zone).utcoffset()
    while high - low > _ONE_SECOND:
        middle = low + _ONE_SECOND * (((high - low) // _ONE_SECOND) // 2)
        if middle.astimezone(zone).utcoffset() == offset:
            low = middle
        else:
            high = middle
    return high
