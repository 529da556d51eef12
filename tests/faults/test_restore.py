"""A backup restored as an operator would: `pg_dump -Fc`, a fresh cluster, `pg_restore`, `openmaic serve` on it.

The source cluster's transaction counter is far ahead of the fresh one's (as on any installation that has run for a
while), so the restored transaction ids are above the new cluster's own. Old and new work must show in every read
model, through the API, and `openmaic projections rebuild --all` (the CLI, while the server runs) must build the same
read models again from the log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio

from openmaic.projections import default_projections
from openmaic.store.database import open_database
from openmaic.store.postgres import ThrowawayCluster
from tests.faults.client import library, run_completed, session_idle, start_run, start_session
from tests.integration.projection_helpers import snapshot, wait_caught_up
from tests.serving import ROOT, running_server

READ_MODELS = [p.name for p in default_projections()]


async def test_a_dump_restored_into_a_fresh_cluster_serves_old_and_new_work(tmp_path):
    source, target = ThrowawayCluster(), ThrowawayCluster()
    try:
        await trio.to_thread.run_sync(source.start)
        await trio.to_thread.run_sync(source.advance_xid_epoch, 3)  # ids beyond 3 × 2³², a fresh cluster's are ~700
        await trio.to_thread.run_sync(target.start)
        (tmp_path / "before").mkdir()
        (tmp_path / "after").mkdir()

        async with running_server(source.url(), tmp_path / "before") as (client, _):
            old_runs = [await start_run(client, f"Volcanoes, part {i}") for i in range(2)]
            old_session = await start_session(client, "add a scene about fractions")
            for run in old_runs:
                await run_completed(client, run)
            await session_idle(client, old_session)
            async with open_database(source.url()) as db:
                await wait_caught_up(db, READ_MODELS)
            old_cards = await library(client, old_runs, 3)  # two runs' courses and the session's

        dump = tmp_path / "openmaic.dump"
        await trio.to_thread.run_sync(source.dump, "postgres", dump)
        await trio.to_thread.run_sync(target.restore, dump, "openmaic")
        url = target.url("openmaic")

        async with running_server(url, tmp_path / "after") as (client, _):
            assert await library(client, old_runs, 3) == old_cards, "the restored library"
            new_run = await start_run(client, "Glaciers")
            new_session = await start_session(client, "add a scene about decimals")
            await run_completed(client, new_run)
            await session_idle(client, new_session)
            runs = [*old_runs, new_run]
            cards = await library(client, runs, 5)
            async with open_database(url) as db:
                await wait_caught_up(db, READ_MODELS)
                live = {p.name: await snapshot(db, p) for p in default_projections()}
                courses = {r["course_id"] for r in await db.fetch("SELECT course_id FROM course_documents")}
                assert {c["id"] for c in cards} <= courses
                sessions = {r["session_id"] for r in await db.fetch("SELECT session_id FROM session_list")}
                assert {*runs, old_session, new_session} <= sessions
                history = {r["session_id"] for r in await db.fetch("SELECT DISTINCT session_id FROM model_history")}
                assert {old_session, new_session} <= history

                rebuilt = await cli(url, tmp_path, "projections", "rebuild", "--all")
                assert rebuilt.returncode == 0, rebuilt.stderr
                assert {p.name: await snapshot(db, p) for p in default_projections()} == live
                status = await cli(url, tmp_path, "projections", "status")
                assert status.returncode == 0, status.stderr
            assert await library(client, runs, 5) == cards, "the API serves the rebuilt library as it was"
    finally:
        source.stop()
        target.stop()


async def cli(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENMAIC_")}
    env |= {"DATABASE_URL": url, "OPENMAIC_DATA_DIR": str(tmp_path / "data")}
    with trio.fail_after(120):
        r = await trio.run_process([sys.executable, "-m", "openmaic", *args], env=env, cwd=ROOT,
                                   capture_stdout=True, capture_stderr=True, check=False)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())
