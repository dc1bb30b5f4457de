"""Keyset paging of the list endpoints: the bounds of ``limit`` and the RFC 8288 next link.

A page is "the rows whose key is greater than ``after``, at most ``limit`` of them", so a row
inserted while a client walks the pages can never shift the rows it has yet to see (an offset
would skip or repeat one). The body stays a plain JSON array, as before paging existed; the next
page is announced in a ``Link`` header only, and only when this page is full (a short page is
the last one; a full page may be followed by an empty one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Query, Request, Response

#: The most rows one page returns, so no response grows with the fleet.
MAX_PAGE = 1000
#: The page size when the client names none.
DEFAULT_PAGE = 500

#: The ``limit`` query parameter every paged list takes.
PageSize = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page size.")]

LINK_HEADER = {
    "Link": {
        "description": (
            'RFC 8288 `<path?limit=N&after=KEY>; rel="next"` when the page is full '
            "(more rows may follow); absent on the last page."
        ),
        "schema": {"type": "string"},
    }
}


def next_link(path: str, limit: int, keys: Sequence[str]) -> str | None:
    """The ``Link`` header value for the page after the one whose keys are ``keys``, or None.

    ``path`` is the request's own path, so the link is relative and stays right behind a proxy
    that rewrites the host.
    """
    if len(keys) < limit:
        return None
    return f'<{path}?{urlencode({"limit": limit, "after": keys[-1]})}>; rel="next"'


def link_next_page(request: Request, response: Response, limit: int, keys: Sequence[str]) -> None:
    """Announce the next page in ``response``'s ``Link`` header when this page is full."""
    link = next_link(request.url.path, limit, keys)
    if link is not None:
        response.headers["Link"] = link
