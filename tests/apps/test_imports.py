"""The apps' modules import one another one way only: no cycle in ``fleetgate.apps``, not even
one of imports inside a function or for type hints alone (``if TYPE_CHECKING:``). Read with
grimp, as the fake cluster's rooms are."""

from __future__ import annotations

from tests.adapters.fakecluster.test_imports import cycles, package_imports


def test_the_apps_have_no_import_cycle() -> None:
    imports = package_imports("fleetgate", "fleetgate.apps")
    assert "fleetgate.apps.cli.main" in imports  # the graph was read
    assert cycles(imports) == []


def test_the_graph_holds_function_level_and_type_checking_imports() -> None:
    imports = package_imports("fleetgate", "fleetgate.apps")
    # reads imports the watch inside a command; verbs imports the client's API for hints alone.
    assert "fleetgate.apps.client.watch" in imports["fleetgate.apps.client.reads"]
    assert "fleetgate.apps.client.api" in imports["fleetgate.apps.client.verbs"]
