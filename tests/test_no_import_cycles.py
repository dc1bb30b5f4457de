"""Modules import in one direction: no import cycle anywhere in ``fleetgate`` (design.md).

Every import counts, wherever it is written: at module level, inside a function (an import
deferred to call time still ties the two modules together: one cannot be understood, moved or
tested without the other) and under ``if TYPE_CHECKING:``. The graph is read from the source with
``ast``, so nothing is imported to check it. Its nodes are the modules under
``packages/*/src/fleetgate``; an edge is one import of another fleetgate module: ``import a.b``
and ``from a import b`` where ``b`` is a submodule count as importing ``a.b``, ``from a import
name`` of anything else as importing ``a``. A cycle is a strongly connected component of more
than one module, or a module importing itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[1] / "packages"


def module_files(packages: Path) -> dict[str, Path]:
    """Every fleetgate module (dotted name) and its file, over ``packages/*/src``."""
    found: dict[str, Path] = {}
    for path in sorted(packages.glob("*/src/fleetgate/**/*.py")):
        dotted = [*path.relative_to(packages).parts[2:-1], path.stem]  # after "<pkg>/src/"
        if dotted[-1] == "__init__":
            dotted.pop()
        found[".".join(dotted)] = path
    return found


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names, its relative dots resolved."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The fleetgate modules ``module`` imports anywhere in its source (see the docstring)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, is_package, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in known else base)
    return {t for t in targets if t in known}


def import_graph(packages: Path) -> dict[str, set[str]]:
    """Module -> the fleetgate modules it imports."""
    files = module_files(packages)
    known = set(files)
    return {m: imports_of(m, p, known) for m, p in files.items()}


def components(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """The strongly connected components of ``graph`` (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                yield sorted(component)


def one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A cycle through the component's first module, in import order (first module repeated)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first: the shortest way back to ``start``
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{component} is not a cycle")  # pragma: no cover - Tarjan's guarantee


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle for each strongly connected component that has one."""
    return [one_cycle(graph, c) for c in components(graph) if len(c) > 1 or c[0] in graph[c[0]]]


def test_no_module_of_fleetgate_is_part_of_an_import_cycle() -> None:
    graph = import_graph(PACKAGES)
    assert len(graph) > 100  # the tree was found: an empty graph has no cycles either
    found = cycles(graph)
    assert not found, "import cycle(s):\n" + "\n".join(" -> ".join(c) for c in found)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / "pkg" / "src" / "fleetgate" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


@pytest.mark.parametrize(
    "closing",
    [
        "from fleetgate.x import a\n",  # a submodule named in ``from``
        "import fleetgate.x.a\n",
        "from . import a\n",
        "from .a import anything\n",
        "def late():\n    from fleetgate.x.a import anything\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import anything\n",
    ],
)
def test_every_kind_of_import_closes_a_cycle(tmp_path: Path, closing: str) -> None:
    graph = import_graph(
        _tree(
            tmp_path,
            {
                "x/__init__.py": "",
                "x/a.py": "from fleetgate.x import b\n",
                "x/b.py": "import fleetgate.x.c\n",
                "x/c.py": closing,
            },
        )
    )
    assert cycles(graph) == [["fleetgate.x.a", "fleetgate.x.b", "fleetgate.x.c", "fleetgate.x.a"]]


def test_a_module_importing_itself_is_a_cycle(tmp_path: Path) -> None:
    graph = import_graph(_tree(tmp_path, {"x/__init__.py": "", "x/a.py": "from . import a\n"}))
    assert cycles(graph) == [["fleetgate.x.a", "fleetgate.x.a"]]


def test_a_name_from_a_package_imports_the_package_not_its_submodules(tmp_path: Path) -> None:
    graph = import_graph(
        _tree(
            tmp_path,
            {
                "x/__init__.py": "from .a import thing\n",
                "x/a.py": "thing = 1\n",
                "y.py": "from fleetgate.x import thing\nfrom fleetgate import x\n",
            },
        )
    )
    assert graph["fleetgate.y"] == {"fleetgate.x"}
    assert graph["fleetgate.x"] == {"fleetgate.x.a"}
    assert cycles(graph) == []
