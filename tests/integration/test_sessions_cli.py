"""`openmaic sessions list|show|cancel` and `openmaic runs retry` against a real database, as subprocesses.

The sessions are real: a generation run that paused after its provider refused every call (a worker ran it), a
workbench session queued with no worker for its kind, and one whose worker vanished (running, lease expired).
"""

from __future__ import annotations

import functools
import json

import trio

from openmaic.actors.commands import Commands as SessionCommands
from openmaic import errors, metrics, probes
from openmaic.cli import build_parser
from openmaic.config import parse_config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import Wakeups
from openmaic.kinds import session_kinds
from openmaic.projections import default_projections, run_projectors
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from openmaic.store.postgres import free_port
from openmaic.workbench.service import WorkbenchSessions
from tests.integration.test_cli import _env, err, openmaic, out
from tests.runtime import open_worker, settings, wait_for


async def _state(db, sid: str) -> str | None:
    return await db.fetchval("SELECT status FROM session_list WHERE session_id = $1", sid)


async def test_operators_list_show_cancel_and_retry(db, db_url, tmp_path, capsys, monkeypatch):
    yml = (f"providers: {{broken: {{preset: openai-compatible, baseUrl: 'http://127.0.0.1:{free_port()}/v1',"
           " options: {maxRetries: 0}}}\n"
           "slots: {llm: 'broken:m', agent: 'broken:m'}\n"
           "runtime: {step_retries: 1, stuck_queued_s: 0.5}\n")  # fmt: skip
    config = parse_config(yml, source="<test>", env={})
    (tmp_path / "openmaic.yml").write_text(yml)
    log = EventLog(db, Wakeups())
    run = await RunService(log, config).create_run("alice", "c-run", RunInput(requirement="Tides", outline_review="auto"))
    workbench = WorkbenchSessions(log, SessionCommands(log))
    queued = (await workbench.create_session("bob", "c-w1", message="hello")).id
    orphan = (await workbench.create_session("bob", "c-w2", message="hi")).id
    await db.execute("UPDATE streams SET status = 'running', attempt = 1, lease_worker = 'gone:1:x',"
                     " lease_expires_at = now() - interval '5 seconds' WHERE id = $1", orphan)  # fmt: skip
    kinds = {"generation": session_kinds(config)["generation"]}  # no worker serves workbench sessions
    async with open_worker(db_url, settings(step_retries=1), kinds=kinds, config=config), trio.open_nursery() as n:
        await n.start(functools.partial(run_projectors, db, log, log.wakeups, default_projections(), poll_s=0.1))
        await wait_for(lambda: _is(db, run.id, "paused"), timeout=60)
        await wait_for(lambda: _is(db, queued, "queued"), timeout=20)
        n.cancel_scope.cancel()
    await trio.sleep(0.6)  # past stuck_queued_s, so the queued session counts as stuck (a threshold, not a race)
    env = _env(tmp_path, DATABASE_URL=db_url, OPENMAIC_CONFIG=str(tmp_path / "openmaic.yml"))
    cli = functools.partial(openmaic, env=env)  # a real process, for the main paths
    monkeypatch.setenv("OPENMAIC_CONFIG", env["OPENMAIC_CONFIG"])

    async def quick(*args: str) -> tuple[int, str, str]:
        """The same command, parsed by the real parser and run here on the test's database (cheaper than a
        process, for the many variants; the process's own error line is checked above)."""
        capsys.readouterr()
        try:
            parsed = build_parser().parse_args(list(args))
            code = await parsed.run.with_database(db, parsed)
            message = ""
        except SystemExit as exc:  # argparse's usage errors
            code, message = int(exc.code or 0), ""
        except errors.OpenMaicError as exc:
            code, message = 2, exc.message
        captured = capsys.readouterr()
        return code, captured.out, captured.err + message

    async def listed(*args: str) -> list[dict]:
        code, stdout, stderr = await quick("sessions", "list", "--json", *args)
        assert code == 0, stderr
        return json.loads(stdout)

    r = await cli("sessions", "list")
    assert r.returncode == 0, err(r)
    lines = out(r).splitlines()
    assert lines[0].split() == ["ID", "KIND", "OWNER", "STATE", "ATTEMPT", "LEASE", "LAST", "EVENT"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {run.id, queued, orphan}
    assert rows[run.id].split()[1:4] == ["generation", "alice", "paused"]
    assert "gone:1:x (EXPIRED" in rows[orphan]

    assert {s["id"]: (s["kind"], s["owner"], s["attempt"]) for s in await listed()} == {
        run.id: ("generation", "alice", 1), queued: ("workbench", "bob", 0), orphan: ("workbench", "bob", 1)}
    assert [s["id"] for s in await listed("--owner", "alice")] == [run.id]
    assert {s["id"] for s in await listed("--kind", "workbench")} == {queued, orphan}
    assert [s["id"] for s in await listed("--state", "paused")] == [run.id]
    assert [s["id"] for s in await listed("--owner", "bob", "--state", "paused")] == []
    assert len(await listed("--limit", "2")) == 2
    stuck = {s["id"]: s["stuck"] for s in await listed("--stuck")}
    assert stuck == {run.id: "paused", queued: "queued_too_long", orphan: "lease_expired"}
    for sample in probes.samplers(db, stuck_queued_s=0.5):  # the gauge counts the same list
        await sample()
    assert {r: metrics.sample("openmaic_sessions_stuck", reason=r) for r in probes.STUCK_REASONS} == {
        "lease_expired": 1, "queued_too_long": 1, "paused": 1}  # fmt: skip
    table = (await quick("sessions", "list", "--stuck"))[1]
    assert "STUCK" in table and "paused after a failure: it waits for a retry" in table

    r = await cli("sessions", "show", run.id)
    assert r.returncode == 0, err(r)
    text = out(r)
    assert f"{run.id}  generation of alice: Tides" in text and "state     paused" in text
    assert "leases (1):" in text and "attempt 1 " in text and "(queued, seq 3) -> released (paused)" in text, text
    assert "run.created" in text and "lease.claimed" in text and "run.step_failed" in text
    shown = json.loads((await quick("sessions", "show", run.id, "--json"))[1])
    assert [e["seq"] for e in shown["events"]] == list(range(1, len(shown["events"]) + 1))
    assert shown["leases"][0]["worker"].count(":") == 2

    # Retry, as a command with an id: once written, then answered from the log.
    r = await cli("runs", "retry", run.id, "--command-id", "op-retry-1")
    assert r.returncode == 0, err(r)
    assert "(command op-retry-1)" in out(r)
    again = await cli("runs", "retry", run.id, "--command-id", "op-retry-1")
    assert again.returncode == 0 and "already done by command op-retry-1" in out(again), err(again)
    retried = [e for e in await log.read_stream(run.id) if e.command_id == "op-retry-1"]
    assert [e.type for e in retried] == ["run.retry_requested"]  # once, however often the command was sent
    code, _, stderr = await quick("runs", "retry", run.id, "--command-id", "op-retry-2")
    assert code == 2 and "only a paused run can be retried" in stderr  # no longer paused: refused, nothing written
    assert not [e for e in await log.read_stream(run.id) if e.command_id == "op-retry-2"]

    r = await cli("sessions", "cancel", queued, "--command-id", "op-cancel")
    assert r.returncode == 0 and "(command op-cancel)" in out(r), err(r)
    assert "already done" in out(await cli("sessions", "cancel", queued, "--command-id", "op-cancel"))
    cancels = [e for e in await log.read_stream(queued) if e.type == "session.cancel_requested"]
    assert [e.command_id for e in cancels] == ["op-cancel"]
    code, stdout, stderr = await quick("sessions", "cancel", orphan)  # a default id is made up and printed
    assert code == 0 and "(command cli-" in stdout, stderr

    for args, message in [
        (("sessions", "show", "nope"), "no session or run has the id 'nope'"),
        (("sessions", "cancel", "nope"), "no session or run has the id 'nope'"),
        (("runs", "retry", queued), "is a workbench session; only generation runs take this command"),
        (("sessions", "show", run.id.replace("run_", "course_")), "is a course stream, not a session or run"),
        (("runs", "retry", run.id, "--command-id", "has space"), "a command id is 1 to 128 of"),
        (("sessions", "list", "--kind", "course"), "invalid choice: 'course'"),
    ]:
        code, _, stderr = await quick(*args)
        assert code == 2 and message in stderr and "Traceback" not in stderr, (args, stderr)


async def _is(db, sid: str, state: str) -> bool:
    return await _state(db, sid) == state
