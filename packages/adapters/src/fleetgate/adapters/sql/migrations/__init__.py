"""Alembic migrations of the ledger schema (run by ``fleetgate db upgrade`` and ledger start)."""
