"""A provider that answers the least the format allows must not stall a run (see openmaic.steps.outputs and
openmaic.steps.contents).

Every chat slot is routed to the fake OpenAI server, which answers in plain text: an outline with no scenes
(refused, so asked again with what was wrong), then one scene whose every string is empty; an empty roster; a
slide with no element (refused, asked again), then one text box with only its place and size; a script with no
action. The run completes: the preset agents stand in, the scene gets a title, and a default script presents it.
"""

from __future__ import annotations

import json

import msgspec

from openmaic.config import ProviderSpec, Secret
from openmaic.courses import format as fmt
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from openmaic.steps.outputs import preset_roster
from tests.fakes.provider_server import Text, open_fake_provider
from tests.integration.test_generation import (
    KEY, OWNER, assert_complete_course, config, open_generation_worker, wait_state,
)  # fmt: skip

BLANK_ITEM = {"type": "slide", "title": "", "description": "", "keyPoints": []}
BARE_TEXT = {"type": "text", "left": 0, "top": 0, "width": 100, "height": 50}


def said(request: object) -> str:
    """The last thing the server said to the model in a chat request."""
    return request.body["messages"][-1]["content"]  # type: ignore[attr-defined]


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
            Text(json.dumps({"courseTitle": "", "outlines": []})),  # no scene: asked again
            Text(json.dumps({"courseTitle": "", "outlines": [BLANK_ITEM]})),
            Text(json.dumps({"agents": []})),
            Text(json.dumps({"elements": []})),  # no element: asked again
            Text(json.dumps({"elements": [BARE_TEXT]})),
            Text(json.dumps([])),
        )
        svc = RunService(log, cfg)
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement="Teach fractions", outline_review="auto"))
        async with open_generation_worker(db_url, cfg):
            await wait_state(svc, snap.id, "completed", "paused")
        assert fake.pending == 0 and not fake.errors
        doc = await assert_complete_course(log, svc, snap.id)
        assert [s.title for s in doc.scenes] == ["Scene 1"]
        assert list(doc.agents) == preset_roster()
        (scene,) = doc.scenes
        assert isinstance(scene.content, fmt.SlideContent)
        (text,) = scene.content.canvas.elements
        assert isinstance(text, fmt.TextElement) and (text.left, text.top, text.width, text.height) == (0, 0, 100, 50)
        # The default script: the slide's text is pointed at while the scene's title is said.
        assert [type(a) for a in scene.actions] == [fmt.SpotlightAction, fmt.SpeechAction]
        assert scene.actions[0].elementId == text.id and scene.actions[1].text == "Scene 1"
        assert len(fake.requests) == 6
        assert "could not be used: the outline reply has no usable scene" in said(fake.requests[1])
        assert "could not be used: the slide reply has no usable element" in said(fake.requests[4])
