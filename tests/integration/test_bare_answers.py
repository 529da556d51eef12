"""A provider that answers the least each schema allows must not stall a run (see openmaic.steps.outputs).

Every chat slot is routed to the fake OpenAI server, which answers: an outline with no scenes (refused by the
schema, so asked again), then one scene whose every string is empty; an empty roster; a slide with nothing on
it; no actions. The run completes: the built-in teacher stands in, the scene gets a title, and the teacher
presents it.
"""

from __future__ import annotations

import msgspec

from openmaic.config import ProviderSpec, Secret
from openmaic.runs.agents import BUILTIN_AGENTS
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from tests.fakes.provider_server import Json, open_fake_provider
from tests.integration.test_generation import (
    KEY, OWNER, assert_complete_course, config, open_generation_worker, wait_state,
)  # fmt: skip

BLANK_ITEM = {"title": "", "goal": "", "kind": "slide", "key_points": []}


async def test_bare_minimum_answers_complete_the_run(db_url, db):
    from openmaic.events.log import EventLog

    log = EventLog(db)
    async with open_fake_provider() as fake:
        base = config()
        providers = {**base.providers, "fake": ProviderSpec(preset="openai-compatible", base_url=fake.openai_url,
                                                            api_key=Secret(KEY),
                                                            options={"maxRetries": 0, "timeoutS": 5.0})}
        cfg = msgspec.structs.replace(base, providers=providers, slots={"llm": "fake:gpt-min", "agent": "demo:agent"})
        fake.push(
            Json({"title": "", "items": []}),  # breaks the schema's minItems: asked again
            Json({"title": "", "items": [BLANK_ITEM]}),
            Json({"agents": []}),
            Json({"title": "", "bullets": [], "notes": ""}),
            Json({"actions": []}),
        )
        svc = RunService(log, cfg)
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement="Teach fractions", outline_review="auto"))
        async with open_generation_worker(db_url, cfg):
            await wait_state(svc, snap.id, "completed", "paused")
        assert fake.pending == 0 and not fake.errors
        doc = await assert_complete_course(log, svc, snap.id)
        assert [s.title for s in doc.scenes] == ["Scene 1"]
        assert list(doc.agents) == [BUILTIN_AGENTS["default-1"].profile()]
        (scene,) = doc.scenes
        assert scene.content is not None and scene.content.slide is not None
        assert [(a.kind, a.agent_id) for a in scene.actions.actions] == [("speech", doc.agents[0].id)]
        outline_schema = fake.requests[0].body["response_format"]["json_schema"]["schema"]
        assert outline_schema["properties"]["items"]["minItems"] == 1
        assert "Expected `array` of length >= 1" in fake.requests[1].body["messages"][-1]["content"]
