"""Admission across a claim: a run whose fold still names the anonymous owner it was started by, and a run of the
account that owner was claimed into, are admitted under one lock and one count, so the two never pass the
account's limit together."""

from __future__ import annotations

import uuid

import trio

from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.owners.claims import claim_owner
from openmaic.runs.admission import admit, owner_transaction
from openmaic.runs.events import RunAdmitted
from openmaic.store.queries import Q

LIMIT = 2
ACCOUNT = "proxy:alice"


async def _claimed_run(log: EventLog, sid: str, owner: str) -> int:
    """A generation stream of ``owner``, claimed by a worker (running under a lease); returns its attempt."""
    await log.append(StreamAppend(stream_id=sid, create=NewStream("generation", owner), status="queued",
                                  events=[SessionCreated(kind="generation", owner_id=owner)]))
    (row,) = await log.db.fetch(Q.claim, "worker-1", ["generation"], [1], 60_000)
    assert row["stream_id"] == sid
    return row["attempt"]


async def _executing(db) -> int:
    return await db.fetchval("SELECT count(*) FROM streams s WHERE s.owner_id = $1 AND s.status = 'running' AND "
                             "EXISTS (SELECT 1 FROM events e WHERE e.stream_id = s.id AND e.type = 'run.admitted' "
                             "AND e.attempt = s.attempt)", ACCOUNT)


async def test_two_admissions_across_a_claim_never_pass_the_limit(db):
    log = EventLog(db)
    anonymous = f"anon:{uuid.uuid4()}"
    first = await _claimed_run(log, "run-account-0", ACCOUNT)
    assert (await admit(log, ACCOUNT, "run-account-0", first, LIMIT)).admitted  # one of two places taken
    anon_attempt = await _claimed_run(log, "run-anonymous", anonymous)
    account_attempt = await _claimed_run(log, "run-account-1", ACCOUNT)
    assert (await claim_owner(log, anonymous, ACCOUNT)).status == "claimed"

    # The account's admission of run-account-1 has counted (one executing) and not yet committed, while the
    # anonymous run, whose fold still names the anonymous id, is admitted: the worst interleaving.
    anonymous_admission = []
    async with trio.open_nursery() as nursery:
        async with log.appending(owner_transaction(db, ACCOUNT)) as tx:
            counted = await tx.conn.fetchrow(Q.runs_executing, ACCOUNT, "run-account-1")
            assert counted["active"] == 1

            async def admit_anonymous() -> None:
                anonymous_admission.append(await admit(log, anonymous, "run-anonymous", anon_attempt, LIMIT))

            nursery.start_soon(admit_anonymous)
            # Long enough for that admission to finish when it does not wait for this one (a few milliseconds).
            with trio.move_on_after(1.0):
                while not anonymous_admission:
                    await trio.sleep(0.01)
            await tx.append(StreamAppend(stream_id="run-account-1", attempt=account_attempt, progress=True,
                                         events=[RunAdmitted(attempt=account_attempt, active=1)]))
    (result,) = anonymous_admission
    assert await _executing(db) <= LIMIT
    assert not result.admitted and result.active == LIMIT
