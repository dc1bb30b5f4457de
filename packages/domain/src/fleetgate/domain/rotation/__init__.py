"""Maintenance-window node rotation: policy, windows, derivation, selection, gates, the machine."""
