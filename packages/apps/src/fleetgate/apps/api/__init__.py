"""The HTTP API: ``create_app(container)`` in ``app``, served by ``fleetgate api`` (``server``)."""
