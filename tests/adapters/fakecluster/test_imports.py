"""The fake cluster's modules import one another one way only: no cycle, not even one made of
imports for type hints alone (``if TYPE_CHECKING:``), which hide a room's dependence on the room
that calls it. Read with grimp, import-linter's engine."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

PACKAGE = "fleetgate.adapters.fakecluster"


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import one another in a ring (Tarjan's strongly connected
    components of more than one module, or a module importing itself), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(imports.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            ring = []
            while True:
                member = stack.pop()
                ring.append(member)
                if member == module:
                    break
            if len(ring) > 1 or module in imports.get(module, ()):
                found.append(sorted(ring))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return sorted(found)


def package_imports(root: str, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of it that it imports, hints included."""
    graph = grimp.build_graph(root, exclude_type_checking_imports=False, cache_dir=None)
    modules = {m for m in graph.modules if m.startswith(package + ".")}
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def test_a_ring_of_imports_is_found_however_it_is_made() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_an_import_for_type_hints_alone_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "hinted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "room.py").write_text("from hinted import house\n")
    (package / "house.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from hinted import room\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles(package_imports("hinted", "hinted")) == [["hinted.house", "hinted.room"]]


def test_the_fake_cluster_has_no_import_cycle() -> None:
    imports = package_imports("fleetgate", PACKAGE)
    assert f"{PACKAGE}.lifecycle" in imports[f"{PACKAGE}.cluster"]  # the graph was read
    assert cycles(imports) == []
