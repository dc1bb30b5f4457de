"""The names the ledger keeps, each checked by one rule: node names (DNS subdomains), namespaces
(DNS labels) and idempotency keys. A module of its own, on the standard library alone, so the
client's commands check a name before they send it without loading the rest of the domain."""

from __future__ import annotations

import re

# Kubernetes-style names: node names are DNS subdomains, namespaces DNS labels. Checked here so
# every backend stores the same set of names (MariaDB would otherwise silently truncate).
_NODE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_REQUEST_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
MAX_POOL = 253


def check_node_name(name: object, field_name: str = "name") -> str:
    """Return ``name`` if it is a valid node name, else raise naming the field."""
    if not isinstance(name, str) or not _NODE_NAME.fullmatch(name):
        raise ValueError(
            f"{field_name}: {name!r} is not a node name (1-253 letters, digits, '.', '_', '-')"
        )
    return name


def check_namespace(name: object, field_name: str = "namespace") -> str:
    """Return ``name`` if it is a valid namespace (a DNS label), else raise naming the field."""
    if not isinstance(name, str) or not _NAMESPACE.fullmatch(name):
        raise ValueError(f"{field_name}: {name!r} is not a namespace (a DNS label, 1-63 chars)")
    return name


def check_request_id(value: object) -> str | None:
    """Return a valid idempotency key (1-128 printable ASCII characters) or ``None``."""
    if value is None:
        return None
    if not isinstance(value, str) or not _REQUEST_ID.fullmatch(value):
        raise ValueError(f"request_id: {value!r} must be 1-128 printable ASCII characters")
    return value
