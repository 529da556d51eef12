"""The ``demo`` provider: offline and deterministic, so the whole product runs with no key and no network.

A text completion (a turn with no tools, or ``complete`` asked for ``str``) whose last user message carries a
generation brief (a ``Brief (JSON):`` line) is answered by ``demo_course.answer``: the outline, agents, slide,
quiz, interactive page or actions the brief asks for, as a real model would write them, streamed as text in small
chunks, ``latency_ms`` apart; a structured output of any type is refused (nothing asks the demo for one). Tool
turns follow a fixed policy that
suits the workbench: read the course first, then make the one edit the user's words ask for, then say what was
done. Any model name is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import trio

from openmaic.models import demo_course
from openmaic.models.errors import OutputInvalid
from openmaic.models.types import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    TurnResult,
    UserMessage,
)

T = TypeVar("T")

_READS = ("read_course", "read_outline")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _quoted(text: str) -> str | None:
    m = re.search(r"[\"“'‘]([^\"”'’]{2,80})[\"”'’]", text)
    return m.group(1).strip() if m else None


def _after(text: str, pattern: str) -> str | None:
    m = re.search(rf"\b(?:{pattern})\s+(.+)", text, re.I)
    if not m:
        return None
    rest = re.split(r"[.!?\n]", m.group(1), maxsplit=1)[0].strip()
    rest = re.sub(r"^(?:the|a|an)\s+", "", rest, flags=re.I)
    words = rest.split()[:8]
    return " ".join(words) or None


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _doc(content: str) -> Any:
    try:
        return msgspec.json.decode(content)
    except msgspec.DecodeError:
        return None


def _scenes(doc: Any) -> list[dict[str, Any]]:
    """The scene objects (with an id) of a ``read_course`` result, wherever its ``scenes`` list is."""
    if isinstance(doc, dict):
        scenes = doc.get("scenes")
        if isinstance(scenes, list):
            return [s for s in scenes if isinstance(s, dict) and (s.get("id") or s.get("scene_id"))]
        for v in doc.values():
            found = _scenes(v)
            if found:
                return found
    elif isinstance(doc, list):
        for v in doc:
            found = _scenes(v)
            if found:
                return found
    return []


def _scene_id(scene: dict[str, Any]) -> str:
    return str(scene.get("id") or scene.get("scene_id"))


def _course_title(doc: Any) -> str | None:
    if isinstance(doc, dict):
        if isinstance(doc.get("title"), str):
            return doc["title"]
        course = doc.get("course")
        if isinstance(course, dict) and isinstance(course.get("title"), str):
            return course["title"]
    return None


class DemoProvider:
    """A provider of kind ``demo``; see the module docstring."""

    def __init__(self, name: str = "demo", *, latency_ms: int = 0, chunk_chars: int = 24) -> None:
        self.name = name
        self.latency_ms = latency_ms
        self.chunk_chars = chunk_chars

    def __repr__(self) -> str:
        return f"<DemoProvider {self.name!r}>"

    async def _stream(self, text: str, on_delta: Callable[[str], None] | None) -> None:
        # Long outputs get bigger chunks so a slow demo still finishes in about 80 steps.
        size = max(self.chunk_chars, len(text) // 80 + 1)
        for i in range(0, len(text), size):
            if i and self.latency_ms > 0:
                await trio.sleep(self.latency_ms / 1000)
            else:
                await trio.lowlevel.checkpoint()
            if on_delta is not None:
                on_delta(text[i : i + size])

    async def complete(
        self,
        model: str,
        messages: list[Message],
        output_type: type[T],
        *,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[], None] | None = None,
    ) -> T:
        """The demo course's answer for ``output_type``, streamed as JSON text to ``on_delta``.

        ``str`` is a text completion: the answer to the brief the messages carry.
        """
        if output_type is str and demo_course.has_brief(messages):
            text = demo_course.answer(messages)
            await self._stream(text, on_delta)
            return text  # type: ignore[return-value]
        # Course content is asked for as text (the format's JSON, openmaic.steps.prompts); a structured output of
        # any other type is nothing the demo writes.
        raise OutputInvalid(
            f"the demo provider {self.name!r} cannot produce {getattr(output_type, '__name__', output_type)}: it "
            "answers generation briefs as text",
            provider=self.name,
        )

    async def stream_turn(
        self,
        model: str,
        messages: list[Message],
        tools: list[ToolSpec],
        *,
        on_delta: Callable[[str], None],
        on_retry: Callable[[], None] | None = None,
    ) -> TurnResult:
        """A turn by the workbench policy: read the course, make the edit asked for, then report."""
        available = {t.name for t in tools}
        start = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
        request = messages[start].text if start >= 0 else ""
        since = messages[start + 1 :]
        results = [m for m in since if isinstance(m, ToolResultMessage)]
        calls = {c.id: c for m in since if isinstance(m, AssistantMessage) for c in m.tool_calls}
        n_calls = sum(len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage))

        def call(name: str, arguments: dict[str, Any]) -> TurnResult:
            tc = ToolCall(id=f"call_{n_calls + 1}", name=name, arguments=arguments)
            return TurnResult(text="", tool_calls=[tc], stop_reason="tool_use")

        async def say(text: str) -> TurnResult:
            await self._stream(text, on_delta)
            return TurnResult(text=text, tool_calls=[], stop_reason="end_turn")

        if not available and demo_course.has_brief(messages):
            # A text completion for generation: the answer to its brief, not a chat reply.
            return await say(demo_course.answer(messages))
        if not available:
            return await say(f"(demo) You said: {request.strip() or 'nothing'}")
        if not results and "read_course" in available:
            return call("read_course", {})
        actions = [r for r in results if r.name not in _READS]
        if actions:
            return await say(_report(actions[-1], calls.get(actions[-1].call_id)))
        read = next((r for r in reversed(results) if r.name == "read_course"), None)
        if read is not None and read.is_error:
            detail = " ".join(read.content.split())[:200]
            return await say(f"I could not read the course ({detail}), so I changed nothing. Please try again.")
        course = _doc(read.content) if read is not None else None
        decided = _decide(request, course, available)
        if decided is None:
            return await say(_describe(course))
        if isinstance(decided, str):
            return await say(decided)
        return call(*decided)


def _decide(request: str, course: Any, available: set[str]) -> tuple[str, dict[str, Any]] | str | None:
    """The edit the request asks for as ``(tool, arguments)``, a text answer, or None for "just describe"."""
    words = _words(request)
    scenes = _scenes(course)
    last = _scene_id(scenes[-1]) if scenes else None

    if words & {"delete", "remove"} and "delete_scene" in available:
        return ("delete_scene", {"scene_id": last}) if last else "There are no scenes to delete."
    if words & {"reorder", "move"} and "reorder_scenes" in available:
        if len(scenes) < 2:
            return "There is nothing to reorder yet."
        return "reorder_scenes", {"scene_ids": [_scene_id(s) for s in reversed(scenes)]}
    if words & {"rename", "retitle"} and "scene" in words and "update_scene" in available and scenes:
        title = _quoted(request) or _after(request, "to|called|titled|named|as")
        if not title:
            return "What should the scene be called?"
        return "update_scene", {"scene_id": _scene_id(scenes[0]), "ops": [{"op": "set_title", "value": _cap(title)}]}
    renaming = "retitle_course" in available and bool(words & {"rename", "retitle"})
    if renaming or (words & {"title"} and not words & {"add", "new"} and "retitle_course" in available):
        title = _quoted(request) or _after(request, "to|called|titled|named|as")
        if not title:
            return "What should the new title be?"
        return "retitle_course", {"title": _cap(title)}
    if words & {"add", "new", "quiz", "create", "insert"} and "add_scene" in available:
        kind = "quiz" if "quiz" in words else "interactive" if words & {"interactive", "exercise"} else "slide"
        title = _quoted(request) or _after(request, "about|on|called|titled|named|covering")
        title = _cap(title) if title else ("Quiz" if kind == "quiz" else "New scene")
        goal = f"Understand {title[:1].lower() + title[1:]}." if kind != "quiz" else f"Check understanding: {title}."
        return "add_scene", {"title": title, "goal": goal, "kind": kind, "position": None}
    if words & {"bullet", "point"} and "update_scene" in available and last:
        text = _quoted(request) or _after(request, "saying|that|about|with") or request.strip()
        return "update_scene", {"scene_id": last, "ops": [{"op": "append_bullet", "value": _cap(text)}]}
    if words & {"generate", "write", "fill", "regenerate"} and "generate_scene" in available and last:
        return "generate_scene", {"scene_id": last}
    if ("?" in request or "unclear" in words) and "ask_user" in available:
        return "ask_user", {"question": "Could you tell me which scene you mean and what you would like to change?"}
    return None


def _describe(course: Any) -> str:
    scenes = _scenes(course)
    title = _course_title(course)
    head = f'The course "{title}"' if title else "The course"
    if not scenes:
        return f"{head} has no scenes yet. Ask me to add one, for example “add a scene about fractions”."
    names = ", ".join(f'"{s.get("title", _scene_id(s))}"' for s in scenes[:8])
    return (
        f"{head} has {len(scenes)} scene{'s' if len(scenes) != 1 else ''}: {names}. "
        "Tell me what to change, for example “add a scene about …”, “rename the course to …” or “delete the last scene”."
    )


def _report(result: ToolResultMessage, call: ToolCall | None) -> str:
    """A one-paragraph summary of the edit just made (or attempted)."""
    args = call.arguments if call is not None else {}
    done = {
        "add_scene": lambda: f'I added a new {args.get("kind", "slide")} scene, "{args.get("title", "")}".',
        "update_scene": lambda: "I updated the scene.",
        "delete_scene": lambda: "I deleted the last scene.",
        "reorder_scenes": lambda: "I reversed the order of the scenes.",
        "retitle_course": lambda: f'I renamed the course to "{args.get("title", "")}".',
        "generate_scene": lambda: "I generated the scene's content.",
        "ask_user": lambda: "Thanks, that helps.",
    }.get(result.name, lambda: f"I ran {result.name}.")
    if result.is_error:
        detail = " ".join(result.content.split())[:200]
        return f"I tried to run {result.name}, but it failed: {detail}. Nothing else was changed."
    return done() + " Anything else?"
