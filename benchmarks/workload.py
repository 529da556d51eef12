"""A realistic event workload: generation runs building courses and workbench sessions editing them.

A scenario is a sequence of *steps*; a step is what one append commits atomically (a list of :class:`Write`, one
per stream, as the product writes them: a run step commits to its run and its course together). The same
scenarios feed the integration tests (appended through ``EventLog.append``, concurrently) and the replay
benchmark (flattened, hash-chained in Python and loaded with COPY).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from openmaic.courses import format as fmt
from openmaic.courses.events import (
    CourseCreated,
    CourseDeleted,
    CourseOutlineSet,
    CourseRetitled,
    CourseSceneSet,
    CourseUnlocked,
)
from openmaic.events.core import (
    LeaseClaimed,
    LeaseReleased,
    ModelOutputDelta,
    ModelTurnCompleted,
    SessionCreated,
    SessionEnded,
    SessionInterrupted,
    SessionMessagePosted,
    ToolCalled,
    ToolResult,
)
from openmaic.events.types import Event
from openmaic.runs.events import (
    RunCreated,
    RunInput,
    RunOutlineConfirmed,
    RunOutlineItem,
    RunOutlineProposed,
    RunStateChanged,
    RunStepCompleted,
    RunStepFailed,
    RunStepStarted,
    RunStopRequested,
)

WORDS = ("photosynthesis chlorophyll light energy glucose oxygen carbon leaf plant cell membrane water sugar "
         "root stem enzyme reaction molecule atom electron orbit gravity planet star galaxy").split()


def _slide(rng: random.Random, course_id: str, scene_id: str, title: str, order: int) -> fmt.Scene:
    """A slide scene as generation writes one: a title and four lines of text on the format's canvas."""
    body = "".join(f"<p>{_words(rng, 7)}</p>" for _ in range(4))
    elements: list[fmt.Element] = [
        fmt.TextElement(id="text_title", left=60, top=50, width=880, height=70, rotate=0,
                        content=f"<p><strong>{title}</strong></p>", defaultFontName="Microsoft YaHei",
                        defaultColor="#333333"),
        fmt.TextElement(id="text_body", left=60, top=140, width=880, height=160, rotate=0, content=body,
                        defaultFontName="Microsoft YaHei", defaultColor="#333333"),
    ]
    canvas = fmt.Slide(id=f"canvas-{scene_id}", viewportSize=1000, viewportRatio=0.5625, theme=fmt.DEFAULT_THEME,
                       elements=elements)
    return fmt.Scene(id=scene_id, stageId=course_id, type="slide", title=title, order=order,
                     content=fmt.SlideContent(canvas=canvas))


@dataclass
class Write:
    stream_id: str
    events: list[Event]
    create: tuple[str, str] | None = None
    """(kind, owner) when this write creates the stream."""


Step = list[Write]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@dataclass
class _Seqs:
    n: dict[str, int] = field(default_factory=dict)

    def after(self, step: Step) -> Step:
        for w in step:
            self.n[w.stream_id] = self.n.get(w.stream_id, 0) + len(w.events)
        return step


def generation(rng: random.Random, run_id: str, course_id: str, owner: str, *, scenes: int = 4,
               fail_at: int | None = None, delete_at: int | None = None) -> Iterator[Step]:
    """A classic run: outline streamed, confirmed, scenes generated (content then actions); optionally pausing
    on a failed scene, or stopped because its course is deleted."""
    title = _words(rng, 3).title()
    items = [fmt.SceneOutline(id=f"{course_id}-s{i}", type="slide", title=_words(rng, 3),
                              description=_words(rng, 8), keyPoints=[_words(rng, 4)] * 3, order=i + 1)
             for i in range(scenes)]
    yield [
        Write(run_id, [RunCreated(course_id=course_id, owner_id=owner,
                                  input=RunInput(requirement=f"Teach {_words(rng, 6)}")),
                       RunStateChanged(state="preparing")], create=("generation", owner)),
        Write(course_id, [CourseCreated(title=title, requirement=_words(rng, 6), locked_by=run_id)],
              create=("course", owner)),
    ]
    yield [Write(run_id, [LeaseClaimed(attempt=1, worker="w-1", reason="queued"),
                          RunStateChanged(state="outlining", previous="preparing"), RunStepStarted(step="outline")])]
    for i, item in enumerate(items):
        yield [Write(run_id, [RunOutlineItem(index=i, item=item)])]
    yield [Write(run_id, [RunOutlineProposed(revision=1, title=title, items=items), RunStepCompleted(step="outline"),
                          RunStateChanged(state="awaiting_outline_confirmation", previous="outlining"),
                          LeaseReleased(attempt=1, reason="waiting")])]
    yield [Write(run_id, [RunOutlineConfirmed(revision=1), LeaseClaimed(attempt=2, worker="w-2", reason="queued"),
                          RunStateChanged(state="generating", previous="awaiting_outline_confirmation")]),
           Write(course_id, [CourseOutlineSet(revision=1, title=title, outlines=items,
                                              scene_ids=[it.id for it in items])])]
    for i, scene in enumerate(items):
        if delete_at == i:
            yield [Write(course_id, [CourseDeleted()])]
            yield [Write(run_id, [RunStopRequested(), RunStateChanged(state="ended", previous="generating"),
                                  SessionEnded(status="ended")])]
            return
        step = f"scene:{i}:content"
        yield [Write(run_id, [RunStepStarted(step=step)])]
        if fail_at == i:
            yield [Write(run_id, [RunStepFailed(step=step, error="provider error"),
                                  RunStateChanged(state="paused", previous="generating", step=step,
                                                  error="provider error"),
                                  LeaseReleased(attempt=2, reason="waiting")])]
            return
        with_content = _slide(rng, course_id, scene.id, scene.title, i + 1)
        yield [Write(run_id, [RunStepCompleted(step=step)]),
               Write(course_id, [CourseSceneSet(scene=with_content, ready=False)])]
        step = f"scene:{i}:actions"
        actions = [fmt.SpeechAction(id=f"action_{n}", text=_words(rng, 12)) for n in range(3)]
        ready = fmt.Scene(id=with_content.id, stageId=course_id, type="slide", title=scene.title, order=i + 1,
                          content=with_content.content, actions=actions)
        yield [Write(run_id, [RunStepStarted(step=step), RunStepCompleted(step=step)]),
               Write(course_id, [CourseSceneSet(scene=ready)])]
    yield [Write(run_id, [RunStateChanged(state="completed", previous="generating"), SessionEnded(status="completed")]),
           Write(course_id, [CourseUnlocked(run_id=run_id)])]


def workbench(rng: random.Random, session_id: str, course_id: str, owner: str, *, turns: int = 3,
              deltas: int = 8, interrupt_at: int | None = None, end: str | None = None) -> Iterator[Step]:
    """A workbench session on a course of its own: turns of streamed output, tool calls editing the course,
    follow-ups, a shutdown interruption repaired with an ``interrupted`` tool result, an ending."""
    seqs = _Seqs()
    first = f"Make a course about {_words(rng, 4)}"
    yield seqs.after([
        Write(session_id, [SessionCreated(kind="workbench", owner_id=owner,
                                          input={"course_id": course_id, "message": first}),
                           SessionMessagePosted(text=first)], create=("workbench", owner)),
        Write(course_id, [CourseCreated(title=_words(rng, 2).title())], create=("course", owner)),
    ])
    pending = [seqs.n[session_id]]
    attempt = 0
    for turn in range(turns):
        attempt += 1
        yield seqs.after([Write(session_id, [LeaseClaimed(attempt=attempt, worker="w-1", reason="queued")])])
        for _ in range(deltas):
            yield seqs.after([Write(session_id, [ModelOutputDelta(text=_words(rng, 5) + " ")])])
        call = {"id": f"call-{turn}", "name": "update_scene", "arguments": {"title": _words(rng, 3)}}
        yield seqs.after([Write(session_id, [ModelTurnCompleted(text=_words(rng, 10), tool_calls=[call],
                                                                delivered=pending),
                                             ToolCalled(call_id=call["id"], name="update_scene",
                                                        arguments=call["arguments"])])])
        pending = []
        if interrupt_at == turn:
            yield seqs.after([Write(session_id, [SessionInterrupted(reason="shutdown"),
                                                 LeaseReleased(attempt=attempt, reason="shutdown")])])
            attempt += 1
            yield seqs.after([Write(session_id, [
                LeaseClaimed(attempt=attempt, worker="w-2", reason="queued"),
                ToolResult(call_id=call["id"], name="update_scene", ok=False, error="interrupted", interrupted=True),
            ])])
        else:
            scene = _slide(rng, course_id, f"{course_id}-s{turn}", call["arguments"]["title"], turn + 1)
            yield seqs.after([
                Write(session_id, [ToolResult(call_id=call["id"], name="update_scene", result={"scene_id": scene.id})]),
                Write(course_id, [CourseSceneSet(scene=scene)] + ([CourseRetitled(title=_words(rng, 3))]
                                                                  if turn == 1 else [])),
            ])
        for _ in range(deltas // 2):
            yield seqs.after([Write(session_id, [ModelOutputDelta(text=_words(rng, 5) + " ")])])
        yield seqs.after([Write(session_id, [ModelTurnCompleted(text=_words(rng, 12)),
                                             LeaseReleased(attempt=attempt, reason="waiting")])])
        if turn + 1 < turns:
            text = f"Now {_words(rng, 5)}"
            yield seqs.after([Write(session_id, [SessionMessagePosted(text=text)])])
            pending = [seqs.n[session_id]]
    if end is not None:
        yield seqs.after([Write(session_id, [SessionEnded(status=end)])])


def scenarios(seed: int, runs: int, sessions: int, *, prefix: str = "", owners: int = 5) -> list[Iterator[Step]]:
    """``runs`` generation runs (some paused, some deleted) and ``sessions`` workbench sessions, shuffled."""
    rng = random.Random(seed)
    out: list[Iterator[Step]] = []
    for i in range(runs):
        owner = f"owner-{i % owners}"
        kind = i % 10
        out.append(generation(random.Random(rng.random()), f"{prefix}run-{i}", f"{prefix}course-{i}", owner,
                              scenes=rng.randint(3, 8), fail_at=1 if kind == 3 else None,
                              delete_at=2 if kind == 7 else None))
    for i in range(sessions):
        owner = f"owner-{i % owners}"
        out.append(workbench(random.Random(rng.random()), f"{prefix}wb-{i}", f"{prefix}wbcourse-{i}", owner,
                             turns=rng.randint(1, 4), interrupt_at=0 if i % 5 == 2 else None,
                             end="cancelled" if i % 7 == 3 else None))
    rng.shuffle(out)
    return out
