"""`openmaic serve` configured the ways OpenMAIC deployments are: an OpenMAIC `openmaic.yml` (presets, null slots,
a fallback), an environment-only deployment, and `MODEL_ROUTES` left over from an older one. Real processes on real
sockets, PostgreSQL, and a fake provider server speaking OpenAI's protocol."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import trio

from openmaic.events.log import EventLog
from openmaic.modelconfig.legacy import LEGACY_ROUTES_MESSAGE
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from tests.fakes.provider_server import Status, Text, open_fake_provider
from tests.serving import FAST_CONFIG, wait_ready

KEY = "sk-env-SECRET-0123456789abcdef"
OUTLINE = {"languageDirective": "Teach in English.", "courseTitle": "Tides from the fake", "outlines": [
    {"type": "slide", "title": "Why the sea rises", "description": "Explain tides", "keyPoints": ["moon"]},
    {"type": "slide", "title": "Spring and neap", "description": "Compare", "keyPoints": []},
    {"type": "quiz", "title": "Check", "description": "Test", "keyPoints": []},
]}  # fmt: skip


def server_log(tmp_path: Path) -> str:
    return (tmp_path / "0-all.stderr").read_text()


def _env(db_url: str, tmp_path: Path, extra: dict[str, str], config: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENMAIC_CONFIG"}
    env.update(DATABASE_URL=db_url, OPENMAIC_DATA_DIR=str(tmp_path / "data"), **extra)
    if config is not None:
        (tmp_path / "openmaic.yml").write_text(config)
        env["OPENMAIC_CONFIG"] = str(tmp_path / "openmaic.yml")
    return env


@contextlib.asynccontextmanager
async def serving(db_url: str, tmp_path: Path, *, env: dict[str, str] | None = None,
                  config: str | None = FAST_CONFIG) -> AsyncIterator[httpx.AsyncClient]:
    """`openmaic serve` (all roles) started in ``tmp_path`` (where it looks for server-providers.yml)."""
    port = free_port()
    with (tmp_path / "0-all.stderr").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "openmaic", "serve", "--port", str(port)], cwd=tmp_path,
                                env=_env(db_url, tmp_path, env or {}, config), stdout=subprocess.DEVNULL, stderr=err)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
            await wait_ready(client, [proc], tmp_path)
            yield client
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def events_until(db_url: str, run_id: str, done: Any, timeout: float = 60) -> list[dict]:
    """The run's logged events (``{type, data}``, internal ones included: they are read from the log itself, not
    through the API, which shows clients a view of them) once ``done(events)`` holds."""
    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        with trio.fail_after(timeout):
            while True:
                events = [{"type": e.type, "data": msgspec.json.decode(e.data)}
                          for e in await log.read_stream(run_id, limit=10_000)]
                if done(events):
                    return events
                await trio.sleep(0.2)


def _ended(events: list[dict]) -> bool:
    return any(e["type"] in ("session.ended", "run.state_changed") and e["data"].get("state", e["data"].get("status"))
               in ("completed", "paused") for e in events)


async def test_an_openmaic_file_with_presets_null_slots_and_a_fallback_boots_and_the_fallback_answers(db_url,
                                                                                                     tmp_path):
    async with open_fake_provider() as fake:
        config = FAST_CONFIG + f"""
providers:
  broken:
    preset: openai-compatible
    baseUrl: {fake.openai_url}
    apiKey: ${{BROKEN_KEY}}
    models: [gpt-broken]
    options: {{maxRetries: 0, timeoutS: 5}}
  claude: {{preset: anthropic, apiKey: never-called-0123456789}}
  mm: {{preset: minimax, apiKey: mm-0123456789}}
slots:
  llm: demo:course
  course.outline: {{model: 'broken:gpt-broken', fallback: 'demo:course'}}
  agent: demo:agent
  agent.title: null
  image: mm
  video: null
  tts: null
  webSearch: null
policy: {{allowWorkspaceProviders: false}}
"""
        fake.push(Status(503, {"error": {"type": "overloaded"}}))
        async with serving(db_url, tmp_path, env={"BROKEN_KEY": KEY}, config=config) as client:
            r = await client.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
            assert r.status_code == 202, r.text
            run_id = r.json()["run"]["id"]
            events = await events_until(db_url, run_id, lambda es: any(e["type"] == "session.ended" for e in es))
            # Media slots set to null are off; image is assigned to a preset whose protocol this server lacks.
            caps = (await client.get("/api/health")).json()["capabilities"]
            assert caps == {"webSearch": False, "imageGeneration": False, "videoGeneration": False, "tts": False}
        assert [r.body["model"] for r in fake.requests] == ["gpt-broken"]
        settled = {e["data"]["element_id"]: e["data"] for e in events
                   if e["type"] == "run.media" and e["data"]["status"] != "generating"}
        (proposed,) = [e["data"] for e in events if e["type"] == "run.outline_proposed"]
        (confirmed,) = [e["data"] for e in events if e["type"] == "run.outline_confirmed"]
        items = confirmed.get("items") or proposed["items"]  # confirmed as proposed
        asked = {m["elementId"]: m["type"] for item in items for m in item.get("mediaGenerations", [])}
        # The video slot is off: the outline asks for no video. The picture slot is on but unusable: each picture
        # asked for fails with what to fix.
        assert asked and set(asked.values()) == {"image"} and settled.keys() == asked.keys()
        for image in settled.values():
            assert image["status"] == "failed" and image["error_code"] == "MISSING_MODEL"
            assert "minimax" in image["message"]
        (research,) = [e["data"] for e in events if e["type"] == "run.research_done"]
        assert research["skipped"] is True
        narrated = [e["data"] for e in events if e["type"] == "run.scene_narrated"]
        assert narrated and all(n.get("actions") is None and n.get("asset_id") is None for n in narrated)
        assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
    used = [e for e in events if e["type"] == "model.fallback_used"]
    assert len(used) == 1 and used[0]["data"]["slot"] == "course.outline"
    assert used[0]["data"]["failed"] == "broken:gpt-broken" and used[0]["data"]["answered"] == "demo:course"
    assert "HTTP 503" in used[0]["data"]["reason"] and KEY not in str(events)
    # Committed with the outline it produced, after the step started and before the step completed.
    marks = [(e["type"], e["data"].get("step")) for e in events]
    assert marks.index(("run.step_started", "outline")) < marks.index(("model.fallback_used", None)) \
        < marks.index(("run.step_completed", "outline"))
    assert events[-1]["data"]["status"] == "completed"
    log = server_log(tmp_path)
    assert "models: from" in log and KEY not in log


async def test_an_environment_only_deployment_answers_from_its_provider_never_the_demo(db_url, tmp_path):
    async with open_fake_provider() as fake:
        fake.push(Text(json.dumps(OUTLINE)), Status(400, {"error": {"type": "stop_here"}}))
        env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.openai_url, "DEFAULT_MODEL": "openai:gpt-env"}
        async with serving(db_url, tmp_path, env=env,
                           config=None) as client:
            r = await client.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
            assert r.status_code == 202, r.text
            run_id = r.json()["run"]["id"]
            events = await events_until(db_url, run_id, lambda es: any(
                e["type"] == "run.state_changed" and e["data"]["state"] == "paused" for e in es))
        assert [r.body["model"] for r in fake.requests][:2] == ["gpt-env", "gpt-env"]
        assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.requests)
    proposed = next(e for e in events if e["type"] == "run.outline_proposed")
    assert proposed["data"]["title"] == "Tides from the fake"  # the fake's outline, not the demo's
    assert "stop_here" in str([e for e in events if e["type"] == "run.step_failed"])
    log = server_log(tmp_path)
    assert "the environment (legacy variables)" in log and "deprecated" in log and KEY not in log


async def test_an_environment_with_a_key_but_no_default_model_never_runs_on_the_demo(db_url, tmp_path):
    async with serving(db_url, tmp_path, env={"OPENAI_API_KEY": KEY}, config=None) as client:
        r = await client.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
        # Refused before any job exists, rather than answered by the demo.
        assert r.status_code == 400 and r.json()["errorCode"] == "MISSING_MODEL", r.text
        assert "no model is assigned to course.outline" in r.json()["error"]
    assert "no DEFAULT_MODEL" in server_log(tmp_path)


@pytest.mark.parametrize("config", [None, FAST_CONFIG])
async def test_model_routes_without_model_slots_stops_the_boot_with_what_to_write(db_url, tmp_path, config):
    env = _env(db_url, tmp_path, {"MODEL_ROUTES": '{"scene-content":"openai:gpt-4o"}', "OPENAI_API_KEY": KEY},
               config)
    done = await trio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "-m", "openmaic", "serve", "--port", str(free_port())], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60))
    assert done.returncode == 2, done.stderr
    assert f"openmaic: error: {LEGACY_ROUTES_MESSAGE}" in done.stderr and KEY not in done.stderr
