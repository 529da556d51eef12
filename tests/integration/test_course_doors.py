"""One course, every door: a generated course is the same OpenMAIC document wherever it is read, a document saved at
the persistence door is the course the classroom and the Pro session read, and a course a run is writing refuses
writes at every door. Over real sockets, against a real ``openmaic serve`` (the demo provider writes the course).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import trio

from openmaic.courses import format as fmt
from tests.eventsource import open_sse
from tests.serving import FAST_CONFIG, ROOT, running_server, settled_session

CONFIG = FAST_CONFIG  # nothing configured: the offline demo answers every slot, media and narration included
SLOW = FAST_CONFIG + ("providers: {demo: {preset: demo, options: {latencyMs: 40}}}\n"
                      "slots: {llm: demo:course, agent: demo:agent}\n")
JSON = {"Content-Type": "application/json"}


async def wait_run(client: httpx.AsyncClient, run_id: str, *states: str, timeout: float = 90) -> dict[str, Any]:
    with trio.fail_after(timeout):
        while True:
            run = (await client.get(f"/api/generation-runs/{run_id}")).json()["run"]
            if run["state"] in states:
                return run
            await trio.sleep(0.1)


def media_neutral(value: Any) -> Any:
    """``value`` with generated media references replaced by one token: a run's scene events carry the placeholders
    the course keeps, the document the asset each settled into."""
    if isinstance(value, dict):
        if "mediaRef" in value:  # a generated video: named by its ref, its src and poster come when it is done
            value = {k: v for k, v in value.items() if k not in ("src", "poster")}
        return {k: ("<media>" if k in ("src", "poster") and isinstance(v, str)
                    and v.startswith(("gen_", "/api/assets/")) else media_neutral(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [media_neutral(v) for v in value]
    return value


async def scene_events(base: str, run_id: str) -> list[dict[str, Any]]:
    """The ``scene_ready`` events of a finished run, read from its SSE backlog."""
    out: list[dict[str, Any]] = []
    async with open_sse(f"{base}/api/generation-runs/{run_id}/events?after=0") as r:
        event = None
        async for line in r.lines:
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                if event == "scene_ready":
                    out.append(json.loads(line[6:])["data"])
                if event == "caught_up":
                    break
    return out


async def test_a_generated_course_is_one_document_at_every_door(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG) as (client, port):
        r = await client.post("/api/generation-runs", headers=JSON, json={
            "requirement": "Ohm's law for 14-year-olds, with pictures", "interactive": True, "outlineReview": "auto"})
        assert r.status_code == 202, r.text
        run = r.json()["run"]
        done = await wait_run(client, run["id"], "completed")
        course_id = done["stageId"]

        classroom = (await client.get(f"/api/classrooms/{course_id}")).json()["classroom"]
        document = (await client.get(f"/api/persistence/documents/{course_id}")).json()
        assert document["dslVersion"] == fmt.DSL_VERSION and fmt.validate_document(document) == []
        assert (classroom["stage"], classroom["scenes"]) == (document["stage"], document["scenes"])
        assert {s["type"] for s in document["scenes"]} == {"slide", "quiz", "interactive"}
        for scene in document["scenes"]:
            one = (await client.get(f"/api/persistence/documents/{course_id}/scenes/{scene['id']}")).json()
            assert one == scene
        # the run's own scene events carry the same scenes (their media still placeholders)
        ready = await scene_events(f"http://127.0.0.1:{port}", run["id"])
        assert [e["sceneId"] for e in ready] == [s["id"] for s in document["scenes"]]
        for event, scene in zip(ready, document["scenes"], strict=True):
            a, b = media_neutral(event["scene"]), media_neutral(scene)
            assert a == b, scene["id"]
        # every generated picture and video settled into an asset the document names, and it is served
        assert classroom["media"] and all(m["status"] == "done" for m in classroom["media"].values())
        named = [e for s in document["scenes"] if s["type"] == "slide" for e in s["content"]["canvas"]["elements"]
                 if e["type"] in ("image", "video")]
        assert named and all(e["src"].startswith("/api/assets/") for e in named)
        for e in named:
            assert (await client.get(e["src"])).status_code in (200, 206)
        # narration: each speech action names its own clip
        speeches = [a for s in document["scenes"] for a in s.get("actions", []) if a["type"] == "speech"]
        assert speeches and all(a.get("audioId") for a in speeches)
        assert len({a["audioId"] for a in speeches}) > len(document["scenes"])
        # the classroom page is served for it
        page = await client.get(f"/classroom/{course_id}")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]

    # openmaic replay folds the log into the same document
    replayed = subprocess.run([sys.executable, "-m", "openmaic", "replay", course_id, "--json"], cwd=ROOT,
                              env=_env(db_url), capture_output=True, timeout=60, check=True)
    assert json.loads(replayed.stdout) == document


def _env(db_url: str) -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("OPENMAIC_")} | {"DATABASE_URL": db_url}


def edited(document: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(document))
    out["scenes"][0]["title"] = "Renamed at the door"
    return out


async def test_a_saved_document_is_the_course_the_classroom_and_the_pro_session_read(db_url, tmp_path):
    example = json.loads((ROOT / "tests" / "fixtures" / "course_format_example.json").read_text())
    doc_id = example["stage"]["id"]
    async with running_server(db_url, tmp_path, CONFIG) as (client, _):
        r = await client.put(f"/api/persistence/documents/{doc_id}", headers=JSON, json=example)
        assert r.status_code == 204, r.text
        with trio.fail_after(30):  # the library is a read model: it shows the course once its projector applied it
            while not (cards := [c for c in (await client.get("/api/classrooms")).json()["classrooms"]
                                 if c["title"] == example["stage"]["name"]]):
                await trio.sleep(0.05)
        (card,) = cards
        classroom = (await client.get(f"/api/classrooms/{card['id']}")).json()["classroom"]
        assert classroom["stage"]["id"] == doc_id and [s["id"] for s in classroom["scenes"]] == \
            [s["id"] for s in example["scenes"]]
        assert classroom["scenes"][2] == example["scenes"][2]  # the interactive page, whole
        # edited at the door: the classroom reads the edit
        r = await client.put(f"/api/persistence/documents/{doc_id}", headers=JSON, json=edited(example))
        assert r.status_code == 204, r.text
        classroom = (await client.get(f"/api/classrooms/{card['id']}")).json()["classroom"]
        assert classroom["scenes"][0]["title"] == "Renamed at the door"
        # and a Pro session edits it: its course read names the saved scenes, its edit lands in the document
        r = await client.post("/api/agent/sessions", headers=JSON, json={
            "prompt": "Rename the course to \"Ohm for beginners\"", "stageId": card["id"]})
        assert r.status_code == 202, r.text
        session = r.json()["id"]
        await settled_session(client, session)
        after = (await client.get(f"/api/persistence/documents/{doc_id}")).json()
        assert after["stage"]["name"] == "Ohm for beginners" and fmt.validate_document(after) == []
        assert [s["id"] for s in after["scenes"]] == [s["id"] for s in example["scenes"]]


async def test_a_course_a_run_is_writing_refuses_writes_at_every_door(db_url, tmp_path):
    async with running_server(db_url, tmp_path, SLOW) as (client, _):
        run = (await client.post("/api/generation-runs", headers=JSON, json={
            "requirement": "Fractions", "outlineReview": "auto"})).json()["run"]
        with trio.fail_after(60):
            while True:
                run = (await client.get(f"/api/generation-runs/{run['id']}")).json()["run"]
                room = (await client.get(f"/api/classrooms/{run['stageId']}")).json() if run["stageId"] else None
                if room and room["classroom"]["scenes"] and run["state"] == "generating":
                    break
                await trio.sleep(0.05)
        course_id = run["stageId"]
        document = (await client.get(f"/api/persistence/documents/{course_id}")).json()
        scene = document["scenes"][0]
        refused = [
            await client.put(f"/api/persistence/documents/{course_id}", headers=JSON, json=edited(document)),
            await client.put(f"/api/persistence/documents/{course_id}/stage", headers=JSON,
                             json={**document["stage"], "name": "Mine now"}),
            await client.put(f"/api/persistence/documents/{course_id}/scenes/{scene['id']}", headers=JSON,
                             json={**scene, "title": "Mine now"}),
            await client.post("/api/agent/sessions", headers=JSON, json={"prompt": "Rename it", "stageId": course_id}),
        ]
        assert [r.status_code for r in refused] == [409, 409, 409, 409], [r.text for r in refused]
        assert all("run" in r.text for r in refused)  # each names why: a run is writing it
        done = await wait_run(client, run["id"], "completed")
        final = (await client.get(f"/api/persistence/documents/{course_id}")).json()
        assert final["stage"]["name"] != "Mine now" and all(s["title"] != "Mine now" for s in final["scenes"])
        assert done["state"] == "completed"
        # once the run is done the course opens to writes
        r = await client.put(f"/api/persistence/documents/{course_id}", headers=JSON, json=edited(final))
        assert r.status_code == 204, r.text
