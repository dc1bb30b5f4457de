"""The capacity reconciler: its loop, metrics, report and command."""
