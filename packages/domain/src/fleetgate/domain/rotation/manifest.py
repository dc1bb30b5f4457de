"""A RotationPolicy from an already-parsed manifest (YAML/JSON parsing is the caller's job).

Strict, so a typo never silently becomes a default: every unknown field is an error naming it.
Both ``fleetgate.io/v1alpha1`` and the reference controller's ``noderotation.io/v1alpha1`` are
accepted with the same fields, so the reference's manifests load unchanged. ``metadata`` accepts
the usual Kubernetes object metadata (only ``name`` is kept) and a top-level ``status`` — as in a
manifest exported from a cluster — is ignored, because it is observational only.

Every problem is reported at once: type errors found while reading, then :meth:`validate`'s
findings for the fields that did read (a field reported once is not reported again).

The fields each part may hold are :mod:`~fleetgate.domain.rotation.schema`'s, the one statement of
the manifest's shape, and an absent field takes the default of the policy's own values, which is
the one the schema states (tests/deploy/test_crd_fields.py holds the two readings together).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from fleetgate.domain.rotation.annotations import parse_timestamp
from fleetgate.domain.rotation.fields import AGE_THRESHOLD, AUTO, SURGE_DURATIONS, read_duration
from fleetgate.domain.rotation.labelselector import LabelSelector, SelectorRequirement
from fleetgate.domain.rotation.policy import (
    API_VERSIONS,
    DEFAULT_REQUIRED_KEYS,
    KIND,
    ForcefulFallback,
    MatchNodeRequirements,
    PolicyError,
    PrePull,
    RotationPolicy,
    Surge,
)
from fleetgate.domain.rotation.schema import METADATA_FIELDS, TOP_FIELDS, properties
from fleetgate.domain.rotation.windows import Exclusion, MaintenanceWindow, exclusion_errors

__all__ = ["policy_from_manifest", "read_manifest"]

_T = TypeVar("_T")

_METADATA_FIELDS = frozenset(METADATA_FIELDS)
_DEFAULT = RotationPolicy()


def policy_from_manifest(document: Mapping[str, Any]) -> RotationPolicy:
    """Read and validate a manifest; raises :class:`PolicyError` listing every problem."""
    policy, errors = read_manifest(document)
    # The reader already judged the exclusions (with their own indexes, as it may drop some).
    reported = ["spec.exclusions"] + [error.partition(": ")[0] for error in errors]
    for error in policy.validate():
        path = error.partition(": ")[0]
        if not any(path == seen or path.startswith((seen + ".", seen + "[")) for seen in reported):
            errors.append(error)
    if errors:
        raise PolicyError(errors)
    return policy


def read_manifest(document: Mapping[str, Any]) -> tuple[RotationPolicy, list[str]]:
    """Read a manifest without validating it: the policy (defaults where unreadable) + errors."""
    reader = _Reader()
    return reader.policy(document), reader.errors


class _Reader:
    """Reads typed values out of plain mappings, collecting an error per bad field."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, path: str, reason: str) -> None:
        """Record one problem at ``path``."""
        self.errors.append(f"{path}: {reason}")

    def mapping(self, value: Any, path: str, allowed: frozenset[str]) -> Mapping[str, Any]:
        """A mapping whose keys are all in ``allowed`` (unknown keys are reported)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, f"must be a mapping, got {_kind(value)}")
            return {}
        for key in value:
            if key not in allowed:
                self.fail(_join(path, str(key)), "unknown field")
        return value

    def optional(
        self, parent: Mapping[str, Any], key: str, path: str, read: Callable[[Any, str], _T]
    ) -> _T | None:
        """``read`` the value under ``key`` when present (None when absent or null)."""
        value = parent.get(key)
        return None if value is None else read(value, _join(path, key))

    def required(
        self,
        parent: Mapping[str, Any],
        key: str,
        path: str,
        read: Callable[[Any, str], _T],
        fallback: _T,
    ) -> _T:
        """``read`` the value under ``key``, reporting it as required when missing."""
        value = parent.get(key)
        if value is None:
            self.fail(_join(path, key), "is required")
            return fallback
        return read(value, _join(path, key))

    def string(self, value: Any, path: str) -> str:
        """A string value."""
        if isinstance(value, str):
            return value
        self.fail(path, f"must be a string, got {_kind(value)}")
        return ""

    def integer(self, value: Any, path: str) -> int | None:
        """An integer value (booleans are not integers here), also written as a whole float
        (``3.0``), as JSON Schema and the Kubernetes API server read an ``integer``."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        self.fail(path, f"must be an integer, got {_kind(value)}")
        return None

    def boolean(self, value: Any, path: str) -> bool:
        """A boolean value."""
        if isinstance(value, bool):
            return value
        self.fail(path, f"must be true or false, got {_kind(value)}")
        return False

    def duration(self, value: Any, path: str) -> timedelta | None:
        """A ``spec.surge`` duration such as "15m" or "1h30m", as its field's pattern admits."""
        if not isinstance(value, str):
            self.fail(path, f'must be a duration string such as "15m", got {_kind(value)}')
            return None
        parsed, problem = read_duration(value, SURGE_DURATIONS[path.rpartition(".")[2]])
        if problem is not None:
            self.fail(path, problem)
        return parsed

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        """A list of strings."""
        if not isinstance(value, list):
            self.fail(path, f"must be a list, got {_kind(value)}")
            return ()
        return tuple(self.string(item, f"{path}[{i}]") for i, item in enumerate(value))

    def instant(self, value: Any, path: str) -> datetime | None:
        """An RFC3339 instant with an offset ("2024-12-24T00:00:00Z")."""
        if isinstance(value, datetime):
            if value.tzinfo is None:
                self.fail(path, "must carry a UTC offset (RFC3339), e.g. 2024-12-24T00:00:00Z")
                return None
            return value
        parsed = parse_timestamp(value) if isinstance(value, str) else None
        if parsed is None:
            self.fail(
                path, f"must be an RFC3339 instant such as 2024-12-24T00:00:00Z, got {value!r}"
            )
        return parsed

    # --- the RotationPolicy shape --------------------------------------------------------

    def policy(self, document: Any) -> RotationPolicy:
        """The whole manifest."""
        if not isinstance(document, Mapping):
            self.fail("manifest", f"must be a mapping, got {_kind(document)}")
            document = {}
        top = self.mapping(document, "", frozenset(TOP_FIELDS))
        api_version = self.required(top, "apiVersion", "", self.string, "").strip()
        if api_version and api_version not in API_VERSIONS:
            self.fail(
                "apiVersion", f"must be one of {', '.join(API_VERSIONS)}, got {api_version!r}"
            )
        kind = top.get("kind")
        if kind is None:
            self.fail("kind", "is required")
        elif kind != KIND:
            self.fail("kind", f"must be {KIND}, got {kind!r}")
        metadata = self.mapping(top.get("metadata"), "metadata", _METADATA_FIELDS)
        name = self.optional(metadata, "name", "metadata", self.string) or ""
        generation = metadata.get("generation")
        spec = self.mapping(top.get("spec"), "spec", properties("spec"))
        if "spec" not in top:
            self.fail("spec", "is required")
        chances = self.optional(spec, "minRotationChances", "spec", self.integer)
        return RotationPolicy(
            name=name,
            api_version=api_version or API_VERSIONS[0],
            node_pool_selector=self.optional(spec, "nodePoolSelector", "spec", self.selector),
            age_threshold=self.age_threshold(spec.get("ageThreshold")),
            min_rotation_chances=_DEFAULT.min_rotation_chances if chances is None else chances,
            maintenance_windows=self.listed(spec, "maintenanceWindows", self.window),
            exclusions=self.listed(spec, "exclusions", self.exclusion),
            surge=self.surge(spec.get("surge")),
            pre_pull=PrePull(enabled=self.flag(spec.get("prePull"), "spec.prePull")),
            rotate_drifted=self.flag(spec.get("rotateDrifted"), "spec.rotateDrifted"),
            ignore_disruption_budgets=self.flag(
                spec.get("ignoreDisruptionBudgets"), "spec.ignoreDisruptionBudgets"
            ),
            # Server-set, so never judged: kept only when it is what the API server writes.
            generation=generation if type(generation) is int else None,
        )

    def listed(
        self, spec: Mapping[str, Any], key: str, read: Callable[[Any, str], _T | None]
    ) -> tuple[_T, ...]:
        """A list under ``spec.key`` whose items ``read`` turns into values (bad ones dropped)."""
        value = spec.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(f"spec.{key}", f"must be a list, got {_kind(value)}")
            return ()
        items = (read(item, f"spec.{key}[{index}]") for index, item in enumerate(value))
        return tuple(item for item in items if item is not None)

    def age_threshold(self, value: Any) -> timedelta | None:
        """``auto`` (None) or a duration."""
        if value is None or value == AUTO:
            return None
        if isinstance(value, str):
            parsed, problem = read_duration(value, AGE_THRESHOLD)
            if problem is not None:
                self.fail("spec.ageThreshold", problem)
            return parsed
        self.fail("spec.ageThreshold", f'must be "auto" or a duration string, got {_kind(value)}')
        return None

    def selector(self, value: Any, path: str) -> LabelSelector:
        """A Kubernetes LabelSelector."""
        body = self.mapping(value, path, properties("spec.nodePoolSelector"))
        labels_value = body.get("matchLabels") or {}
        labels: dict[str, str] = {}
        if not isinstance(labels_value, Mapping):
            self.fail(f"{path}.matchLabels", f"must be a mapping, got {_kind(labels_value)}")
        else:
            for key, label in labels_value.items():
                labels[str(key)] = self.string(label, f"{path}.matchLabels.{key}")
        expressions_value = body.get("matchExpressions") or []
        expressions: list[SelectorRequirement] = []
        if not isinstance(expressions_value, list):
            self.fail(f"{path}.matchExpressions", f"must be a list, got {_kind(expressions_value)}")
        else:
            for index, item in enumerate(expressions_value):
                where = f"{path}.matchExpressions[{index}]"
                entry = self.mapping(
                    item, where, properties("spec.nodePoolSelector.matchExpressions")
                )
                expressions.append(
                    SelectorRequirement(
                        key=self.required(entry, "key", where, self.string, ""),
                        operator=self.required(entry, "operator", where, self.string, ""),
                        values=self.optional(entry, "values", where, self.strings) or (),
                    )
                )
        return LabelSelector(match_labels=labels, match_expressions=tuple(expressions))

    def window(self, value: Any, path: str) -> MaintenanceWindow:
        """One maintenance window entry."""
        body = self.mapping(value, path, properties("spec.maintenanceWindows"))
        return MaintenanceWindow(
            timezone=self.required(body, "timezone", path, self.string, ""),
            days=self.required(body, "days", path, self.strings, ()),
            start=self.required(body, "start", path, self.string, ""),
            end=self.required(body, "end", path, self.string, ""),
        )

    def exclusion(self, value: Any, path: str) -> Exclusion | None:
        """One exclusion range (dropped when either end does not read)."""
        body = self.mapping(value, path, properties("spec.exclusions"))
        start = self.required(body, "start", path, self.instant, None)
        end = self.required(body, "end", path, self.instant, None)
        if start is None or end is None:
            return None
        exclusion = Exclusion(start, end)
        self.errors += exclusion_errors(exclusion, path)
        return exclusion

    def flag(self, value: Any, path: str) -> bool:
        """``{enabled: bool}`` (absent: false, every toggle's default)."""
        body = self.mapping(value, path, properties(path))
        return bool(self.optional(body, "enabled", path, self.boolean))

    def surge(self, value: Any) -> Surge:
        """``spec.surge`` with its defaults for every absent field."""
        path = "spec.surge"
        body = self.mapping(value, path, properties(path))
        defaults = Surge()

        def duration(key: str, default: timedelta) -> timedelta:
            """The duration under ``key``, or ``default`` when absent or unreadable."""
            parsed = self.optional(body, key, path, self.duration)
            return default if parsed is None else parsed

        match = self.mapping(
            body.get("matchNodeRequirements"),
            f"{path}.matchNodeRequirements",
            properties(f"{path}.matchNodeRequirements"),
        )
        where = f"{path}.matchNodeRequirements"
        unavailable = self.optional(body, "maxUnavailable", path, self.integer)
        return Surge(
            max_unavailable=defaults.max_unavailable if unavailable is None else unavailable,
            ready_timeout=duration("readyTimeout", defaults.ready_timeout),
            cooldown_after=duration("cooldownAfter", defaults.cooldown_after),
            failure_pause=self.optional(body, "failurePause", path, self.duration),
            retry_backoff=duration("retryBackoff", defaults.retry_backoff),
            drain_estimate=self.optional(body, "drainEstimate", path, self.duration),
            provisioning_estimate=self.optional(body, "provisioningEstimate", path, self.duration),
            match_node_requirements=MatchNodeRequirements(
                # An explicit empty list is defaulted like an absent one (spec §12.5).
                required=self.optional(match, "required", where, self.strings)
                or DEFAULT_REQUIRED_KEYS,
                preferred=self.optional(match, "preferred", where, self.strings) or (),
            ),
            forceful_fallback=ForcefulFallback(
                enabled=self.flag(body.get("forcefulFallback"), f"{path}.forcefulFallback")
            ),
        )


def _join(path: str, key: str) -> str:
    """``path.key``, or just ``key`` at the top of the document."""
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    """A short description of a value's type for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"
