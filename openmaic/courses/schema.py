"""Course content types, also used as the structured outputs the models are asked for.

Every type is a frozen, keyword-only msgspec Struct. Their docstrings end up in the JSON Schema sent to the
model (as ``description``), so they are written for the model as much as for the reader.

``json_schema(tp)`` turns one of these types into a self-contained JSON Schema that OpenAI's strict
``json_schema`` mode and Anthropic's tool ``input_schema`` both accept: references are inlined, every object
lists all its properties as required and forbids others, and ``default`` keywords are dropped (a field with a
default is still required in the schema; the model fills it, and msgspec accepts it either way).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

import msgspec

SceneKind = Literal["slide", "quiz", "interactive"]
AspectRatio = Literal["16:9", "4:3", "1:1", "9:16"]
ASPECT_RATIOS: tuple[str, ...] = get_args(AspectRatio)
ELEMENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
"""The shape of a media element id: unique within an outline and safe in a URL."""

MAX_SCENES = 30
"""The most scenes an outline may have (the outline's schema says so to the model)."""


class MediaRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A picture or a short video the scene shows: what it depicts (prompt), and an element id unique within
    the outline (gen_img_1, gen_vid_1 …)."""

    kind: Literal["image", "video"]
    prompt: str
    element_id: str
    aspect_ratio: AspectRatio = "16:9"


class OutlineItem(msgspec.Struct, frozen=True, kw_only=True):
    """One scene of the outline: what it is called, what the learner should get from it, its form, and the
    pictures or videos it shows (usually none or one)."""

    title: str
    goal: str
    kind: SceneKind = "slide"
    key_points: list[str] = []
    media: list[MediaRequest] = []


class Outline(msgspec.Struct, frozen=True, kw_only=True):
    """A course outline: a title and 4 to 8 scenes in teaching order."""

    title: str
    items: Annotated[list[OutlineItem], msgspec.Meta(min_length=1, max_length=MAX_SCENES)]


class Slide(msgspec.Struct, frozen=True, kw_only=True):
    """A slide: a title, 3 to 5 short bullets, and optional speaker notes."""

    title: str
    bullets: list[str]
    notes: str = ""


class QuizQuestion(msgspec.Struct, frozen=True, kw_only=True):
    """A multiple-choice question; answer is the 0-based index of the correct option."""

    question: str
    options: list[str]
    answer: int
    explanation: str = ""


class Quiz(msgspec.Struct, frozen=True, kw_only=True):
    """A short quiz."""

    title: str
    questions: list[QuizQuestion]


class QuizOutput(msgspec.Struct, frozen=True, kw_only=True):
    """A short quiz: at least one multiple-choice question."""

    title: str
    questions: Annotated[list[QuizQuestion], msgspec.Meta(min_length=1)]


class Interactive(msgspec.Struct, frozen=True, kw_only=True):
    """An interactive page: one self-contained HTML document (inline CSS and JS, no external resources)."""

    title: str
    html: str
    instructions: str


class SceneContent(msgspec.Struct, frozen=True, kw_only=True):
    """The content of one scene; exactly the member named by kind is set, the others are null."""

    kind: SceneKind
    slide: Slide | None = None
    quiz: Quiz | None = None
    interactive: Interactive | None = None


class SceneAction(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a scene's performance, by one agent (agent_id is an id from the roster)."""

    kind: Literal["speech", "highlight", "ask", "pause"]
    agent_id: str
    text: str = ""


class SceneActions(msgspec.Struct, frozen=True, kw_only=True):
    """The ordered actions that present one scene."""

    actions: list[SceneAction]


class AgentProfile(msgspec.Struct, frozen=True, kw_only=True):
    """A classroom agent."""

    id: str
    name: str
    role: Literal["teacher", "assistant", "classmate"]
    persona: str


class AgentRoster(msgspec.Struct, frozen=True, kw_only=True):
    """The agents of a classroom: one teacher, usually an assistant, and a few classmates."""

    agents: list[AgentProfile]


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
