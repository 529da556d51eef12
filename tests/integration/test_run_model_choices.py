"""A generation run's model per slot: `openmaic serve` lists what the owner's settings allow, a run started with a
choice has that slot's step call the chosen model (a fake provider records the request), and a model the settings
do not allow is refused, naming the slot and the choices; a Pro session on the run's course writes its scenes with
the run's choices. Real processes, sockets and PostgreSQL."""

from __future__ import annotations

import json

from tests.fakes.provider_server import Text, open_fake_provider
from tests.integration.test_serve_models import OUTLINE, events_until, serving
from tests.serving import FAST_CONFIG, settled_session

KEY = "sk-choices-0123456789abcdef"


def deployment(url: str) -> str:
    return FAST_CONFIG + f"""
providers:
  fake:
    preset: openai-compatible
    baseUrl: {url}
    apiKey: {KEY}
    models: [gpt-small, gpt-large]
    options: {{maxRetries: 0, timeoutS: 10}}
slots:
  llm: demo:course
  course.actions: demo:course
  agent: demo:agent
"""


async def test_a_chosen_model_answers_its_slot_and_a_disallowed_one_is_refused(db_url, tmp_path):
    async with open_fake_provider() as fake:
        async with serving(db_url, tmp_path, config=deployment(fake.openai_url)) as client:
            r = await client.get("/api/model-config/run-choices")
            assert r.status_code == 200, r.text
            slots = {s["slot"]: s for s in r.json()["slots"]}
            assert list(slots) == ["course.outline", "course.agents", "course.content.slide", "course.content.quiz",
                                   "course.content.interactive", "course.actions"]
            # The slot's own model first, then the models the providers declare, then those the settings assign.
            assert slots["course.outline"] == {"slot": "course.outline", "default": "demo:course", "locked": False,
                                               "allowed": ["demo:course", "fake:gpt-small", "fake:gpt-large",
                                                           "demo:agent"]}
            # The deployment sets course.actions itself: its model is the only choice.
            assert slots["course.actions"] == {"slot": "course.actions", "default": "demo:course", "locked": True,
                                               "allowed": ["demo:course"]}

            for models, slot in (({"course.outline": "fake:gpt-huge"}, "course.outline"),
                                 ({"course.actions": "fake:gpt-small"}, "course.actions"),
                                 ({"classroom": "fake:gpt-small"}, "classroom")):
                r = await client.post("/api/generation-runs", json={"requirement": "Tides", "models": models})
                assert r.status_code == 400, r.text
                body = r.json()
                assert body["errorCode"] == "VALIDATION_FAILED" and slot in body["error"], body
                assert body["details"]["slot"] == slot
                if slot != "classroom":
                    assert body["details"]["allowed"] == slots[slot]["allowed"]
                    assert all(choice in body["error"] for choice in slots[slot]["allowed"])
            assert fake.requests == []  # nothing was started

            fake.push(Text(json.dumps(OUTLINE)))
            r = await client.post("/api/generation-runs", json={
                "requirement": "Tides", "outlineReview": "auto",
                "models": {"course.outline": "fake:gpt-large", "course.content.slide": ""}})
            assert r.status_code == 202, r.text
            run = r.json()["run"]
            assert run["input"]["models"] == {"course.outline": "fake:gpt-large"}  # "" is "as in the settings"
            events = await events_until(db_url, run["id"], lambda es: any(e["type"] == "session.ended" for e in es))
            assert events[-1]["data"]["status"] == "completed", events[-1]
    # The outline step, and only it, asked the chosen model; every other step stayed on the settings' demo.
    assert [(q.path, q.body["model"]) for q in fake.requests] == [("/v1/chat/completions", "gpt-large")]
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
    (created,) = [e["data"] for e in events if e["type"] == "run.created"]
    assert created["input"]["models"] == {"course.outline": "fake:gpt-large"}
    (proposed,) = [e["data"] for e in events if e["type"] == "run.outline_proposed"]
    assert [i["title"] for i in proposed["items"]] == [o["title"] for o in OUTLINE["outlines"]]


PAGE = '<!DOCTYPE html><html><body><div id="pool">A tide pool</div></body></html>'


async def test_a_pro_session_writes_its_scenes_with_the_choices_of_the_run_that_made_its_course(db_url, tmp_path):
    async with open_fake_provider() as fake:
        async with serving(db_url, tmp_path, config=deployment(fake.openai_url)) as client:
            # The run chooses a model for interactive scenes, which it writes none of (none asked for): it runs on
            # the settings' demo throughout.
            r = await client.post("/api/generation-runs", json={
                "requirement": "Tides", "outlineReview": "auto", "interactive": False,
                "models": {"course.content.interactive": "fake:gpt-large"}})
            assert r.status_code == 202, r.text
            run = r.json()["run"]
            events = await events_until(db_url, run["id"], lambda es: any(e["type"] == "session.ended" for e in es))
            assert events[-1]["data"]["status"] == "completed", events[-1]
            (course,) = [e["data"]["course_id"] for e in events if e["type"] == "run.created"]
            assert fake.requests == []

            # A Pro session on that course (the demo agent adds the interactive scene asked for): the scene's
            # content step asks the run's choice; its script, a slot the run left as in the settings, the demo.
            fake.push(Text(PAGE))
            r = await client.post("/api/agent/sessions", json={
                "prompt": "add an interactive scene about tide pools", "stageId": course})
            assert r.status_code == 202, r.text
            sid = r.json()["id"]
            meta = await settled_session(client, sid)
            assert meta["status"] == "succeeded", meta
            assert [q.body["model"] for q in fake.requests] == ["gpt-large"]
            assert "tide pools" in json.dumps(fake.requests[0].body["messages"]).lower()

            # A session on a course no run made (its own new course) follows the owner's settings.
            r = await client.post("/api/agent/sessions", json={"prompt": "add an interactive scene about waves"})
            sid = r.json()["id"]
            meta = await settled_session(client, sid)
            assert meta["status"] == "succeeded", meta
            assert len(fake.requests) == 1
