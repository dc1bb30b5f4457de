"""The rotation controller: the machine's imperative shell, per-pool loop, metrics and events."""
