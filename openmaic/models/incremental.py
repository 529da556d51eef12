"""Complete elements of a JSON array, picked out of a structured output while it is still streaming.

    items = StreamedArray("items", OutlineItem)
    outline = await provider.complete(model, msgs, Outline, on_delta=lambda d: emit(items.feed(d)),
                                      on_retry=items.reset)

Only the root object's ``key`` array is watched, and only object (or array) elements are reported, each once,
in order, as soon as its closing bracket arrives. An element that does not validate as ``item_type`` is
skipped here; the final ``complete`` result is the authority.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")


class StreamedArray(Generic[T]):
    """Feed JSON text in pieces; get back the array elements completed by each piece."""

    def __init__(self, key: str, item_type: type[T]) -> None:
        self.key = key
        self._decoder = msgspec.json.Decoder(item_type)
        self.reset()

    def reset(self) -> None:
        """Forget everything fed so far (the output is starting again)."""
        self._buf = ""
        self._pos = 0
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._string_start = 0
        self._last_string = ""
        self._current_key: str | None = None
        self._in_target = False
        self._element_start: int | None = None
        self.count = 0

    def feed(self, text: str) -> list[T]:
        """Add ``text``; return the elements it completed."""
        self._buf += text
        done: list[T] = []
        buf = self._buf
        for i in range(self._pos, len(buf)):
            c = buf[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
                    if self._depth == 1:
                        self._last_string = buf[self._string_start + 1 : i]
                continue
            if c == '"':
                self._in_string = True
                self._string_start = i
            elif c in "{[":
                self._depth += 1
                if self._depth == 2 and c == "[" and self._current_key == self.key:
                    self._in_target = True
                elif self._depth == 3 and self._in_target:
                    self._element_start = i
            elif c in "}]":
                if self._depth == 3 and self._in_target and self._element_start is not None:
                    try:
                        done.append(self._decoder.decode(buf[self._element_start : i + 1]))
                        self.count += 1
                    except (msgspec.ValidationError, msgspec.DecodeError):
                        pass
                    self._element_start = None
                elif self._depth == 2 and self._in_target:
                    self._in_target = False
                self._depth -= 1
            elif c == ":" and self._depth == 1:
                self._current_key = self._last_string
        self._pos = len(buf)
        return done
