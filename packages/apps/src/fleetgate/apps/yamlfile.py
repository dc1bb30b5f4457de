"""Reading an input file as YAML, with an unreadable file or a syntax error as one line.

PyYAML's own message spans several lines (the context, the mark, a caret); an operator needs the
line, the column and the problem. Every file fleetgate reads as YAML (a policy, a fleet file, a
ledger snapshot) reports its errors this way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["YamlFileError", "describe_yaml_error", "read_yaml"]


class YamlFileError(ValueError):
    """The file cannot be read, or is not YAML: one line, without the file's name."""


def describe_yaml_error(exc: yaml.YAMLError) -> str:
    """'invalid YAML at line L, column C: problem' for a YAML syntax error."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def read_yaml(path: Path) -> Any:
    """The (single) YAML or JSON document in ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise YamlFileError(f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise YamlFileError(f"not UTF-8 text ({exc.reason})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise YamlFileError(describe_yaml_error(exc)) from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise YamlFileError("invalid YAML: nested too deeply") from None
    except ValueError as exc:  # a timestamp that is no date (2024-02-30)
        raise YamlFileError(f"invalid YAML: {exc}") from None
