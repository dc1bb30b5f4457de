"""Capacity admission: dimensions, guards, denials, ranking, the walk, claims, decay and drift."""
