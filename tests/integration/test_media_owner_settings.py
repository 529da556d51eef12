"""An owner gives a media slot to a provider on the Models page, over a real `openmaic serve`: their runs'
pictures are then drawn by that provider, and its key appears nowhere a client or the log can read.

The deployment declares the provider (with the fake's endpoint: as in OpenMAIC, an owner's own media provider
can only use its preset's public endpoint, so one of the owner's own cannot be pointed at a fake) and leaves the
picture slot unassigned, so the slot is the owner's to set. That an owner's own key serves that owner only is
tested beside the router (tests/unit/test_media_slots.py)."""

from __future__ import annotations

import httpx
import trio

from openmaic.store.database import open_database
from tests.fakes.media_server import open_fake_media
from tests.serving import FAST_CONFIG, running_server

KEY = "sk-owner-pictures-SECRET-0123456789"
CONFIG = """\
providers:
  demo: {{preset: demo, options: {{latencyMs: 5}}}}
  pics: {{preset: openai-image, apiKey: {key}, baseUrl: '{url}'}}
slots: {{llm: 'demo:course', agent: 'demo:agent', video: null, tts: null, webSearch: null}}
"""


async def _completed(client: httpx.AsyncClient, run_id: str) -> dict:
    with trio.fail_after(60):
        while (run := (await client.get(f"/api/generation-runs/{run_id}")).json()["run"])["state"] != "completed":
            assert run["state"] not in ("paused", "ended"), run
            await trio.sleep(0.1)
    return run


async def test_an_owner_who_assigns_the_picture_slot_gets_pictures_from_that_provider(db_url, tmp_path):
    async with open_fake_media() as fake, \
            running_server(db_url, tmp_path, FAST_CONFIG + CONFIG.format(key=KEY, url=fake.url)) as (client, _):  # fmt: skip
        view = (await client.get("/api/model-config")).json()
        slots = {s["slot"]: s for s in view["slots"]}
        assert slots["image"]["locked"] is False and slots["video"]["locked"] is True

        # Before: the picture slot is off for this owner, so the run's outline asks for no pictures.
        run = (await client.post("/api/generation-runs", json={"requirement": "Volcanoes",
                                                               "outlineReview": "auto"})).json()["run"]
        before = await _completed(client, run["id"])
        assert before["media"] == {} and fake.of("images") == []

        r = await client.put("/api/model-config", json={"revision": view["revision"], "change": {
            "kind": "slots", "set": {"image": "pics:gpt-image-1"}}})
        assert r.status_code == 200, r.text
        image = next(s for s in r.json()["slots"] if s["slot"] == "image")
        assert image["effective"]["providerId"] == "pics", image
        assert KEY not in r.text

        run = (await client.post("/api/generation-runs", json={"requirement": "Volcanoes",
                                                               "outlineReview": "auto"})).json()["run"]
        done = await _completed(client, run["id"])
        pictures = {k: m for k, m in done["media"].items() if m["mediaType"] == "image"}
        videos = {k: m for k, m in done["media"].items() if m["mediaType"] == "video"}
        assert pictures and {m["status"] for m in pictures.values()} == {"done"}, done["media"]
        assert videos == {}  # the deployment's null stays off: no video is asked for
        calls = fake.of("images")
        assert len(calls) == len(pictures)
        assert {c.headers["authorization"] for c in calls} == {f"Bearer {KEY}"}
        assert {c.body["model"] for c in calls} == {"gpt-image-1"}
        asset = await client.get(f"/api/assets/{next(iter(pictures.values()))['assetId']}")
        assert asset.status_code == 200 and asset.headers["content-type"] == "image/png"
        assert KEY not in str(done) + (await client.get("/api/model-config")).text

    async with open_database(db_url, max_size=1) as db:
        logged = await db.fetchval("SELECT count(*) FROM events WHERE strpos(data::text, $1) > 0", KEY)
        described = await db.fetchval("SELECT count(*) FROM assets WHERE strpos(concat_ws(' ', id, media_type, kind, "
                                      "course_id), $1) > 0", KEY)
    assert (logged, described) == (0, 0)
