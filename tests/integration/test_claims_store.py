"""Claims in PostgreSQL: what moves, what the log records, the rules, and the fence that keeps late writes of a
claimed owner with the account."""

from __future__ import annotations

import uuid

import msgspec
import pytest
import trio

from openmaic.config import ProviderSpec, Secret
from openmaic.events.core import OwnerClaimed, SessionCreated, StreamOwnerChanged
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.modelconfig.layer import ModelLayer
from openmaic.modelconfig.secret_box import derive
from openmaic.modelconfig.store import read_settings, save_settings
from openmaic.owners.claims import ClaimRefused, claim_owner, claim_stream_id, claimed_into, merged_from
from openmaic.projections import default_projections

INSTANCE = derive("the-instance-secret-0123456789")


def anon() -> str:
    return f"anon:{uuid.uuid4()}"


async def stream(log: EventLog, sid: str, owner: str, kind: str = "generation") -> None:
    await log.append(StreamAppend(stream_id=sid, create=NewStream(kind, owner), events=[
        SessionCreated(kind=kind, owner_id=owner)]))


async def material(db, mid: str, owner: str) -> None:
    await db.execute("INSERT INTO assets (id, owner_id, media_type, size, sha256, data) "
                     "VALUES ($1, $2, 'image/png', 1, '\\x00', '\\x00')", f"asset-{mid}", owner)
    await db.execute("INSERT INTO materials (id, owner_id, filename, media_type, size, asset_id) "
                     "VALUES ($1, $2, 'a.png', 'image/png', 1, $3)", mid, owner, f"asset-{mid}")


async def agent(db, aid: str, owner: str, name: str) -> None:
    await db.execute("INSERT INTO agents (id, owner_id, name, role) VALUES ($1, $2, $3, 'teacher')", aid, owner, name)


def settings(provider: str, key: str, slot: str) -> ModelLayer:
    return ModelLayer(source="workspace", providers={
        provider: ProviderSpec(preset="openai-compatible", base_url="https://llm.example.org/v1", api_key=Secret(key),
                               models=("m1",))}, slots={slot: f"{provider}:m1"})


async def owned(db, table: str, owner: str) -> int:
    return await db.fetchval(f"SELECT count(*) FROM {table} WHERE owner_id = $1", owner)


async def test_a_claim_moves_every_owned_row_and_records_it_in_the_log(db):
    log = EventLog(db)
    a, user = anon(), "proxy:alice"
    await stream(log, "run-1", a)
    await stream(log, "course-1", a, "course")
    await stream(log, "wb-1", a, "workbench")
    await stream(log, "run-x", "proxy:bob")
    await material(db, "mat-1", a)
    await agent(db, "agent-1", a, "Ada")
    await save_settings(db, a, settings("mine", "sk-anon-0123456789", "course.outline"), None, INSTANCE)

    result = await claim_owner(log, a, user)
    assert result.status == "claimed"
    assert result.moved == {"runs": 1, "courses": 1, "sessions": 1, "materials": 1, "assets": 1, "agents": 1,
                            "settings": 1}
    for table in ("streams", "materials", "assets", "agents", "model_settings"):
        assert await owned(db, table, a) == 0, table
    assert await owned(db, "streams", user) == 4  # three moved, and the claim's own record
    assert await owned(db, "streams", "proxy:bob") == 1
    assert (await read_settings(db, user, INSTANCE)).layer.providers["mine"].api_key == Secret("sk-anon-0123456789")

    # Each moved stream's own history says from which seq on it is the account's.
    for sid in ("run-1", "course-1", "wb-1"):
        events = await log.read_stream(sid)
        assert [e.type for e in events] == ["session.created", "stream.owner_changed"]
        assert log.decode(events[-1]) == StreamOwnerChanged(from_owner_id=a, to_owner_id=user)
    record = await log.read_stream(claim_stream_id(a))
    assert [log.decode(e) for e in record] == [OwnerClaimed(from_owner_id=a, to_owner_id=user, moved=result.moved)]
    row = await log.stream_row(claim_stream_id(a))
    assert row.owner_id == user and row.kind == "owner_claim" and row.status == "terminal"
    assert await claimed_into(db, a) == user


async def test_a_claim_is_idempotent_and_an_owner_is_claimed_once(db):
    log = EventLog(db)
    a = anon()
    await stream(log, "run-1", a)
    assert (await claim_owner(log, a, "proxy:alice")).status == "claimed"
    before = await db.fetchval("SELECT count(*) FROM events")
    again = await claim_owner(log, a, "proxy:alice")
    assert again.status == "already-claimed" and again.moved is None
    assert await db.fetchval("SELECT count(*) FROM events") == before  # nothing written
    with pytest.raises(ClaimRefused) as refused:
        await claim_owner(log, a, "proxy:bob")
    assert refused.value.error_code == "ALREADY_CLAIMED_ELSEWHERE" and refused.value.status == 409
    assert await owned(db, "streams", "proxy:bob") == 0


@pytest.mark.parametrize(("source", "target", "code", "status"), [
    ("anon:not-a-uuid", "proxy:alice", "SOURCE_NOT_ANONYMOUS", 403),
    ("proxy:bob", "proxy:alice", "SOURCE_NOT_ANONYMOUS", 403),
    ("ANON", "ANON", "SAME_OWNER", 409),
    ("", "proxy:alice", "INVALID_OWNER", 400),
    ("anon:11111111-1111-4111-8111-111111111111", "has space", "INVALID_OWNER", 400),
    ("anon:11111111-1111-4111-8111-111111111111", "anon:22222222-2222-4222-8222-222222222222", "TARGET_ANONYMOUS",
     403),
])
async def test_the_rules_refuse_before_anything_moves(db, source, target, code, status):
    log = EventLog(db)
    with pytest.raises(ClaimRefused) as refused:
        await claim_owner(log, source, target)
    assert (refused.value.error_code, refused.value.status) == (code, status)
    assert await db.fetchval("SELECT count(*) FROM owner_claims") == 0


async def test_settings_and_agents_merge_where_the_account_wins(db):
    log = EventLog(db)
    a, user = anon(), "proxy:alice"
    await save_settings(db, a, settings("mine", "sk-anon-0123456789", "course.outline"), None, INSTANCE)
    both = settings("mine", "sk-user-9876543210", "llm")
    both = msgspec.structs.replace(both, providers={**both.providers, **settings(
        "theirs", "sk-other-111122223333", "x").providers})
    await save_settings(db, user, both, None, INSTANCE)
    await save_settings(db, a, settings("extra", "sk-extra-5555666677", "course.agents"), 1, INSTANCE,
                        current=await read_settings(db, a, INSTANCE))
    await agent(db, "a-anon", a, "Anon's")
    await agent(db, "a-user", user, "User's")

    result = await claim_owner(log, a, user)
    assert result.moved["settings"] == 1 and result.moved["agents"] == 1
    merged = await read_settings(db, user, INSTANCE)
    assert merged.revision == 2  # a Models page open on the old revision is told to reload
    assert set(merged.layer.providers) == {"mine", "theirs", "extra"}
    assert merged.layer.providers["mine"].api_key == Secret("sk-user-9876543210")  # the account's key wins
    assert merged.layer.providers["extra"].api_key == Secret("sk-extra-5555666677")  # the anonymous one's joins
    assert merged.unreadable == frozenset()
    assert set(merged.layer.slots) == {"llm", "course.agents"}
    assert await db.fetchval("SELECT count(*) FROM model_settings") == 1
    names = {r["name"] for r in await db.fetch("SELECT name FROM agents WHERE owner_id = $1", user)}
    assert names == {"Anon's", "User's"}


async def test_a_write_of_a_claimed_owner_lands_with_the_account(db):
    """The owner fence: a row inserted after the claim under the retired id (a step folded before it) is written
    under the account, and reads through openmaic_owner find the work where it went."""
    log = EventLog(db)
    a, user = anon(), "proxy:alice"
    await stream(log, "run-1", a)
    await claim_owner(log, a, user)
    await stream(log, "course-late", a, "course")
    await material(db, "mat-late", a)
    assert (await log.stream_row("course-late")).owner_id == user
    assert await owned(db, "materials", user) == 1 and await owned(db, "assets", user) == 1
    assert await db.fetchval("SELECT openmaic_owner($1)", a) == user
    assert await db.fetchval("SELECT openmaic_owner($1)", "proxy:bob") == "proxy:bob"


async def test_an_insert_racing_a_claim_is_moved_or_forwarded_never_left_behind(db_url):
    """Many inserts of one anonymous owner race a claim from other connections: every row ends with the account."""
    from openmaic.store.database import open_database

    async with open_database(db_url, max_size=12) as db:
        log = EventLog(db)
        a, user = anon(), "proxy:alice"
        await stream(log, "run-0", a)
        claimed, writing = trio.Event(), trio.Event()

        async def writer(w: int) -> None:
            for i in range(15):
                await material(db, f"m-{w}-{i}", a)
                writing.set()
                await stream(log, f"s-{w}-{i}", a, "course")
                if claimed.is_set() and i > 10:
                    return

        async with trio.open_nursery() as nursery:
            for w in range(6):
                nursery.start_soon(writer, w)
            await writing.wait()  # the claim lands among the writes, not before them
            result = await claim_owner(log, a, user)
            claimed.set()
        assert result.status == "claimed"
        total = await db.fetchval("SELECT count(*) FROM materials")
        for table in ("streams", "materials", "assets"):
            assert await owned(db, table, a) == 0, (table, result.moved, total)
        assert await owned(db, "materials", user) == total


async def test_merged_from_answers_for_the_requesters_own_claims_only(db):
    import hashlib

    log = EventLog(db)
    a = anon()
    await claim_owner(log, a, "proxy:alice")
    salt = "00112233445566778899aabbccddeeff"
    digest = hashlib.sha256(f"{salt}\x00{a}".encode()).hexdigest()
    assert await merged_from(db, "proxy:alice", salt, digest) is True
    assert await merged_from(db, "proxy:bob", salt, digest) is False
    assert await merged_from(db, "proxy:alice", salt, "0" * 64) is False


async def test_every_owned_table_carries_the_owner_fence(db):
    """A table holding an owner's rows must move with a claim: the claim moves every table with the fence, so an
    owner_id column without it is a table a claim would leave behind. Read models follow stream.owner_changed in
    their projections instead, bearer tokens belong to signed-in owners only, and an anonymous owner's last address
    (anonymous_clients) describes the identity a claim retires."""
    read_models = {t for p in default_projections() for t in p.tables}
    exempt = {"api_tokens", "owner_claims", "anonymous_clients"} | read_models
    owned_tables = {r["table_name"] for r in await db.fetch(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'owner_id'")}
    fenced = {r["relname"] for r in await db.fetch(
        "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE t.tgname = 'openmaic_owner_fence' AND NOT t.tgisinternal")}
    assert owned_tables - exempt - fenced == set()
    assert {"streams", "materials", "assets", "agents", "model_settings"} <= fenced
