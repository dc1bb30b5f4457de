"""``fleetgate.client``: the typed client of the fleetgate HTTP API (its home:
``fleetgate.apps.client.api``)."""

from fleetgate.apps.client.api import (
    DEFAULT_SERVER,
    SERVER_ENV,
    TOKEN_ENV,
    ClientError,
    FleetgateClient,
)

__all__ = ["DEFAULT_SERVER", "SERVER_ENV", "TOKEN_ENV", "ClientError", "FleetgateClient"]
