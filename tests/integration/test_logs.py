"""Structured logs: `openmaic serve --log-format json` writes only JSON lines; every line an actor writes names its
stream, attempt, worker and step; no line holds a key (a real server, a provider that refuses connections)."""

from __future__ import annotations

import json
import logging

import httpx
import trio

from openmaic import logs
from openmaic.config import parse_config
from openmaic.store.postgres import free_port
from tests.serving import FAST_CONFIG, serve_processes, stderr_of, wait_ready

KEY = "sk-test-0123456789abcdefSECRET"


async def test_json_lines_carry_the_actor_context_and_never_a_key(db_url, tmp_path):
    port, dead = free_port(), free_port()  # nothing listens on `dead`: every provider call is refused
    config = FAST_CONFIG.replace("runtime: {", "runtime: {step_retries: 1, ") + (
        "providers:\n"
        f"  broken: {{preset: openai-compatible, baseUrl: 'http://127.0.0.1:{dead}/v1', apiKey: {KEY},"
        " options: {maxRetries: 1}}\n"
        "slots: {llm: 'broken:m', agent: 'broken:m'}\n"
    )
    with serve_processes(db_url, tmp_path, [(None, port, ["--log-format", "json"])], config=config) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
            await wait_ready(client, procs, tmp_path)
            r = await client.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
            assert r.status_code == 202, r.text
            run_id = r.json()["run"]["id"]
            with trio.fail_after(60):
                while (await client.get(f"/api/generation-runs/{run_id}")).json()["run"]["state"] != "paused":
                    assert procs[0].poll() is None, stderr_of(tmp_path)
                    await trio.sleep(0.2)
    text = (tmp_path / "0-all.stderr").read_text()
    assert KEY not in text and KEY[-12:] not in text
    lines = [json.loads(line) for line in text.splitlines()]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(line["message"].startswith("ready: roles") for line in lines)
    actor_lines = [line for line in lines if line.get("stream_id") == run_id]
    failed = [line for line in actor_lines if "failed" in line["message"] and line.get("step") == "outline"]
    assert len(failed) == 2, actor_lines  # the outline step failed, was retried once, failed again
    for line in actor_lines:
        assert line["attempt"] >= 1 and line["worker"].count(":") == 2 and line["kind"] == "generation", line
    assert any(line["logger"] == "openmaic.models" and line.get("step") == "outline" for line in actor_lines), \
        "the provider's own warning, written inside the step, carries the step too"


def test_json_lines_scrub_every_configured_secret_and_keep_the_traceback(capsys):
    logs.configure("json", secrets=["hunter2-hunter2", "short"])
    try:
        log = logging.getLogger("openmaic.test")
        with logs.bind(stream_id="s1", attempt=3):
            try:
                raise ValueError("the key hunter2-hunter2 leaked into an exception")
            except ValueError:
                log.exception("failed with %s", "hunter2-hunter2")
        log.info("outside")
    finally:
        logs.configure("text")
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first["message"] == "failed with ***" and (first["stream_id"], first["attempt"]) == ("s1", 3)
    assert "ValueError: the key *** leaked" in first["exc"] and "hunter2" not in json.dumps(first)
    assert second["message"] == "outside" and "stream_id" not in second


def test_the_secrets_to_scrub_are_every_key_the_configuration_holds(tmp_path):
    text = ("providers:\n"
            "  a: {preset: openai, apiKey: sk-provider-key-0001}\n"
            "  b: {preset: openai-compatible, baseUrl: 'http://127.0.0.1:9/v1', credentials: {token: cred-0002-xyz}}\n"
            "slots: {llm: 'a:m'}\n")
    env = {"OPENMAIC_SECRET_KEY": "instance-secret-0003-abcdef", "ACCESS_CODE": "access-code-0004"}
    config = parse_config(text, source="t.yml", env=env, base_dir=tmp_path, legacy_dir=tmp_path)
    assert sorted(logs.secrets_of(config)) == sorted(
        ["sk-provider-key-0001", "cred-0002-xyz", "instance-secret-0003-abcdef", "access-code-0004"])
