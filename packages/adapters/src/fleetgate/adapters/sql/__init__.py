"""The SQL capacity ledger: one implementation for SQLite, MariaDB and PostgreSQL."""
