"""fleetgate's adapters: each a pluggy plugin registered through the ``fleetgate`` entry points."""
