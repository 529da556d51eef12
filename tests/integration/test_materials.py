"""Materials: OpenMAIC-shaped ids, the per-owner quota under concurrent uploads, deletion, and what reading them
found kept for older uploads too."""

from __future__ import annotations

import re
from importlib import resources

import trio

from openmaic import errors
from openmaic.materials import (
    MaterialQuotaFull, delete_material, excerpt_of, get_material, list_materials, material_sizes, new_material_id,
    store_material, valid_material_id,
)  # fmt: skip

ID = re.compile(r"mat_[0-9A-HJKMNP-TV-Z]{26}")


def test_ids_are_ulids_in_crockford_base32_that_sort_by_time():
    ids = [new_material_id() for _ in range(200)]
    assert all(ID.fullmatch(i) for i in ids) and len(set(ids)) == 200
    assert [i[4:14] for i in ids] == sorted(i[4:14] for i in ids)  # the time part never goes back
    assert valid_material_id(ids[0]) and valid_material_id("mat_" + "0f" * 16)  # an earlier upload's id
    for bad in ("mat_", "mat_" + "I" * 26, "mat_" + "a" * 26, "../mat_x", "mat_" + "0" * 27):
        assert not valid_material_id(bad), bad


async def test_concurrent_uploads_never_pass_the_quota(db):
    outcomes: list[str] = []

    async def upload(i: int) -> None:
        try:
            await store_material(db, "alice", f"{i}.txt", "text/plain", b"x" * 10, max_count=3, max_bytes=10_000)
            outcomes.append("ok")
        except MaterialQuotaFull as exc:
            assert (exc.status, exc.error_code) == (429, "INVALID_REQUEST")
            outcomes.append("full")

    async with trio.open_nursery() as nursery:
        for i in range(10):
            nursery.start_soon(upload, i)
    assert sorted(outcomes) == ["full"] * 7 + ["ok"] * 3
    assert await db.fetchval("SELECT count(*) FROM materials WHERE owner_id = 'alice'") == 3
    # bytes count too, and another owner has a quota of their own
    await store_material(db, "bob", "a.txt", "text/plain", b"x" * 60, max_count=10, max_bytes=100)
    try:
        await store_material(db, "bob", "b.txt", "text/plain", b"x" * 41, max_count=10, max_bytes=100)
        raise AssertionError("the byte quota was passed")
    except MaterialQuotaFull as exc:
        assert exc.details == {"key": "limits.material_bytes_per_owner", "limit": 100}


async def test_a_deleted_material_is_gone_for_its_owner_only_once(db):
    m = await store_material(db, "alice", "a.md", "text/markdown", b"# a")
    assert not await delete_material(db, "mallory", m.id)
    assert await material_sizes(db, "alice", [m.id]) == {m.id: 3}
    assert await delete_material(db, "alice", m.id)
    assert not await delete_material(db, "alice", m.id)
    assert await material_sizes(db, "alice", [m.id]) == {}
    try:
        await get_material(db, "alice", m.id)
        raise AssertionError("a deleted material was read")
    except errors.NotFound:
        pass


async def test_materials_uploaded_before_their_summaries_were_kept_get_the_same_excerpt(db):
    """The migration that keeps what reading found fills in older materials from their text, cut as uploads are."""
    texts = ["Plants make glucose.", "  many\n\n spaces\tand tabs  ", "word " * 100, "x" * 300, "",
             "光合作用" * 70 + " end"]  # fmt: skip
    ids = []
    for i, text in enumerate(texts):
        m = await store_material(db, "alice", f"{i}.txt", "text/plain", text.encode() or b" ")
        ids.append(m.id)
        await db.execute("UPDATE materials SET text = $2, characters = 0, excerpt = '' WHERE id = $1", m.id, text)
    sql = (resources.files("openmaic.store") / "migrations" / "0023_material_reading_summary.sql").read_text()
    (backfill,) = [s for s in sql.split(";") if "UPDATE materials" in s]
    await db.execute(backfill)
    listed = {m.id: m for m in await list_materials(db, "alice", 10)}
    for mid, text in zip(ids, texts, strict=True):
        assert (listed[mid].characters, listed[mid].excerpt) == (len(text), excerpt_of(text)), text
