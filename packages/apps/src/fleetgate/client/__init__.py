"""``fleetgate.client``: the typed client of the fleetgate HTTP API (``fleetgate.apps.client``)."""

from fleetgate.apps.client import (
    DEFAULT_SERVER,
    SERVER_ENV,
    TOKEN_ENV,
    ClientError,
    FleetgateClient,
)

__all__ = ["DEFAULT_SERVER", "SERVER_ENV", "TOKEN_ENV", "ClientError", "FleetgateClient"]
