"""JSON Schemas for structured outputs and tool arguments: ``json_schema(tp)`` of a msgspec Struct.

The course itself has one set of types, OpenMAIC's format (:mod:`openmaic.courses.format`); this module only turns
a Struct (a Pro tool's arguments, a structured output a driver is asked for) into a self-contained JSON Schema that
OpenAI's strict ``json_schema`` mode and Anthropic's tool ``input_schema`` both accept: references are inlined,
every object lists all its properties as required and forbids others, and ``default`` keywords are dropped (a
field with a default is still required in the schema; the model fills it, and msgspec accepts it either way).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["json_schema"]

_COMBINATORS = ("anyOf", "oneOf", "allOf", "prefixItems")


def json_schema(tp: Any, *, strict: bool = True) -> dict[str, Any]:
    """A self-contained JSON Schema (no ``$ref``) for ``tp``, whose root is an object.

    With ``strict`` (the default) every object requires all its properties and forbids others, as OpenAI's
    strict structured outputs demand. Recursive types are refused: they cannot be inlined.
    """
    raw = msgspec.json.schema(tp)
    defs: dict[str, Any] = raw.get("$defs", {})

    def node(n: Any, seen: frozenset[str]) -> Any:
        if not isinstance(n, dict):
            return n
        ref = n.get("$ref")
        if ref is not None:
            name = ref.rsplit("/", 1)[-1]
            if name in seen:
                raise TypeError(f"{name} is recursive; its schema cannot be inlined")
            inlined = node(defs[name], seen | {name})
            extra = {k: v for k, v in n.items() if k not in ("$ref", "$defs")}
            return {**inlined, **{k: node(v, seen) for k, v in extra.items()}}
        out: dict[str, Any] = {}
        for key, value in n.items():
            if key in ("default", "$defs"):
                continue
            if key == "properties":
                out[key] = {prop: node(sub, seen) for prop, sub in value.items()}
            elif key in _COMBINATORS:
                out[key] = [node(sub, seen) for sub in value]
            elif key in ("items", "additionalProperties", "not"):
                out[key] = node(value, seen)
            else:
                out[key] = value
        if "enum" in out and "type" not in out and all(isinstance(v, str) for v in out["enum"]):
            # Some strict validators want an explicit type next to an enum.
            out["type"] = "string"
        if strict and "properties" in out:
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out

    schema = node(raw, frozenset())
    if schema.get("type") != "object":
        raise TypeError(f"{getattr(tp, '__name__', tp)!r} is not an object type; structured outputs need one")
    return schema
