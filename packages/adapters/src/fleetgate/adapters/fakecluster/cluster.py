"""The fake cluster (shell: the rotation-controller issue fills it in)."""

from __future__ import annotations

from typing import Any


class FakeCluster:
    """An in-memory cluster on a virtual clock; not implemented yet."""

    def __init__(self, clock: Any, **options: Any) -> None:
        self.clock = clock
        self.options = options
