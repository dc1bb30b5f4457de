"""RotationPolicy manifests from YAML files (or YAML text), with errors naming file and field.

YAML is read the way Kubernetes tooling reads it, not as YAML 1.1: an unquoted ``12:00`` stays
the string "12:00" (PyYAML would otherwise read it as the base-60 integer 720) and an unquoted
instant stays a string for the strict RFC3339 reader. A file may hold several documents
(``---``); every non-empty one must be a RotationPolicy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from fleetgate.apps.yamlfile import describe_yaml_error
from fleetgate.domain.rotation.manifest import policy_from_manifest
from fleetgate.domain.rotation.policy import PolicyError, RotationPolicy

__all__ = [
    "PolicyFileError",
    "load_policies",
    "load_policy",
    "policies_from_text",
]


class PolicyFileError(ValueError):
    """A policy file that cannot be used; ``errors`` lists every problem, each naming the file."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(self.errors))


class _KubernetesLoader(yaml.SafeLoader):
    """SafeLoader without YAML 1.1's base-60 numbers and implicit timestamps."""


_INT = re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"
)
_FLOAT = re.compile(
    r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_DROPPED = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp"}
_KubernetesLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_KubernetesLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_KubernetesLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def load_policy(path: Path) -> RotationPolicy:
    """The one RotationPolicy in ``path``; raises :class:`PolicyFileError` otherwise."""
    policies = load_policies(path)
    if len(policies) != 1:
        raise PolicyFileError([f"{path}: expected one RotationPolicy, found {len(policies)}"])
    return policies[0]


def load_policies(path: Path) -> list[RotationPolicy]:
    """Every RotationPolicy in ``path`` (one per YAML document), validated."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyFileError([f"{path}: cannot read: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise PolicyFileError([f"{path}: not UTF-8 text ({exc.reason})"]) from exc
    return policies_from_text(text, str(path))


def policies_from_text(text: str, source: str = "<policy>") -> list[RotationPolicy]:
    """Every RotationPolicy in YAML ``text``; errors are prefixed with ``source``."""
    try:
        documents = [(d, node) for d, node in _documents(text) if d is not None]
    except yaml.YAMLError as exc:
        raise PolicyFileError([f"{source}: {describe_yaml_error(exc)}"]) from exc
    except RecursionError:  # PyYAML composes nested collections recursively
        raise PolicyFileError([f"{source}: invalid YAML: nested too deeply"]) from None
    if not documents:
        raise PolicyFileError([f"{source}: contains no RotationPolicy"])
    policies: list[RotationPolicy] = []
    errors: list[str] = []
    for index, (document, node) in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} (document {index + 1})"
        stranger = _not_a_manifest(document, node)
        if stranger is not None:
            errors.append(f"{where}: {stranger}")
            continue
        try:
            policies.append(policy_from_manifest(document))
        except PolicyError as exc:
            errors += [f"{where}: {error}" for error in exc.errors]
    if errors:
        raise PolicyFileError(errors)
    return policies


#: The top-level keys of a RotationPolicy manifest. YAML that has none of them is some other
#: text (pasted by mistake: ``::: not yaml`` reads as the mapping ``{"::": "not yaml"}``), said
#: in one line with where it starts, not as an unknown field and three missing ones.
MANIFEST_KEYS = ("apiVersion", "kind", "metadata", "spec")


def _documents(text: str) -> list[tuple[Any, yaml.Node]]:
    """Each YAML document of ``text`` as data, with its node (which knows its line/column)."""
    loader = _KubernetesLoader(text)
    try:
        found = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                found.append((loader.construct_document(node), node))
        return found
    finally:
        loader.dispose()


def _not_a_manifest(document: Any, node: yaml.Node) -> str | None:
    """Why ``document`` is no manifest at all (None when it may be one: the manifest's own
    reader then names each field)."""
    if isinstance(document, dict) and any(key in document for key in MANIFEST_KEYS):
        return None
    mark = node.start_mark
    if isinstance(document, dict):
        keys = ", ".join(repr(str(key)) for key in list(document)[:3])
        more = ", ..." if len(document) > 3 else ""
        found = f"a mapping of {keys}{more}"
    elif isinstance(document, list):
        found = "a list"
    else:
        kind = "text" if isinstance(document, str) else "value"
        found = f"the {kind} {str(document)[:40]!r}"
    return (
        f"line {mark.line + 1}, column {mark.column + 1}: not a RotationPolicy manifest: "
        f"the YAML reads as {found}, not a mapping of {', '.join(MANIFEST_KEYS)}"
    )
