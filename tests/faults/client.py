"""What the fault tests do as a client of a running server: start runs and agent sessions over the HTTP API and
wait, condition by condition, for them to finish and for the library to show them."""

from __future__ import annotations

import json

import httpx
import trio

from openmaic.events.log import EventLog


async def start_run(client: httpx.AsyncClient, requirement: str) -> str:
    r = await client.post("/api/generation-runs", json={"requirement": requirement, "outlineReview": "auto"})
    assert r.status_code == 202, r.text
    return r.json()["run"]["id"]


async def check_run(log: EventLog, run: str) -> None:
    """The run's log is gap-free, commits each step once and ends once."""
    events = await log.read_stream(run, limit=100_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    steps = [json.loads(bytes(e.data))["step"] for e in events if e.type == "run.step_completed"]
    assert len(steps) == len(set(steps)), f"{run}: a step was committed twice: {steps}"
    assert [e.type for e in events].count("session.ended") == 1


async def start_session(client: httpx.AsyncClient, prompt: str) -> str:
    r = await client.post("/api/agent/sessions", json={"prompt": prompt})
    assert r.status_code == 202, r.text
    return r.json()["id"]


async def run_completed(client: httpx.AsyncClient, run_id: str) -> None:
    with trio.fail_after(60):
        while (run := (await client.get(f"/api/generation-runs/{run_id}")).json()["run"])["state"] != "completed":
            assert run["state"] != "paused", run
            await trio.sleep(0.1)


async def session_idle(client: httpx.AsyncClient, session_id: str) -> None:
    with trio.fail_after(60):
        while (await client.get(f"/api/agent/sessions/{session_id}")).json()["status"] != "succeeded":
            await trio.sleep(0.1)


async def library(client: httpx.AsyncClient, runs: list[str], n: int) -> list[dict]:
    """The library once it shows ``n`` classrooms, those of ``runs`` among them as ready (the projector catches up
    on its own)."""
    with trio.fail_after(30):
        while True:
            cards = (await client.get("/api/classrooms")).json()["classrooms"]
            ready = {c["runId"] for c in cards if c["label"] == "ready"}
            if len(cards) == n and ready >= set(runs):
                return cards
            await trio.sleep(0.1)
