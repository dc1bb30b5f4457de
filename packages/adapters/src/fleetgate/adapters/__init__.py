"""fleetgate's adapters: each one a pluggy plugin registered through the ``fleetgate`` entry points."""
