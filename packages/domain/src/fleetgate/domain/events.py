"""Audit and operator events: the values every part of fleetgate reports through an EventSink."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Level(StrEnum):
    """How loudly an event should be surfaced (mirrors log levels and Kubernetes event types)."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Event:
    """One thing that happened, named exactly as the specs name it (e.g. ``instance placed``).

    ``subject`` is what the event is about (a placement id, a node, a NodePool); ``namespace`` is
    set when the event belongs to a tenant so that tenant can read it back through the API.
    """

    kind: str
    at: datetime
    subject: str = ""
    namespace: str | None = None
    level: Level = Level.INFO
    data: dict[str, Any] = field(default_factory=dict)
