"""The runtime against a real PostgreSQL: claiming, steps, waiting, messages, cancellation, fences, shutdown."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from openmaic import errors
from openmaic.actors.commands import Commands
from openmaic.events.core import SessionCancelRequested, SessionMessagePosted
from openmaic.events.log import EventLog, StreamAppend
from openmaic.events.wakeups import cancel_hint
from openmaic.store.queries import Q
from tests.runtime import ended, new_stream, open_worker, settings, types_of, wait_for


@pytest.fixture
def log(db):
    return EventLog(db)


async def test_a_queued_stream_is_claimed_run_and_completed(db_url, log):
    await new_stream(log, "s1", steps=3)
    async with open_worker(db_url):
        await wait_for(lambda: _eq(ended(log, "s1"), "completed"))
    types = await types_of(log, "s1")
    assert types == ["session.created", "lease.claimed", "test.step_done", "test.step_done", "test.step_done",
                     "session.ended"]
    claimed = log.decode((await log.read_stream("s1"))[1])
    assert (claimed.attempt, claimed.reason) == (1, "queued")
    row = await log.stream_row("s1")
    assert (row.status, row.lease_worker) == ("terminal", None)


async def test_idle_streams_hold_no_worker_and_a_message_requeues_them(db_url, log):
    await new_stream(log, "s1", steps=1, idle=True)
    cmds = Commands(log, message_kinds=["test"])
    async with open_worker(db_url) as worker:
        await wait_for(lambda: _eq(_status(log, "s1"), "waiting"))
        await wait_for(lambda: _true(not worker.actors))
        r = await cmds.post_message("o", "s1", "m1", "hello")
        again = await cmds.post_message("o", "s1", "m1", "hello")
        assert again.replayed and again.seq == r.seq
        await wait_for(lambda: _turns(log, "s1", 1))
        await wait_for(lambda: _eq(_status(log, "s1"), "waiting"))
    turns = [log.decode(e) for e in await log.read_stream("s1") if e.type == "model.turn_completed"]
    assert [(t.text, t.delivered) for t in turns] == [("ack: hello", [r.seq])]


async def test_messages_posted_during_a_step_are_delivered_once_at_the_next_boundary(db_url, log):
    await new_stream(log, "s1", steps=1, idle=True, sleep=0.5)
    cmds = Commands(log, message_kinds=["test"])
    async with open_worker(db_url):
        await wait_for(lambda: _has(log, "s1", "lease.claimed"))
        seqs = [(await cmds.post_message("o", "s1", f"m{i}", f"msg {i}")).seq for i in range(3)]
        await wait_for(lambda: _delivered(log, "s1", seqs))
        await wait_for(lambda: _eq(_status(log, "s1"), "waiting"))
    delivered = [s for e in await log.read_stream("s1") if e.type == "model.turn_completed"
                 for s in log.decode(e).delivered]
    assert sorted(delivered) == seqs and len(delivered) == len(set(delivered))


async def test_cancel_aborts_the_step_in_flight_and_settles_cancelled(db_url, log):
    await new_stream(log, "s1", steps=1, sleep=30)
    cmds = Commands(log, message_kinds=["test"])
    async with open_worker(db_url):
        await wait_for(lambda: _has(log, "s1", "lease.claimed"))
        with trio.fail_after(5):
            await cmds.cancel("o", "s1", "c1")
            await wait_for(lambda: _eq(ended(log, "s1"), "cancelled"))
    assert "test.step_done" not in await types_of(log, "s1")
    with pytest.raises(errors.Conflict, match="already ended"):
        await cmds.cancel("o", "s1", "c2")
    # the original cancel, repeated, still answers with its original seq
    assert (await cmds.cancel("o", "s1", "c1")).replayed


async def test_the_cancel_watcher_wakes_on_a_cancel_not_on_the_actors_own_output(db_url, log):
    # No polling within the test: whatever the watcher does, a hint made it do it.
    await new_stream(log, "s1", steps=1, sleep=60, emit=40)
    cmds = Commands(log, message_kinds=["test"])
    async with open_worker(db_url, settings(wake_poll_s=60)) as worker:
        await wait_for(lambda: _count(log, "s1", "test.emitted", 40))
        actor = worker.actors["s1"]
        assert actor.cancel_checks == 0, "40 appends of its own woke the cancel watcher"
        with trio.fail_after(10):  # far sooner than the 60 s poll: the cancel's own hint woke it
            await cmds.cancel("o", "s1", "c1")
            await wait_for(lambda: _eq(ended(log, "s1"), "cancelled"))
        assert actor.cancel_checks == 1
    assert "test.step_done" not in await types_of(log, "s1")


async def test_cancelling_a_waiting_stream_settles_it(db_url, log):
    await new_stream(log, "s1", steps=0, idle=True)
    cmds = Commands(log, message_kinds=["test"])
    async with open_worker(db_url):
        await wait_for(lambda: _eq(_status(log, "s1"), "waiting"))
        await cmds.cancel("o", "s1", "c1")
        await wait_for(lambda: _eq(ended(log, "s1"), "cancelled"))


async def test_other_owners_and_unknown_streams_are_not_found(db_url, log):
    await new_stream(log, "s1", owner="alice", idle=True)
    cmds = Commands(log, message_kinds=["test"])
    for owner, sid in [("bob", "s1"), ("alice", "nope")]:
        with pytest.raises(errors.StreamNotFound):
            await cmds.post_message(owner, sid, "m", "hi")
        with pytest.raises(errors.StreamNotFound):
            await cmds.cancel(owner, sid, "c")
    with pytest.raises(errors.CommandConflict):
        await cmds.post_message("alice", "s1", "create-s1", "reusing the creation command id")


async def test_a_step_over_its_deadline_fails_like_any_failure(db_url, log):
    await new_stream(log, "s1", steps=1, sleep=5, deadline=0.3)
    await new_stream(log, "s2", steps=2, fail_at=2)
    async with open_worker(db_url):
        await wait_for(lambda: _eq(ended(log, "s1"), "failed"))
        await wait_for(lambda: _eq(ended(log, "s2"), "failed"))
    end = log.decode((await log.read_stream("s1"))[-1])
    assert "exceeded its deadline of 0.3 s" in end.error
    end = log.decode((await log.read_stream("s2"))[-1])
    assert "step step:2 failed" in end.error


async def test_a_lost_lease_stops_the_actor_and_it_writes_nothing_more(db_url, log, db):
    await new_stream(log, "s1", steps=1, sleep=3)
    async with open_worker(db_url) as worker:
        await wait_for(lambda: _has(log, "s1", "lease.claimed"))
        # another worker takes the stream over (as if our lease had expired)
        await db.execute("UPDATE streams SET attempt = attempt + 1, lease_worker = 'thief' WHERE id = 's1'")
        await wait_for(lambda: _true(worker.stats.lease_losses == 1), timeout=5)
        assert not worker.actors
    assert "test.step_done" not in await types_of(log, "s1")


async def test_graceful_shutdown_releases_without_charging_and_a_new_worker_resumes(db_url, log):
    await new_stream(log, "s1", steps=2, sleep=20)
    async with open_worker(db_url, settings(shutdown_grace_s=0.5)) as worker:
        await wait_for(lambda: _has(log, "s1", "lease.claimed"))
        worker.shutdown()
        await wait_for(lambda: _eq(_status(log, "s1"), "queued"), timeout=10)
    row = await log.stream_row("s1")
    assert (row.lease_worker, row.unattended_attempts) == (None, 0)
    assert (await types_of(log, "s1"))[-2:] == ["session.interrupted", "lease.released"]
    await db_exec(log, "UPDATE streams SET wake_at = NULL WHERE id = 's1'")
    with trio.fail_after(10):
        async with open_worker(db_url) as w2:
            await wait_for(lambda: _true(bool(w2.actors)))
    claims = [log.decode(e) for e in await log.read_stream("s1") if e.type == "lease.claimed"]
    assert [(c.attempt, c.reason) for c in claims] == [(1, "queued"), (2, "queued")]


async def test_an_expired_lease_is_taken_over_as_orphaned_and_charged(db_url, log, db):
    await new_stream(log, "s1", steps=1)
    await db.execute(
        "UPDATE streams SET status = 'running', attempt = 4, lease_worker = 'dead', "
        "lease_expires_at = now() - interval '1 second' WHERE id = 's1'"
    )
    async with open_worker(db_url):
        await wait_for(lambda: _eq(ended(log, "s1"), "completed"))
    claim = next(log.decode(e) for e in await log.read_stream("s1") if e.type == "lease.claimed")
    assert (claim.attempt, claim.reason) == (5, "orphaned")


#: A claim poll far longer than the tests below: what they see claimed, nothing but the due moment woke a claim for.
NO_POLL = settings(claim_poll_s=60)


async def test_a_lease_given_up_without_a_word_is_taken_over_when_it_expires_not_at_the_next_poll(db_url, log, db):
    # A holder that stopped renewing (frozen, partitioned, or gave its lease up without handing the stream back)
    # sends no hint; the lease's expiry is the only sign.
    await new_stream(log, "s1", steps=1)
    await db.execute(
        "UPDATE streams SET status = 'running', attempt = 4, lease_worker = 'gone', "
        "lease_expires_at = now() + interval '2 seconds' WHERE id = 's1'"
    )
    async with open_worker(db_url, NO_POLL):
        await wait_for(lambda: _eq(ended(log, "s1"), "completed"), timeout=20)
    claim = next(log.decode(e) for e in await log.read_stream("s1") if e.type == "lease.claimed")
    assert (claim.attempt, claim.reason) == (5, "orphaned")


async def test_a_stream_queued_to_wake_later_is_claimed_when_it_falls_due_not_at_the_next_poll(db_url, log, db):
    await new_stream(log, "s1", steps=1)
    due = await db.fetchval("UPDATE streams SET wake_at = now() + interval '2 seconds' WHERE id = 's1' "
                            "RETURNING wake_at")
    async with open_worker(db_url, NO_POLL) as worker:
        await wait_for(lambda: _eq(ended(log, "s1"), "completed"), timeout=20)
        assert worker.stats.claims == 1
    claimed = next(e for e in await log.read_stream("s1") if e.type == "lease.claimed")
    assert claimed.recorded_at >= due  # when it fell due, not before
    assert (await log.stream_row("s1")).unattended_attempts == 0  # the completed step was progress


async def test_over_the_unattended_cap_the_kind_gives_up(db_url, log, db):
    await new_stream(log, "s1", steps=1)
    await db.execute(
        "UPDATE streams SET status = 'running', attempt = 9, lease_worker = 'dead', unattended_attempts = 5, "
        "lease_expires_at = now() - interval '1 second' WHERE id = 's1'"
    )
    async with open_worker(db_url):
        await wait_for(lambda: _eq(ended(log, "s1"), "failed"))
    end = log.decode((await log.read_stream("s1"))[-1])
    assert end.error == "interrupted too many times"
    assert "test.step_done" not in await types_of(log, "s1")


async def test_max_actors_caps_concurrent_streams(db_url, log):
    for i in range(6):
        await new_stream(log, f"s{i}", steps=1, sleep=0.3)
    peak = 0
    async with open_worker(db_url, settings(max_actors=2)) as worker:
        with trio.fail_after(20):
            while True:
                peak = max(peak, len(worker.actors))
                if all([await ended(log, f"s{i}") == "completed" for i in range(6)]):
                    break
                await trio.sleep(0.01)
    assert peak == 2


async def db_exec(log, sql):
    await log.db.execute(sql)


async def _eq(aw, value) -> bool:
    return await aw == value


async def _actor_of(worker, stream_id: str):
    # The claim's lease.claimed is visible in the log a moment before its reply reaches the worker, which starts
    # the actor only then: wait for the actor itself.
    await wait_for(lambda: _true(stream_id in worker.actors))
    return worker.actors[stream_id]


async def _true(v) -> bool:
    return v


async def _status(log, sid):
    return (await log.stream_row(sid)).status


async def _has(log, sid, type_):
    return type_ in await types_of(log, sid)


async def _turns(log, sid, n):
    return (await types_of(log, sid)).count("model.turn_completed") >= n


async def _delivered(log, sid, seqs):
    got = [s for e in await log.read_stream(sid) if e.type == "model.turn_completed" for s in log.decode(e).delivered]
    return sorted(got) == sorted(seqs)


async def test_a_message_landing_between_fold_and_release_is_not_left_unheard(db_url, log, monkeypatch):
    """The release to `waiting` is fenced by the folded head: a follow-up committed in that window makes the
    release fail, so the actor re-reads, delivers the message, and only then goes idle."""
    from openmaic.actors.actor import Actor

    await new_stream(log, "s1", steps=1, idle=True)
    cmds = Commands(log, message_kinds=["test"])
    injected: list[int] = []
    settle = Actor._settle

    async def settle_after_a_racing_message(self, decision):
        if not injected:
            # committed after the actor's fold, before its release: exactly the lost-wake-up window
            injected.append((await cmds.post_message("o", "s1", "race", "in the window")).seq)
        return await settle(self, decision)

    monkeypatch.setattr(Actor, "_settle", settle_after_a_racing_message)
    async with open_worker(db_url):
        await wait_for(lambda: _true(bool(injected)))
        await wait_for(lambda: _delivered(log, "s1", injected), timeout=10)
        await wait_for(lambda: _eq(_status(log, "s1"), "waiting"))
    events = await log.read_stream("s1")
    delivered_at = next(e.seq for e in events if e.type == "model.turn_completed")
    idle_at = max(e.seq for e in events if e.type == "lease.released")
    assert injected[0] < delivered_at < idle_at, "the session went idle only after the message was delivered"


async def _count(log: EventLog, sid: str, type_: str, n: int) -> bool:
    return (await types_of(log, sid)).count(type_) >= n


async def test_a_cancel_after_one_a_follow_up_superseded_aborts_the_next_step_at_once(db_url, log):
    await new_stream(log, "s1", steps=1, sleep=30, idle=True)
    cmds = Commands(log, message_kinds=["test"])
    async with open_worker(db_url, settings(wake_poll_s=60)) as worker:
        actor = await _actor_of(worker, "s1")
        await wait_for(lambda: _true(actor.steps_started == 1))
        # A cancel and a follow-up in one commit: the cancel aborts the step, and the follow-up supersedes it, so
        # the session goes on with a turn for the message.
        await log.append_one("s1", [SessionCancelRequested(), SessionMessagePosted(text="go on")])
        await wait_for(lambda: _true(actor.steps_started == 2), timeout=10)
        # A new cancel during that turn aborts it too, on its hint, not when the 30 s turn ends.
        with trio.fail_after(5):
            await cmds.cancel("o", "s1", "c2")
            await wait_for(lambda: _eq(ended(log, "s1"), "cancelled"))
    assert actor.cancel_checks == 2


async def test_a_cancel_hinted_while_no_step_runs_aborts_the_step_that_follows(db_url, log, monkeypatch):
    """The actor is folding (no step runs) when a cancel lands and its hint arrives; the fold it is reading does not
    hold the cancel, so it decides to run a step. The hint must not be lost: that step is aborted at once, not at
    the next poll."""
    async with open_worker(db_url, settings(wake_poll_s=60)) as worker:
        read, release = trio.Event(), trio.Event()
        read_stream = worker.log.read_stream

        async def read_then_hold(stream_id, *args, **kw):
            page = await read_stream(stream_id, *args, **kw)
            if stream_id == "s1" and not release.is_set():
                read.set()
                await release.wait()  # the page is read: a cancel landing now is not in it
            return page

        monkeypatch.setattr(worker.log, "read_stream", read_then_hold)
        await new_stream(log, "s1", steps=1, sleep=30)
        await wait_for(lambda: _true(read.is_set()))
        # Committed without the log's own hints, then hinted by hand: the hint arrives now, while no step runs.
        await log.db.fetch(Q.append, *log.append_args([StreamAppend(stream_id="s1", events=[SessionCancelRequested()])]))
        worker.wakeups.poke([cancel_hint("s1")])
        await trio.testing.wait_all_tasks_blocked()
        actor = worker.actors["s1"]
        assert actor.steps_started == 0
        release.set()
        with trio.fail_after(5):
            await wait_for(lambda: _eq(ended(log, "s1"), "cancelled"))
    assert actor.steps_started == 1 and actor.cancel_checks == 1
    assert "test.step_done" not in await types_of(log, "s1")


async def test_a_heartbeat_renews_the_lease_from_when_it_was_sent(db_url, log, db):
    await new_stream(log, "s1", steps=1, sleep=30)
    # The worker's own heartbeats are an hour apart: the test sends the one it watches, so no later heartbeat can
    # overwrite the renewal before it is read.
    async with open_worker(db_url, settings(lease_ttl_s=10.0, heartbeat_s=3600.0)) as worker:
        actor = await _actor_of(worker, "s1")
        before = actor.renewed_at
        async with trio.open_nursery() as nursery:
            async with db.connection() as conn, conn.transaction():
                # The stream's row is locked: the heartbeat waits for it, well after it was sent.
                await conn.execute("SELECT 1 FROM streams WHERE id = 's1' FOR UPDATE")
                nursery.start_soon(worker.heartbeat_once)
                await wait_for(lambda: _heartbeat_waits(db))
                waiting_since = trio.current_time()
                await trio.sleep(1.0)  # the heartbeat's reply comes this much later than its send
        assert before < actor.renewed_at <= waiting_since, "the lease was dated from the heartbeat's reply"
        assert not actor.lease_lost


async def test_a_worker_that_claims_its_own_expired_stream_stops_the_old_actor_first(db_url, log, db):
    await new_stream(log, "s1", steps=1, sleep=30)
    # No heartbeat within the test, and a lease this worker believes in for 30 s: only the claim can tell it.
    async with open_worker(db_url, settings(lease_ttl_s=30.0, heartbeat_s=60.0)) as worker:
        old = await _actor_of(worker, "s1")
        await wait_for(lambda: _true(old.steps_started == 1))
        # The lease expired in the database while this worker still runs the stream (its heartbeat came too late).
        await db.execute("UPDATE streams SET lease_expires_at = now() - interval '1 second' WHERE id = 's1'")
        await wait_for(lambda: _true(worker.actors.get("s1") not in (None, old)), timeout=10)
        new = worker.actors["s1"]
        with trio.fail_after(5):
            await old.done.wait()
        assert old.lease_lost and old.attempt < new.attempt
        await wait_for(lambda: _true(new.steps_started == 1), timeout=10)


async def _heartbeat_waits(db) -> bool:
    return bool(await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%lease_expires_at = now()%'"
    ))


async def test_a_lease_presumed_lost_but_still_ours_is_handed_back_uncharged(db_url, log, db):
    await new_stream(log, "s1", steps=1, sleep=3)
    async with open_worker(db_url, settings(lease_ttl_s=1.5, heartbeat_s=0.3)) as worker:
        actor = await _actor_of(worker, "s1")
        async with db.connection() as conn, conn.transaction():
            # Heartbeats wait behind this row lock (a slow server, as far as the worker can tell) for over a TTL.
            await conn.execute("SELECT 1 FROM streams WHERE id = 's1' FOR UPDATE")
            with trio.fail_after(10):
                await _until(lambda: actor.lease_lost)
        # The worker presumed the lease lost and stopped; nobody took the stream over, so it gave it back.
        await wait_for(lambda: _eq(ended(log, "s1"), "completed"), timeout=20)
    claims = [log.decode(e) for e in await log.read_stream("s1") if e.type == "lease.claimed"]
    assert [c.reason for c in claims] == ["queued", "queued"], "no orphan takeover was charged"
    assert "session.interrupted" in await types_of(log, "s1")


async def _until(predicate) -> None:
    while not predicate():
        await trio.sleep(0.01)
