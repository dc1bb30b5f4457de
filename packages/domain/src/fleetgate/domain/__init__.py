"""fleetgate's pure domain: every rule of capacity admission and node rotation, with no I/O.

This package imports only the standard library (and tzdata through ``zoneinfo``); the
import-linter contracts in ``pyproject.toml`` hold it to that.
"""
