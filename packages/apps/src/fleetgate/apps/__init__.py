"""fleetgate's applications: composition root, services, API, controller, reconciler, simulator,
and the CLI."""
