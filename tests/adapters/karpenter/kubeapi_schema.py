"""A CRD's structural schema applied as the real API server applies it (test support).

On every create, update and patch of a custom resource the API server decodes the body, prunes
the fields its schema does not know, fills in the schema's defaults, then validates the result:
the OpenAPI value checks (types, ``format``, ``pattern``, ``enum``, ``required``, bounds, list
types) and after them the CEL rules of ``x-kubernetes-validations``. Any failure is one 422
``Invalid`` naming every field at fault, and nothing is stored. This module does the same for the
local server, so a test that writes a bad RotationPolicy sees the answer a cluster would give.

Facts followed (Kubernetes 1.25+, apiextensions-apiserver): ``apiVersion``, ``kind`` and
``metadata`` at the root are never pruned; a field under ``x-kubernetes-preserve-unknown-fields``
keeps what it holds; a non-nullable ``null`` is dropped before defaulting; defaults apply to
absent fields only, also inside a value that was itself just defaulted; CEL rules run only where
the value is present, with ``self`` bound to it, and a transition rule (one that reads
``oldSelf``) only on an update where the old value exists. CEL is evaluated by ``cel-python``.

An ``integer`` takes a whole number written as a float (``3.0``: kube-openapi
``pkg/validation/validate/type.go``, ``isFloatInt``), and the object is stored as Go encodes
it, so it reads back as ``3``. A ``pattern`` is a Go regular expression, matched as Go's
``regexp.MatchString`` matches it (:func:`go_regex`): ``$`` is the end of the text (Python's lets
a trailing newline through), ``\\d``, ``\\s`` and ``\\w`` are ASCII classes.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import yaml

from tests.adapters.karpenter.kubeapi_semantics import KubeError

Obj = dict[str, Any]
Schema = dict[str, Any]

_ROOT_KEPT = ("apiVersion", "kind", "metadata")
_INT_FORMATS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_TYPE_NAMES = {
    "object": "object",
    "array": "array",
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
}


def crd_schema(path: Path, version: str | None = None) -> Schema:
    """The ``openAPIV3Schema`` of one served version of the CRD in ``path`` (the first served
    version when ``version`` is None)."""
    document = yaml.safe_load(path.read_text())
    for entry in document["spec"]["versions"]:
        if entry.get("served", True) and version in (None, entry["name"]):
            return dict(entry["schema"]["openAPIV3Schema"])
    raise KeyError(f"{path.name} serves no version {version!r}")


def admit(schema: Schema, obj: Obj, *, kind: str, name: str, old: Obj | None = None) -> Obj:
    """``obj`` pruned and defaulted by ``schema``, or a 422 naming every invalid field; stored
    with its whole floats as the integers Go's JSON encoder writes them."""
    out = copy.deepcopy(obj)
    _prune(schema, out, root=True)
    _default(schema, out)
    errors: list[str] = []
    _check(schema, out, "", errors)
    if not errors:
        _rules(schema, out, old, "", errors)
    if errors:
        listed = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise KubeError(422, "Invalid", f'{kind} "{name}" is invalid: {listed}')
    stored: Obj = _as_go_encodes(out)
    return stored


def _as_go_encodes(value: Any) -> Any:
    """``value`` as it reads back once Go's encoding/json wrote it: a float64 with no fraction
    (below 1e21, where Go switches to exponent form) is written without a point."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _as_go_encodes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_go_encodes(v) for v in value]
    return value


# Go's RE2 classes, spelt out for Python's re (whose \d, \s, \w are Unicode, and whose \s
# also takes \v, which Go's does not).
_GO_CLASSES = {"d": "0-9", "s": "\t\n\f\r ", "w": "0-9A-Za-z_"}


@cache
def go_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` (Go RE2 syntax, as a CRD states it) compiled for Python with Go's meaning,
    for ``search`` (Go's ``MatchString`` is unanchored too)."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            follower = pattern[index + 1]
            index += 2
            if follower.lower() in _GO_CLASSES:
                members = _GO_CLASSES[follower.lower()]
                if in_class:
                    if follower.isupper():
                        # No CRD here needs one; fail loudly rather than mistranslate it.
                        raise NotImplementedError(f"negated \\{follower} in a class: {pattern}")
                    out.append(members)
                else:
                    out.append(f"[{'^' if follower.isupper() else ''}{members}]")
            elif follower == "z":
                out.append("\\Z")
            else:
                out.append("\\" + follower)
            continue
        if in_class:
            if char == "]" and out[-1] not in ("[", "[^"):
                in_class = False
            out.append(char)
        elif char == "[":
            in_class = True
            if pattern[index + 1 : index + 2] == "^":
                out.append("[^")
                index += 1
            else:
                out.append("[")
        elif char == "$":
            out.append("\\Z")  # Go: the end of the text, never before a final newline
        else:
            out.append(char)
        index += 1
    return re.compile("".join(out))


# --- pruning and defaulting ------------------------------------------------------------------


def _prune(schema: Schema, value: Any, *, root: bool = False) -> None:
    """Drop unknown fields and non-nullable nulls from ``value``, in place."""
    if isinstance(value, dict):
        props: Schema = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") is True
        for key in list(value):
            if root and key in _ROOT_KEPT:
                continue
            child = props.get(key)
            if child is None and isinstance(extra, dict):
                child = extra
            if child is None:
                if not keep_unknown and not (isinstance(extra, bool) and extra):
                    del value[key]
                continue
            if value[key] is None and not child.get("nullable"):
                del value[key]
                continue
            _prune(child, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _prune(schema["items"], item)


def _default(schema: Schema, value: Any) -> None:
    """Fill in the schema's defaults for absent fields of ``value``, in place, all the way down."""
    if isinstance(value, dict):
        for key, child in (schema.get("properties") or {}).items():
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                _default(child, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in (schema.get("properties") or {}):
                    _default(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)


# --- the OpenAPI value checks ------------------------------------------------------------------


def _shown(value: Any) -> str:
    """A value as the API server quotes it in an error (JSON, a compound as its type)."""
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return json.dumps(value, ensure_ascii=False)


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _type_ok(schema: Schema, value: Any) -> bool:
    if value is None:
        return bool(schema.get("nullable"))
    if schema.get("x-kubernetes-int-or-string"):
        return _type_of(value) in ("integer", "string")
    wanted = schema.get("type")
    if wanted is None:
        return True
    actual = _type_of(value)
    whole = isinstance(value, float) and value.is_integer()
    return (
        actual == wanted
        or (wanted == "number" and actual == "integer")
        or (wanted == "integer" and whole)  # kube-openapi's isFloatInt
    )


def _check(schema: Schema, value: Any, path: str, errors: list[str]) -> None:
    """Append to ``errors`` what is wrong with ``value`` at ``path`` (``""`` is the root)."""
    field = path or "<root>"
    if not _type_ok(schema, value):
        wanted = schema.get("type") or "integer or string"
        errors.append(
            f"{field}: Invalid value: {_shown(value)}: {field} in body must be of type "
            f"{_TYPE_NAMES.get(wanted, wanted)}: {_shown(_type_of(value))}"
        )
        return
    if value is None:
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_shown(v) for v in schema["enum"])
        errors.append(f"{field}: Unsupported value: {_shown(value)}: supported values: {supported}")
    if isinstance(value, str):
        _check_string(schema, value, field, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, field, errors)
    elif isinstance(value, list):
        _check_list(schema, value, path, errors)
    elif isinstance(value, dict):
        _check_object(schema, value, path, errors)
    for branch, how in (("allOf", all), ("anyOf", any)):
        if branch in schema and not how(_fits(s, value, path) for s in schema[branch]):
            errors.append(f"{field}: Invalid value: {_shown(value)}: must validate {branch}")
    if "oneOf" in schema and sum(_fits(s, value, path) for s in schema["oneOf"]) != 1:
        errors.append(
            f"{field}: Invalid value: {_shown(value)}: must validate one and only one schema "
            "(oneOf)"
        )
    if "not" in schema and _fits(schema["not"], value, path):
        errors.append(
            f"{field}: Invalid value: {_shown(value)}: must not validate the schema (not)"
        )


def _fits(schema: Schema, value: Any, path: str) -> bool:
    found: list[str] = []
    _check(schema, value, path, found)
    return not found


def _check_string(schema: Schema, value: str, field: str, errors: list[str]) -> None:
    if "pattern" in schema and go_regex(schema["pattern"]).search(value) is None:
        errors.append(
            f"{field}: Invalid value: {_shown(value)}: {field} in body should match "
            f"'{schema['pattern']}'"
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{field}: Too long: may not be more than {schema['maxLength']} bytes")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(
            f"{field}: Invalid value: {_shown(value)}: {field} in body should be at least "
            f"{schema['minLength']} chars long"
        )


def _check_number(schema: Schema, value: float, field: str, errors: list[str]) -> None:
    low, high = _INT_FORMATS.get(schema.get("format", ""), (None, None))
    if low is not None and high is not None and not low <= value <= high:
        errors.append(
            f"{field}: Invalid value: {_shown(value)}: {field} in body must be of type "
            f"{schema['format']}: {_shown(value)}"
        )
    if "maximum" in schema:
        limit = schema["maximum"]
        exclusive = schema.get("exclusiveMaximum") is True
        if value > limit or (exclusive and value == limit):
            words = "less than" if exclusive else "less than or equal to"
            errors.append(
                f"{field}: Invalid value: {_shown(value)}: {field} in body should be "
                f"{words} {limit}"
            )
    if "minimum" in schema:
        limit = schema["minimum"]
        exclusive = schema.get("exclusiveMinimum") is True
        if value < limit or (exclusive and value == limit):
            words = "greater than" if exclusive else "greater than or equal to"
            errors.append(
                f"{field}: Invalid value: {_shown(value)}: {field} in body should be "
                f"{words} {limit}"
            )


def _check_list(schema: Schema, value: list[Any], path: str, errors: list[str]) -> None:
    field = path or "<root>"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(
            f"{field}: Too many: {len(value)}: must have at most {schema['maxItems']} items"
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(
            f"{field}: Invalid value: {len(value)}: {field} in body should have at least "
            f"{schema['minItems']} items"
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _check(items, item, f"{path}[{index}]", errors)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen: list[Any] = []
        for index, item in enumerate(value):
            if item in seen:
                errors.append(f"{path}[{index}]: Duplicate value: {_shown(item)}")
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: list[tuple[Any, ...]] = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = tuple(item.get(k) for k in keys)
            if key in seen_keys:
                shown = ", ".join(f'"{k}"={_shown(item.get(k))}' for k in keys)
                errors.append(
                    f"{path}[{index}]: Duplicate value: map[string]interface {{}}{{{shown}}}"
                )
            seen_keys.append(key)


def _check_object(schema: Schema, value: Obj, path: str, errors: list[str]) -> None:
    prefix = f"{path}." if path else ""
    for key in schema.get("required") or ():
        if key not in value:
            errors.append(f"{prefix}{key}: Required value")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(
            f"{path or '<root>'}: Too many: {len(value)}: must have at most "
            f"{schema['maxProperties']} items"
        )
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errors.append(
            f"{path or '<root>'}: Invalid value: {len(value)}: {path or '<root>'} in body should "
            f"have at least {schema['minProperties']} properties"
        )
    props: Schema = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if not path and key in _ROOT_KEPT and key not in props:
            continue
        child = props.get(key, extra if isinstance(extra, dict) else None)
        if child is not None:
            _check(child, item, f"{prefix}{key}", errors)


# --- CEL ----------------------------------------------------------------------------------------


@cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _rules(schema: Schema, value: Any, old: Any, path: str, errors: list[str]) -> None:
    """Evaluate ``x-kubernetes-validations`` wherever ``value`` is present, innermost last."""
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or ():
        expression = rule["rule"]
        transition = "oldSelf" in expression
        if transition and old is None:
            continue  # a transition rule runs on updates only, where the old value exists
        bindings = {"self": celpy.json_to_cel(value)}
        if transition:
            bindings["oldSelf"] = celpy.json_to_cel(old)
        outcome = _program(expression).evaluate(bindings)
        if outcome is not True and not (isinstance(outcome, celpy.celtypes.BoolType) and outcome):
            field = path or "<root>"
            message = rule.get("message") or f"failed rule: {expression}"
            errors.append(f"{field}: Invalid value: {_shown(value)}: {message}")
    prefix = f"{path}." if path else ""
    if isinstance(value, dict):
        props: Schema = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            child = props.get(key, extra if isinstance(extra, dict) else None)
            if child is not None:
                before = old.get(key) if isinstance(old, dict) else None
                _rules(child, item, before, f"{prefix}{key}", errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            # List items are correlated with the old list only for map lists (by key); the
            # CRDs here have no transition rules below a list, so items see no oldSelf.
            _rules(schema["items"], item, None, f"{path}[{index}]", errors)
