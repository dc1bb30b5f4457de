"""Names the API and its client share on the wire, kept apart from both so the client need not
import the server to read them."""

from __future__ import annotations

#: The response header that says whose clock the API's instants are on: ``virtual`` under
#: ``fleetgate up`` (its accelerated clock); absent on a real clock.
CLOCK_HEADER = "Fleetgate-Clock"
VIRTUAL_CLOCK = "virtual"
