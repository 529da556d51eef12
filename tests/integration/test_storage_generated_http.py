"""A course generated here is one of its owner's documents: listed by ``GET /api/persistence/documents`` under its
course id and loaded whole, every narration clip its speech actions name readable through the asset store
(OpenMAIC's browser resolves ``audioId`` there)."""

from __future__ import annotations

import trio

from tests.serving import FAST_CONFIG, running_server

DEMO = FAST_CONFIG + ("providers: {demo: {preset: demo, options: {latencyMs: 1}}}\n"
                      "slots: {llm: demo:course, agent: demo:agent, tts: demo}\n")


async def test_a_generated_course_is_listed_and_loads_whole(db_url, tmp_path):
    async with running_server(db_url, tmp_path, DEMO) as (c, _):
        r = await c.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
        assert r.status_code == 202, r.text
        run_id = r.json()["run"]["id"]
        with trio.fail_after(90):
            while (run := (await c.get(f"/api/generation-runs/{run_id}")).json()["run"])["state"] != "completed":
                assert run["state"] not in ("paused", "ended"), run
                await trio.sleep(0.2)
        course = run["stageId"]

        r = await c.get("/api/persistence/documents")
        assert r.status_code == 200, r.text
        (summary,) = [d for d in r.json() if d["id"] == course]
        room = (await c.get(f"/api/classrooms/{course}")).json()["classroom"]
        assert summary["sceneCount"] == len(room["scenes"]) > 0
        assert summary["name"] == room["stage"]["name"]

        r = await c.get(f"/api/persistence/documents/{course}")
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["stage"]["id"] == course and doc["dslVersion"]
        assert [s["id"] for s in doc["scenes"]] == [s["id"] for s in room["scenes"]]
        for scene in doc["scenes"]:
            r = await c.get(f"/api/persistence/documents/{course}/scenes/{scene['id']}")
            assert r.status_code == 200 and r.json() == scene
        clips = [a["audioId"] for s in doc["scenes"] for a in s.get("actions") or [] if a.get("audioId")]
        assert clips  # the demo provider speaks every speech action
        for clip in clips:
            r = await c.get(f"/api/persistence/assets/{clip}/content")
            assert r.status_code == 200 and r.content, (clip, r.text)
            assert r.headers["content-type"].startswith("audio/") and r.headers["x-asset-revision"] == "1"

        # Deleted, it is gone from the listing; its id can be saved again as a document of the owner's.
        assert (await c.delete(f"/api/persistence/documents/{course}")).status_code == 204
        assert [d for d in (await c.get("/api/persistence/documents")).json() if d["id"] == course] == []
        assert (await c.get(f"/api/persistence/documents/{course}")).status_code == 404
        r = await c.put(f"/api/persistence/documents/{course}", json={**doc, "scenes": doc["scenes"][:1]})
        assert r.status_code == 204, r.text
        assert len((await c.get(f"/api/persistence/documents/{course}")).json()["scenes"]) == 1
