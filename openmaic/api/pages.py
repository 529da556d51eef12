"""Pages of the list routes: ``?limit=`` and an opaque ``?cursor=``, the one scheme of every list this API adds
to OpenMAIC's (materials keep OpenMAIC's own ``?limit=&before=``).

A page holds at most ``limit`` items (:data:`DEFAULT_LIMIT` when absent, at most :data:`MAX_LIMIT`); when more
follow, the answer carries the cursor of the next page: ``nextCursor`` in an object answer, the
``X-Next-Cursor`` header (and a ``Link: <…>; rel="next"``) where OpenMAIC's answer is a bare array or map, so
its shape does not change. OpenMAIC 1.2's clients send neither parameter and see what they always saw: the
default page holds every item an owner can have within its quotas (agents) or the most recent
:data:`DEFAULT_LIMIT`, as before (sessions).

The cursor is the sort key of the last item given (keyset pagination: stable while items are added, and each
page is one index range scan, however deep), encoded as base64url JSON. Clients must not build or read it; a
cursor that does not decode is a 400 naming ``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Sequence
from typing import Annotated, Any
from urllib.parse import urlencode

import msgspec

from openmaic import errors
from openmaic.api.wire import Wire

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "PageQuery", "cursor_of", "next_page_headers", "read_cursor"]

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000


class PageQuery(Wire):
    """``?limit=&cursor=`` of a list route."""

    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT
    cursor: str = ""


def cursor_of(*key: Any) -> str:
    """The opaque cursor of the page after the item whose sort key is ``key`` (datetimes and strings)."""
    raw = msgspec.json.encode([k.isoformat() if isinstance(k, dt.datetime) else k for k in key])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_cursor(cursor: str, shape: Sequence[type]) -> list[Any] | None:
    """The sort key a cursor holds, each part of the type in ``shape`` (``dt.datetime`` or ``str``); None for
    no cursor (the first page). InvalidInput (400, path ``cursor``) for anything this server did not write."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = msgspec.json.decode(raw)
        if not isinstance(parts, list) or len(parts) != len(shape) or not all(isinstance(p, str) for p in parts):
            raise ValueError(cursor)
        return [dt.datetime.fromisoformat(p) if t is dt.datetime else p for p, t in zip(parts, shape, strict=True)]
    except (ValueError, binascii.Error, msgspec.DecodeError):
        raise errors.InvalidInput("cursor: not a cursor this server gave; start again without it",
                                  path="cursor") from None


def next_page_headers(path: str, query: PageQuery, next_cursor: str | None) -> dict[str, str]:
    """The headers that point to the next page of an answer whose body cannot carry it (none on the last)."""
    if next_cursor is None:
        return {}
    link = f"{path}?{urlencode({'limit': query.limit, 'cursor': next_cursor})}"
    return {"X-Next-Cursor": next_cursor, "Link": f'<{link}>; rel="next"'}
