"""What the local API server means by a patch and a selector: the Kubernetes rules it follows.

JSON merge patch (RFC 7386) and JSON patch (RFC 6902) as the API server applies them, label
selectors (``a=b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``, ``a notin (x)``) and field selectors
(``spec.nodeName=x``), and the ``Status`` error every failure is answered with.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]


class KubeError(Exception):
    """An API error answered as a ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str, *, list_continue: str = "") -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        #: A 410 on a list's continue token carries one to go on with (``metadata.continue``).
        self.list_continue = list_continue


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Obj, ops: Any) -> Obj:
    """RFC 6902 JSON patch (add, remove, replace, test) on a copy of ``target``."""
    if not isinstance(ops, list):
        raise KubeError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        node: Any = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        key: Any = int(last) if isinstance(node, list) and last != "-" else last
        kind = op["op"]
        exists = 0 <= key < len(node) if isinstance(node, list) and key != "-" else key in node
        if kind in ("test", "remove", "replace") and not exists:
            raise KubeError(422, "Invalid", f"{kind} of a missing path {op['path']}")
        if kind == "test" and node[key] != op["value"]:
            raise KubeError(422, "Invalid", f"test operation failed at {op['path']}")
        if kind == "remove":
            del node[key]
        elif kind == "replace":
            node[key] = op["value"]
        elif kind == "add":
            if isinstance(node, list):
                node.insert(len(node) if key == "-" else key, op["value"])
            else:
                node[key] = op["value"]
        elif kind != "test":
            raise KubeError(422, "Invalid", f"unsupported JSON patch op {kind!r}")
    return doc


_SELECTOR_TERM = re.compile(
    r"^\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w./-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$"
)


def _split_terms(selector: str) -> Iterator[str]:
    depth, term = 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            yield term
            term = ""
        else:
            term += ch
    if term.strip():
        yield term


def parse_label_selector(selector: str) -> list[tuple[str, str, set[str]]]:
    terms = []
    for raw in _split_terms(selector):
        m = _SELECTOR_TERM.match(raw)
        if m is None:
            raise KubeError(400, "BadRequest", f"unable to parse requirement: {raw!r}")
        neg, key, eq, value, setop, values = m.groups()
        if neg:
            terms.append((key, "!", set()))
        elif eq:
            terms.append((key, "!=" if eq == "!=" else "=", {value}))
        elif setop:
            terms.append((key, setop, {v.strip() for v in values.split(",") if v.strip()}))
        else:
            terms.append((key, "exists", set()))
    return terms


def parse_field_selector(selector: str) -> list[tuple[str, str, str]]:
    out = []
    for raw in _split_terms(selector):
        m = re.match(r"^\s*([\w.]+)\s*(==|=|!=)\s*(.*?)\s*$", raw)
        if m is None:
            raise KubeError(400, "BadRequest", f"invalid field selector: {raw!r}")
        out.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
    return out


def matches(
    obj: Obj, labels: list[tuple[str, str, set[str]]], fields: list[tuple[str, str, str]]
) -> bool:
    have = obj.get("metadata", {}).get("labels") or {}
    for key, op, values in labels:
        present = key in have
        ok = {
            "exists": present,
            "!": not present,
            "=": present and have[key] in values,
            "!=": not present or have[key] not in values,
            "in": present and have[key] in values,
            "notin": not present or have[key] not in values,
        }[op]
        if not ok:
            return False
    for path, op, value in fields:
        node: Any = obj
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        actual = "" if node is None else str(node)
        if (actual == value) != (op == "="):
            return False
    return True
