"""The SQLite room: its dialect plugin. Generic code reaches it only through ``DialectSupport``."""
