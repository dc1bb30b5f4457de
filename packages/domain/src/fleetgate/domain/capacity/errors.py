"""What a capacity ledger raises. Services map these to HTTP statuses; none of them is a refusal.

A refusal for capacity is a *result* (``Admission.denial``), never an exception: only conditions
the caller did not cause by asking for too much raise.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every ledger error."""


class LedgerUnavailable(LedgerError):
    """The database could not complete the operation (unreachable, or retries exhausted).

    Nothing was changed: every operation is one transaction that either commits or rolls back.
    """


class NodeNotFound(LedgerError, LookupError):
    """No node of that name is in the ledger."""

    def __init__(self, name: str) -> None:
        super().__init__(f"node {name!r} is not in the ledger")
        self.name = name


class NodeExists(LedgerError):
    """A node of that name is already in the ledger."""

    def __init__(self, name: str) -> None:
        super().__init__(f"node {name!r} is already in the ledger")
        self.name = name


class NodeBusy(LedgerError):
    """The node still holds placements, so it cannot be removed."""

    def __init__(self, name: str, placements: int) -> None:
        super().__init__(f"node {name!r} still holds {placements} placement(s)")
        self.name = name
        self.placements = placements


class PlacementNotFound(LedgerError, LookupError):
    """No placement with that id (in that namespace) is in the ledger."""

    def __init__(self, placement_id: str) -> None:
        super().__init__(f"placement {placement_id!r} is not in the ledger")
        self.placement_id = placement_id


class GuardMismatch(LedgerError):
    """The database and the domain disagreed about a guard on a locked row: a bug, never retried."""
