"""The one module of shared Hypothesis strategies (claims, inventories, windows, fleets).

Every test that needs generated values imports them from here, so a value's shape is defined once.
"""

from __future__ import annotations
