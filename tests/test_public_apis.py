"""Libraries are used through their public API: no module under ``packages/`` imports a private
module or name of a third-party package (a dotted part or a name with a leading underscore), nor
reaches into an imported module's private attribute (``uvicorn._subprocess``, ``typer._click``).

A minor release may change or drop a private name with no notice, and the product would break
with no test failing first. The one way past this test is a recorded decision
(docs/decisions.md) whose module and name go into :data:`ALLOWED`, with a test of their own that
fails loudly when the library changes them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGES = Path(__file__).resolve().parents[1] / "packages"
#: Modules of libraries we use that their documentation does not offer, though their names have
#: no underscore: FastAPI's dependency solver, uvicorn's supervisors and the modules behind the
#: names uvicorn exports at its top level (``uvicorn.Config``, ``uvicorn.Server``).
INTERNAL = ("fastapi.dependencies", "uvicorn.supervisors", "uvicorn.config", "uvicorn.server",
            "uvicorn.protocols", "uvicorn.lifespan", "uvicorn.loops")  # fmt: skip
#: (module path, private import) pairs a decision allows; none today.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def _own_or_standard(module: str) -> bool:
    """fleetgate's own modules, and the standard library's (whose documented names include a
    few with an underscore: ``sys._current_frames``, ``logging._srcfile``)."""
    top = module.split(".")[0]
    return top == "fleetgate" or top in sys.stdlib_module_names


def _private(dotted: str) -> bool:
    if any(dotted == m or dotted.startswith(f"{m}.") for m in INTERNAL):
        return True
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def private_reaches(source: str) -> list[str]:
    """Every private import or private attribute of an imported module in ``source``."""
    tree = ast.parse(source)
    found: list[str] = []
    modules: set[str] = set()  # names bound to an imported module of another package
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _own_or_standard(alias.name):
                    continue
                if _private(alias.name):
                    found.append(f"import {alias.name}")
                modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _own_or_standard(node.module):
                continue
            if _private(node.module):
                found.append(f"from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_a_private_reach_is_found_however_it_is_written() -> None:
    source = """
import typer._click as click
from typer._coercion import build_runtime_param
from typer.core import _TyperParameter
import uvicorn
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from fastapi import _compat
def later():
    from uvicorn.supervisors.multiprocess import Process
    from fastapi.dependencies.utils import request_params_to_args
    from uvicorn import _subprocess
    return uvicorn._types, uvicorn.Config, __name__
from fleetgate.apps import _internal
import os
os._exit
"""
    assert private_reaches(source) == [
        "import typer._click",
        "from typer._coercion import ...",
        "from typer.core import _TyperParameter",
        "from fastapi import _compat",
        "from uvicorn.supervisors.multiprocess import ...",
        "from fastapi.dependencies.utils import ...",
        "from uvicorn import _subprocess",
        "uvicorn._types",
    ]


def test_no_module_of_fleetgate_uses_a_librarys_private_api() -> None:
    files = sorted(PACKAGES.glob("*/src/**/*.py"))
    assert len(files) > 100  # the packages were found
    reaches = {
        (str(path.relative_to(PACKAGES)), reach)
        for path in files
        for reach in private_reaches(path.read_text(encoding="utf-8"))
    }
    assert reaches <= ALLOWED, sorted(reaches - ALLOWED)
