"""Creates a client can repeat: the Idempotency-Key of POST /api/generation-runs, /api/generate-classroom and
/api/agent/sessions (over a real server), and a first answer built from what was committed, so that a read failing
after the commit (a failover) does not answer a created run or session as a failure."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import trio

from openmaic import errors
from openmaic.actors.idempotency import IdempotencyKey
from openmaic.config import default_config
from openmaic.events.core import LeaseClaimed
from openmaic.events.log import EventLog, StreamAppend
from openmaic.runs.events import RunInput, RunStateChanged
from openmaic.runs.service import RunService
from openmaic.store.ports import free_port
from openmaic.workbench.service import WorkbenchSessions
from tests.serving import FAST_CONFIG, serve_processes, wait_ready

CREATES = [
    ("/api/generation-runs", {"requirement": "Tides", "outlineReview": "wait"}, {"requirement": "Waves"}),
    ("/api/generate-classroom", {"requirement": "Tides"}, {"requirement": "Waves"}),
    ("/api/agent/sessions", {"prompt": "Tidy the course"}, {"prompt": "Tidy it all"}),
]


@contextlib.asynccontextmanager
async def anonymous_api(db_url: str, tmp_path) -> AsyncIterator[str]:
    """An `openmaic serve --role api` answering anonymous owners (a cookie each): nothing moves a run or a session
    but the test."""
    port = free_port()
    with serve_processes(db_url, tmp_path, [("api", port)], FAST_CONFIG + "limits: {active_runs_per_owner: 10}\n",
                         envs=[{"OPENMAIC_IDENTITY_MODE": "anonymous"}]) as procs:
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=10) as probe:
            await wait_ready(probe, procs, tmp_path)
        yield url


def _id(path: str, body: dict) -> str:
    return body["run"]["id"] if "run" in body else body.get("jobId") or body["id"]


async def _streams(db, kind: str) -> int:
    return await db.fetchval("SELECT count(*) FROM streams WHERE kind = $1", kind)


@pytest.mark.parametrize("path,body,other", CREATES, ids=["generation-runs", "generate-classroom", "agent-sessions"])
async def test_a_create_repeated_with_its_key_is_answered_as_the_first_time(db, db_url, tmp_path, path, body, other):
    log = EventLog(db)
    kind = "workbench" if "agent" in path else "generation"
    async with anonymous_api(db_url, tmp_path) as url, \
            httpx.AsyncClient(base_url=url, trust_env=False, timeout=10) as alice, \
            httpx.AsyncClient(base_url=url, trust_env=False, timeout=10) as bob:
        assert (await alice.get("/api/health")).status_code == 200  # each has its owner cookie from here on
        assert (await bob.get("/api/health")).status_code == 200
        key = {"Idempotency-Key": str(uuid.uuid4())}
        first = await alice.post(path, json=body, headers=key)
        assert first.status_code == 202, first.text
        created = _id(path, first.json())
        # The resource moves on (a worker takes it) before the client, which never got the answer, repeats.
        await log.append(StreamAppend(stream_id=created, status="running", events=[
            LeaseClaimed(attempt=1, worker="w", reason="queued"),
            *([RunStateChanged(state="outlining", previous="preparing")] if kind == "generation" else [])]))
        again = await alice.post(path, json=body, headers=key)
        assert again.status_code == first.status_code
        assert again.json() == first.json()
        assert await _streams(db, kind) == 1

        # Repeats sent at once make one resource too, each answered the same.
        at_once = {"Idempotency-Key": str(uuid.uuid4())}
        answers: list[httpx.Response] = []

        async def send() -> None:
            answers.append(await alice.post(path, json=body, headers=at_once))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(send)
        assert {r.status_code for r in answers} == {202}, [r.text for r in answers]
        assert len({r.text for r in answers}) == 1
        assert await _streams(db, kind) == 2

        # The same key with another request: refused, naming the key, and nothing is written.
        reused = await alice.post(path, json=other, headers=key)
        assert reused.status_code == 409, reused.text
        assert reused.json()["errorCode"] == "IDEMPOTENCY_KEY_REUSED" and "Idempotency-Key" in reused.json()["error"]
        # Another owner's key is its own: the same key makes bob his own resource.
        theirs = await bob.post(path, json=body, headers=key)
        assert theirs.status_code == 202 and _id(path, theirs.json()) != created
        assert await _streams(db, kind) == 3
        # A key that is not one: a 400 naming the header.
        bad = await alice.post(path, json=body, headers={"Idempotency-Key": "two words"})
        assert bad.status_code == 400 and bad.json()["details"]["path"] == "Idempotency-Key"
        # The OpenAPI description says so.
        doc = (await alice.get("/api/openapi.json")).json()
        params = doc["paths"][path]["post"]["parameters"]
        assert [p["in"] for p in params if p["name"] == "Idempotency-Key"] == ["header"]
        # Without a key, every create is a new one.
        assert (await alice.post(path, json=body)).status_code == 202
        assert (await alice.post(path, json=body)).status_code == 202
        assert await _streams(db, kind) == 5


async def test_a_started_run_is_answered_from_its_commit_when_reads_fail_after_it(db, monkeypatch):
    log = EventLog(db)
    runs = RunService(log, default_config())

    async def failover(*args, **kwargs):
        raise errors.DatabaseUnavailable("PostgreSQL connection lost: the server is failing over")

    # Every read outside the creating transaction fails from here on, as in a failover just after the commit.
    monkeypatch.setattr(log, "stream_row", failover)
    monkeypatch.setattr(runs.runs, "state", failover)
    row, state = await runs.start("alice", RunInput(requirement="Tides"))
    assert (row.head_seq, state.seq, state.state) == (2, 2, "preparing")
    monkeypatch.undo()
    assert (await runs.read("alice", row.id))[0].created_at == row.created_at


async def test_a_started_session_is_answered_once_its_commit_can_be_read_again(db, monkeypatch):
    log = EventLog(db)
    sessions = WorkbenchSessions(log)
    real = sessions.sessions.state
    failures = []

    async def after_a_failover(*args, **kwargs):
        if len(failures) < 3:  # the first reads after the commit fail, as while a standby takes over
            failures.append(1)
            raise errors.DatabaseUnavailable("PostgreSQL connection lost: the server is failing over")
        return await real(*args, **kwargs)

    monkeypatch.setattr(sessions.sessions, "state", after_a_failover)
    row, state = await sessions.start("alice", "Tidy the course")
    assert len(failures) == 3 and row.head_seq == state.seq == 2
    assert await db.fetchval("SELECT count(*) FROM streams WHERE kind = 'workbench'") == 1


async def test_repeats_sent_at_once_take_one_place_under_the_run_limit(db):
    """One place left: the repeats of one keyed start queue on the owner's lock behind the first, and each finds
    the run it made rather than counting it against the limit."""
    log = EventLog(db)
    runs = RunService(log, default_config())
    limit = default_config().limits.active_runs_per_owner
    for _ in range(limit - 1):
        await runs.start("alice", RunInput(requirement="Tides"))
    keyed = IdempotencyKey(key="k-1", digest="the same request")
    answers = []

    async def start() -> None:
        answers.append(await runs.start("alice", RunInput(requirement="Waves"), keyed=keyed))

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(start)
    assert len({(row.id, row.created_at, state.seq) for row, state in answers}) == 1
    assert await db.fetchval("SELECT count(*) FROM streams WHERE kind = 'generation'") == limit
