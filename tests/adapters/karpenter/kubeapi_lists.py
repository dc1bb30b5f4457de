"""A list request of the local API server, answered as a real one answers it (test support).

The model: the store's change history stands for etcd's revisions, and ``compact()`` for etcd's
compaction (the API server compacts every five minutes by default); the watch cache sees every
revision since. Then, following Kubernetes' list semantics (apimachinery
``pkg/apis/meta/internalversion/validation``: ``ValidateListOptions``; apiserver
``pkg/storage/etcd3/store.go`` ``GetList`` and ``errors.go``; ``pkg/storage/errors.go``
``NewTooLargeResourceVersionError``):

- ``resourceVersion`` unset or ``"0"``: the current state;
- ``resourceVersion=N`` (``NotOlderThan``, or unset without ``limit``): the current state, or a
  504 when ``N`` is a revision not yet reached ("Too large resource version");
- ``resourceVersionMatch=Exact``, or ``limit`` with ``resourceVersion=N`` and no match (the
  legacy exact read): the state at ``N``, a 410 ``Expired`` "The resourceVersion for the provided
  list is too old." once ``N`` is older than the last compaction, a 504 past the current one;
- a ``continue`` token reads on at the revision of the first page; once that revision is
  compacted away it is a 410 ``Expired`` whose ``metadata.continue`` carries a token to go on
  from the same place at the current revision (the "inconsistent continue");
- invalid combinations (``resourceVersionMatch`` without ``resourceVersion``, or with
  ``continue``, an unknown match, ``Exact`` with ``"0"``) are a 422 on ``ListOptions``, and a
  ``resourceVersion`` beside ``continue`` a 400.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from tests.adapters.karpenter.kubeapi_semantics import KubeError

if TYPE_CHECKING:
    from tests.adapters.karpenter.kubeapi_store import ObjectStore, Resource

Obj = dict[str, Any]

EXPIRED = "The resourceVersion for the provided list is too old."
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)
_LATEST = -1  # a token's revision that means "go on at the current one"


def list_response(
    store: ObjectStore, res: Resource, namespace: str | None, query: dict[str, str]
) -> Obj:
    """The ``<Kind>List`` for a list request, or the real server's refusal as a ``KubeError``."""
    version, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
    token, limit = query.get("continue", ""), int(query.get("limit") or 0)
    _validate(version, match, token)
    current = store.resource_version
    start = 0
    if token:
        if version not in ("", "0"):
            raise KubeError(
                400, "BadRequest", "specifying resource version is not allowed when using continue"
            )
        revision, start = _decode(token)
        if revision == _LATEST:
            revision = current
        elif revision < store.compacted:
            raise KubeError(
                410, "Expired", INCONSISTENT_CONTINUE, list_continue=_encode(_LATEST, start)
            )
        objects = store.objects_at(res, revision) if revision != current else None
    elif version not in ("", "0"):
        revision = _revision(version)
        if revision > current:
            raise KubeError(
                504, "Timeout", f"Too large resource version: {revision}, current: {current}"
            )
        exact = match == "Exact" or (limit > 0 and not match)
        if exact and revision < store.compacted:
            raise KubeError(410, "Expired", EXPIRED)
        revision = revision if exact else current
        objects = store.objects_at(res, revision) if revision != current else None
    else:
        revision, objects = current, None  # the live objects: nothing to rebuild
    items = store.select(res, namespace, query, objects)
    page = items[start : start + limit] if limit else items[start:]
    meta: Obj = {"resourceVersion": str(revision)}
    if limit and start + limit < len(items):
        meta["continue"] = _encode(revision, start + limit)
        meta["remainingItemCount"] = len(items) - start - limit
    return {
        "kind": f"{res.kind}List",
        "apiVersion": res.api_version,
        "metadata": meta,
        "items": page,
    }


def _validate(version: str, match: str, token: str) -> None:
    problems = []
    if match:
        if not version:
            problems.append("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if token:
            problems.append("resourceVersionMatch is forbidden when continue is provided")
        if match not in ("Exact", "NotOlderThan"):
            problems.append(
                f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan", ""'
            )
        if match == "Exact" and version == "0":
            problems.append('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    if problems:
        listed = ", ".join(f"resourceVersionMatch: Forbidden: {p}" for p in problems)
        raise KubeError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {listed}')


def _revision(version: str) -> int:
    try:
        revision = int(version)
    except ValueError:
        raise KubeError(400, "BadRequest", f'invalid resource version "{version}"') from None
    if revision < 0:
        raise KubeError(400, "BadRequest", f'invalid resource version "{version}"')
    return revision


def _encode(revision: int, start: int) -> str:
    """An opaque continue token (the real one holds the revision and the next key too)."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode(token: str) -> tuple[int, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), int(data["start"])
    except (ValueError, KeyError, TypeError):
        raise KubeError(400, "BadRequest", "continue key is not valid") from None
