"""The policy simulator: the real controller against the fake cluster, in virtual time."""
