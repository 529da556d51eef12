"""Wire types and codecs of the API: the :class:`Wire` base, one shared encoder, cached decoders, and msgspec
errors made readable.

Every request and response type of the public API derives from :class:`Wire`: its fields are written in Python
(``material_ids``) and travel in camelCase (``materialIds``), as OpenMAIC's do, and every field is keyword-only
(so required and defaulted fields may come in any order). Successful answers derive from :class:`Success`, whose
first field is ``"success": true`` (OpenMAIC's ``apiSuccess``).

Request bodies ignore fields they do not know, as OpenMAIC's do (its clients send fields this server has no use
for); a field of the wrong type is a 400 naming the field (``details.path``, in the client's spelling), a
missing required field a 400 ``MISSING_REQUIRED_FIELD`` ("Missing required field: requirement"). Event
envelopes are encoded with the one module-level encoder; their ``data`` is :class:`msgspec.Raw` holding the exact
stored bytes, which are copied through untouched.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, TypeVar

import msgspec

from openmaic.api.errors import MalformedJson
from openmaic.errors import InvalidInput, MissingField, NotFound
from openmaic.text import find_unstorable, json_has_nul, unstorable_message
from openmaic.wire import Wire

__all__ = [
    "ENCODER", "MAX_PAGE", "CommandId", "Success", "Wire", "check_path", "check_text", "decode_json", "decode_query",
    "encode",
    "invalid_input",
]  # fmt: skip

T = TypeVar("T")

CommandId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
"""A client-chosen idempotency key (OpenMAIC's shape): repeating a command returns its first result."""

ENCODER = msgspec.json.Encoder()
"""The one JSON encoder of the API (reused: creating encoders per call costs more than encoding)."""

encode = ENCODER.encode


class Success(Wire):
    """Base of OpenMAIC-style successful answers: ``{"success": true, …fields}``."""

    success: bool = True


MAX_PAGE = 1000
"""The largest page of events one request may ask for (and the size of the pages streams read)."""


# --- decoding -------------------------------------------------------------------------------------------------

_AT = re.compile(r"^(?P<text>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_FIELD = re.compile(r"^Object (?:missing required|contains unknown) field `(?P<field>[^`]*)`")


def invalid_input(error: msgspec.ValidationError, *, where: str = "") -> InvalidInput:
    """A msgspec validation error as a 400 whose ``details.path`` names the field (``a.b``, ``items[0].x``);
    a missing required field is a :class:`~openmaic.errors.MissingField` ("Missing required field: a.b").

    ``where`` prefixes the message (e.g. ``"query parameter"``).
    """
    m = _AT.match(str(error))
    assert m is not None  # every part of the pattern is optional
    text, path = m.group("text"), (m.group("path") or "").lstrip(".")
    field = _FIELD.match(text)
    if field is not None:  # missing and unknown fields are reported at their object: name the field itself
        path = f"{path}.{field.group('field')}" if path else field.group("field")
        if text.startswith("Object missing required field"):
            what = f"{where} {path}" if where else path
            return MissingField(f"Missing required field: {what}", path=path)
    subject = f"{where} {path!r}" if where and path else (where or path or "body")
    return InvalidInput(f"{subject}: {text}", path=path)


@functools.cache
def _decoder(typ: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(typ)


def decode_json(data: bytes, typ: type[T]) -> T:
    """Decode a JSON body into ``typ``: malformed JSON, a value of the wrong shape and text PostgreSQL cannot
    store (a NUL, anywhere in the document) are 400s."""
    try:
        value = _decoder(typ).decode(data)
    except msgspec.ValidationError as e:
        raise invalid_input(e) from None
    except msgspec.DecodeError as e:
        what = "the body is empty; send a JSON object" if not data.strip() else f"the body is not valid JSON: {e}"
        raise MalformedJson(what) from None
    except RecursionError:
        # msgspec decodes nested arrays and objects recursively: a document nested thousands deep is no request.
        raise MalformedJson("the body nests arrays or objects too deeply; no request needs that") from None
    if json_has_nul(data):
        path = find_unstorable(msgspec.json.decode(data)) or ""
        raise InvalidInput(unstorable_message(path or "body"), path=path)
    return value


def decode_query(args: Mapping[str, str], typ: type[T]) -> T:
    """Query parameters (strings) converted into ``typ``; a bad one is a 400 naming the parameter."""
    check_text(args.items(), "query parameter")
    try:
        return msgspec.convert(dict(args), typ, strict=False)
    except msgspec.ValidationError as e:
        raise invalid_input(e, where="query parameter") from None


def check_text(items: Iterable[tuple[str, str]], where: str) -> None:
    """Refuse (400, naming it) a name or value that holds text PostgreSQL cannot store (query parameters)."""
    for name, value in items:
        if find_unstorable(name) is not None or find_unstorable(value) is not None:
            shown = name if find_unstorable(name) is None else repr(name)
            raise InvalidInput(unstorable_message(f"{where} {shown}"), path=name)


def check_path(params: Mapping[str, str]) -> None:
    """A path parameter holding text PostgreSQL cannot store names no resource: the route's own 404 (never a
    query that the database refuses)."""
    for name, value in params.items():
        if find_unstorable(value) is not None:
            raise NotFound(f"no {name} {value!r}", path=name)
