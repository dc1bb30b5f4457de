"""The seeded API the client's command tests run against (``seeded.base``); a module may bring
its own ``base`` (``test_verbs`` runs on the database under test)."""

from tests.apps.client.seeded import base

__all__ = ["base"]
