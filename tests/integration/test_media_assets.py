"""The asset store for generated media on a real PostgreSQL: content addressing, owner scoping, byte ranges,
the per-owner quota under concurrent writes, and that nothing but the bytes' purpose is kept."""

from __future__ import annotations

import hashlib
import uuid

import pytest
import trio

from openmaic import errors
from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.materials import store_material
from openmaic.media.assets import (
    AssetQuotaExceeded, asset_id_for, read_asset_head, read_asset_range, store_generated, usage,
)  # fmt: skip
from openmaic.models.demo_render import narration, picture
from openmaic.models.media import GeneratedMedia
from openmaic.owners.claims import claim_owner


def png(text: str) -> GeneratedMedia:
    return GeneratedMedia(media_type="image/png", data=picture(text))


async def test_same_bytes_are_one_asset_per_owner_and_never_shared(db):
    a = await store_generated(db, "alice", "course_1", "image", png("Leaves"))
    again = await store_generated(db, "alice", "course_2", "image", png("Leaves"))
    bob = await store_generated(db, "bob", "course_3", "image", png("Leaves"))
    assert a == again and a.id == asset_id_for("alice", hashlib.sha256(picture("Leaves")).digest())
    assert bob.id != a.id and a.sha256 == bob.sha256 == hashlib.sha256(picture("Leaves")).hexdigest()
    assert (await usage(db, "alice"))[1] == 1
    head = await read_asset_head(db, "alice", a.id)
    assert (head.media_type, head.size, head.kind, head.course_id) == ("image/png", a.size, "image", "course_1")
    with pytest.raises(errors.NotFound):
        await read_asset_head(db, "bob", a.id)  # another owner's asset is a missing one
    with pytest.raises(errors.NotFound):
        await read_asset_range(db, "bob", a.id, 0, 10)


async def test_byte_ranges_read_exactly_the_bytes_asked_for(db):
    clip = narration("A clip long enough to be read in pieces. " * 4)
    stored = await store_generated(db, "alice", "c", "narration", GeneratedMedia(media_type="audio/wav", data=clip))
    assert await read_asset_range(db, "alice", stored.id, 0, 12) == clip[:12]
    assert await read_asset_range(db, "alice", stored.id, 1000, 5000) == clip[1000:6000]
    assert await read_asset_range(db, "alice", stored.id, len(clip) - 3, 100) == clip[-3:]
    assert await read_asset_range(db, "alice", stored.id, 0, len(clip)) == clip


async def test_quota_refuses_the_write_that_would_pass_it_and_writes_nothing(db):
    first = await store_generated(db, "alice", "c", "image", png("one"))
    quota = first.size + 100
    with pytest.raises(AssetQuotaExceeded) as info:
        await store_generated(db, "alice", "c", "image", png("two, a different picture"), quota_bytes=quota)
    assert info.value.details["used"] == first.size
    assert await usage(db, "alice") == (first.size, 1)
    # The same bytes again cost nothing, so they are still accepted at the limit.
    assert await store_generated(db, "alice", "c", "image", png("one"), quota_bytes=first.size) == first
    # Materials' images count towards the same quota.
    await store_material(db, "alice", "photo.png", "image/png", picture("material"))
    assert (await usage(db, "alice"))[1] == 2


async def test_concurrent_writes_never_overshoot_the_quota(db):
    pictures = [png(f"picture number {i}") for i in range(12)]
    quota = sum(len(p.data) for p in pictures[:5]) + 10
    stored: list[str] = []
    refused: list[int] = []

    async def put(i: int) -> None:
        try:
            stored.append((await store_generated(db, "carol", "c", "image", pictures[i], quota_bytes=quota)).id)
        except AssetQuotaExceeded:
            refused.append(i)

    async with trio.open_nursery() as nursery:
        for i in range(len(pictures)):
            nursery.start_soon(put, i)
    used, count = await usage(db, "carol")
    assert used <= quota and count == len(stored) and len(stored) + len(refused) == len(pictures)
    assert refused, "the quota was never reached"


async def test_a_claimed_owners_media_land_with_the_account_and_count_against_its_quota(db):
    """A media step folded its owner before that owner was claimed into an account: what it stores afterwards
    under the retired id goes to the account, the same bytes are still the one asset, and the account's own
    usage is what the quota judges."""
    log = EventLog(db)
    a, user = f"anon:{uuid.uuid4()}", "proxy:alice"
    await log.append(StreamAppend(stream_id="run-claimed", create=NewStream("generation", a),
                                  events=[SessionCreated(kind="generation", owner_id=a)]))
    before = await store_generated(db, a, "course_1", "image", png("Before"))
    assert (await claim_owner(log, a, user)).status == "claimed"
    after_size = len(picture("After"))
    quota = before.size + after_size
    again = await store_generated(db, a, "course_1", "image", png("Before"), quota_bytes=quota)
    after = await store_generated(db, a, "course_1", "image", png("After"), quota_bytes=quota)
    assert again.id == before.id
    assert (await read_asset_head(db, user, after.id)).course_id == "course_1"
    assert await usage(db, user) == (quota, 2) and await usage(db, a) == (0, 0)
    with pytest.raises(AssetQuotaExceeded):
        await store_generated(db, a, "course_1", "image", png("Past the quota"), quota_bytes=quota)
