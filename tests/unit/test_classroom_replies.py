"""Which question waits for a reply, and whether the reply claimed after it is being written
(:mod:`openmaic.api.classroom_replies`); and the follow-up a classmate adds in a discussion
(:func:`openmaic.steps.tutoring.tutor_messages`, the demo model's answer to it)."""

from __future__ import annotations

import datetime as dt
import json

from openmaic.api import classroom_replies as replies
from openmaic.models.demo_course.answer import answer_brief
from openmaic.steps.tutoring import SceneContext, Speaker, Turn, tutor_messages

NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)


def user(seq: int, text: str = "Why?") -> dict:
    return {"id": f"q{seq}", "seq": seq, "payload": {"role": "user", "content": text}}


def claim(seq: int, *, process: str = "elsewhere", attempt: str = "a", lapses_in_s: float = 60) -> dict:
    until = (NOW + dt.timedelta(seconds=lapses_in_s)).isoformat()
    return {"id": f"c{seq}", "seq": seq, "payload": {"role": "system", "content": "", "reply": {
        "to": "q", "attempt": attempt, "process": process, "until": until}}}


def reply(seq: int) -> dict:
    return {"id": f"r{seq}", "seq": seq, "payload": {"role": "assistant", "content": "Because."}}


def test_the_last_question_waits_until_a_reply_follows_it():
    assert replies.pending([]) is None
    assert replies.pending([user(0), claim(1), reply(2)]) is None
    waiting = replies.pending([user(0), claim(1), reply(2), user(3)])
    assert waiting is not None and waiting.question["id"] == "q3" and waiting.claim is None and waiting.last_seq == 3
    waiting = replies.pending([user(0), claim(1), claim(2)])  # claimed again after a lapse: the last claim counts
    assert waiting is not None and waiting.claim == claim(2)["payload"]["reply"] and waiting.last_seq == 2
    # A follow-up after the reply, and records some other client wrote, change nothing.
    assert replies.pending([user(0), claim(1), reply(2), reply(3), {"id": "x", "seq": 4, "payload": "?"}]) is None


def test_a_claim_is_live_until_it_lapses_and_in_this_process_only_while_its_attempt_runs():
    assert not replies.live(None, NOW)
    assert replies.live(claim(1)["payload"]["reply"], NOW)
    assert not replies.live(claim(1, lapses_in_s=-1)["payload"]["reply"], NOW)
    assert not replies.live({**claim(1)["payload"]["reply"], "until": "not a time"}, NOW)
    mine = claim(1, process=replies.PROCESS, attempt="not-running")["payload"]["reply"]
    assert not replies.live(mine, NOW)  # this process does not write it: cut off with its request
    replies._running.add("running")
    try:
        assert replies.live({**mine, "attempt": "running"}, NOW)
    finally:
        replies.ended("running")
    assert not replies.live({**mine, "attempt": "running"}, NOW)


def test_a_classmate_follows_up_the_lead_agents_answer():
    lead, mate = Speaker(id="t", name="Ms Moon", role="teacher"), Speaker(id="s", name="Cat", role="student")
    messages = tutor_messages(
        message="Sun or moon?", speaker=mate, scene=SceneContext(title="Tides", speech=["The sea rises.", "Twice."]),
        course="", agents=[lead, mate], language="en", topic="Sun or moon?", follow_up="Ms Moon",
        history=[Turn(role="user", content="Sun or moon?"),
                 Turn(role="assistant", content="The moon.", name="Ms Moon")])
    assert "You are Cat" in messages[0].text
    assert messages[-2].text == "Ms Moon: The moon."
    last = messages[-1].text
    assert "Ms Moon has answered" in last and "As Cat, add a short follow-up" in last
    brief = json.loads(last.split("Brief (JSON):", 1)[1])
    assert brief["followUp"] == "Ms Moon" and brief["agent"]["name"] == "Cat"
    # The demo model answers it from the brief: the classmate adds the scene's last line.
    assert answer_brief(brief) == ("Cat here. Adding to what Ms Moon said: Twice. I wonder where we see that "
                                          "in real life?")
