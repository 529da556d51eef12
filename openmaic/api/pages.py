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
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

import msgspec

from openmaic import errors
from openmaic.api.wire import Wire

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "PageQuery", "WholeByDefault", "cursor_of", "next_page_headers", "page_of",
           "read_cursor"]

T = TypeVar("T")

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000


class PageQuery(Wire):
    """``?limit=&cursor=`` of a list route."""

    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT
    cursor: str = ""


class WholeByDefault(Wire):
    """``?limit=&cursor=`` of a list OpenMAIC's own clients read whole (its browser persistence): without
    ``limit`` the answer holds every item, which the route's quota bounds; with it, pages as everywhere."""

    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)] | None = None
    cursor: str = ""


def cursor_of(*key: Any) -> str:
    """The opaque cursor of the page after the item whose sort key is ``key`` (datetimes and strings)."""
    raw = msgspec.json.encode([k.isoformat() if isinstance(k, dt.datetime) else k for k in key])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_cursor(cursor: str, shape: Sequence[type]) -> list[Any] | None:
    """The sort key a cursor holds, each part of the type in ``shape`` (``dt.datetime``, ``str`` or ``int``); None for
    no cursor (the first page). InvalidInput (400, path ``cursor``) for anything this server did not write."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = msgspec.json.decode(raw)
        if not isinstance(parts, list) or len(parts) != len(shape):
            raise ValueError(cursor)
        for p, t in zip(parts, shape, strict=True):
            if type(p) is not (int if t is int else str):
                raise ValueError(cursor)
        return [dt.datetime.fromisoformat(p) if t is dt.datetime else p for p, t in zip(parts, shape, strict=True)]
    except (ValueError, binascii.Error, msgspec.DecodeError):
        raise errors.InvalidInput("cursor: not a cursor this server gave; start again without it",
                                  path="cursor") from None


def page_of(items: Sequence[T], key: Callable[[T], tuple[Any, ...]], query: PageQuery | WholeByDefault,
            shape: Sequence[type], *, descending: bool = False) -> tuple[list[T], str | None]:
    """One page of a list already read whole (one bounded by its quota), in ``key`` order (``descending``: every
    part of it descending): the items after the cursor's key, at most ``query.limit``, and the next cursor. The
    same keyset rule as the SQL pages, so a page is stable while items are added or removed."""
    after = read_cursor(query.cursor, shape)
    ordered = sorted(items, key=key, reverse=descending)
    if after is not None:
        start = tuple(after)
        ordered = [i for i in ordered if (key(i) < start if descending else key(i) > start)]
    if query.limit is None or len(ordered) <= query.limit:
        return ordered, None
    page = ordered[: query.limit]
    return page, cursor_of(*key(page[-1]))


def next_page_headers(path: str, query: PageQuery | WholeByDefault, next_cursor: str | None) -> dict[str, str]:
    """The headers that point to the next page of an answer whose body cannot carry it (none on the last)."""
    if next_cursor is None:
        return {}
    link = f"{path}?{urlencode({'limit': query.limit, 'cursor': next_cursor})}"
    return {"X-Next-Cursor": next_cursor, "Link": f'<{link}>; rel="next"'}
