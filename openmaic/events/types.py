"""Event types: frozen msgspec Structs with stable tags, a schema version and a registry.

A tag (``run.step_completed``) is the stored name of an event type and never changes; renaming a class must not
rename history, so tags are explicit. Schema changes follow msgspec's evolution rules (new fields get defaults,
types never change); a breaking change bumps ``version`` and registers an upcaster from the old version.
Unknown fields are allowed on decode, so an older process can read events written by a newer one.

The stored ``data`` is the event's JSON *without* the tag (the tag is the ``type`` column).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeVar

import msgspec

from openmaic import errors


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every event type. Subclasses pass ``tag="area.what_happened"``."""

    version: ClassVar[int] = 1


E = TypeVar("E", bound=type[Event])

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


class Registry:
    """Tag → event type, with one cached decoder per type and upcasters for old versions."""

    def __init__(self) -> None:
        self._types: dict[str, type[Event]] = {}
        self._decoders: dict[str, msgspec.json.Decoder[Any]] = {}
        self._prefixes: dict[type[Event], bytes] = {}
        self._upcasters: dict[tuple[str, int], Upcaster] = {}
        self._encoder = msgspec.json.Encoder()

    def register(self, cls: E) -> E:
        tag = cls.__struct_config__.tag
        if not isinstance(tag, str) or "." not in tag:
            raise TypeError(f"{cls.__name__} needs an explicit dotted tag, e.g. tag='run.step_completed'")
        other = self._types.get(tag)
        if other is not None and other is not cls:
            raise TypeError(f"event tag {tag!r} is taken by {other.__name__}")
        self._types[tag] = cls
        self._decoders[tag] = msgspec.json.Decoder(cls)
        self._prefixes[cls] = b'{"type":' + msgspec.json.encode(tag)
        return cls

    def upcaster(self, tag: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
        """Register ``fn(old_data) -> data`` that lifts ``tag`` from ``from_version`` to ``from_version + 1``."""

        def deco(fn: Upcaster) -> Upcaster:
            self._upcasters[(tag, from_version)] = fn
            return fn

        return deco

    def type_for(self, tag: str) -> type[Event] | None:
        return self._types.get(tag)

    def tags(self) -> list[str]:
        return sorted(self._types)

    def encode(self, event: Event) -> tuple[str, int, bytes]:
        """``(type, version, data bytes)`` for storing ``event``."""
        cls = type(event)
        prefix = self._prefixes.get(cls)
        if prefix is None:
            raise TypeError(f"{cls.__name__} is not a registered event type")
        raw = self._encoder.encode(event)
        # msgspec writes the tag first: strip it, the tag is stored in its own column.
        rest = raw[len(prefix) :]
        data = b"{" + rest[1:] if rest[:1] == b"," else b"{}"
        return cls.__struct_config__.tag, cls.version, data  # type: ignore[return-value]

    def encode_into(self, events: Iterable[Event], types: list[str], versions: list[int], datas: list[str]) -> None:
        """:meth:`encode` for many events, appended to three column lists, the data as text (what the log's
        statements take): one pass, no tuple per event, the JSON decoded to text once (a 100-event append spent
        more on encoding than on its statement's client side)."""
        prefixes = self._prefixes
        encode = self._encoder.encode
        for event in events:
            cls = type(event)
            prefix = prefixes.get(cls)
            if prefix is None:
                raise TypeError(f"{cls.__name__} is not a registered event type")
            raw = encode(event)
            n = len(prefix)
            # msgspec writes the tag first: strip it, the tag is stored in its own column.
            datas.append("{" + raw[n + 1 :].decode() if raw[n : n + 1] == b"," else "{}")
            types.append(cls.__struct_config__.tag)  # type: ignore[arg-type]
            versions.append(cls.version)

    def decode(self, tag: str, version: int, data: bytes | str, *, stream_id: str = "?", seq: int = 0) -> Event:
        decoder = self._decoders.get(tag)
        if decoder is None:
            raise errors.UnknownEventType(
                f"stream {stream_id} seq {seq} has event type {tag!r}, which this version of openmaic does not "
                "know; upgrade openmaic or register the type",
                type=tag,
                stream_id=stream_id,
                seq=seq,
            )
        cls = self._types[tag]
        try:
            if version == cls.version:
                return decoder.decode(data)
            obj = msgspec.json.decode(data)
            for v in range(version, cls.version):
                up = self._upcasters.get((tag, v))
                if up is None:
                    raise errors.UnknownEventType(
                        f"stream {stream_id} seq {seq}: no upcaster for {tag} v{v} → v{v + 1}", type=tag
                    )
                obj = up(obj)
            return msgspec.convert(obj, cls)
        except msgspec.ValidationError as exc:
            raise errors.UnknownEventType(
                f"stream {stream_id} seq {seq}: stored {tag} v{version} does not decode: {exc}", type=tag
            ) from exc


registry = Registry()
register = registry.register
