"""A document's course read through the fold cache is the fold of its whole stream: after saves, part writes and
deletes by the persistence routes, events appended by other writers, and a database that lost its last commits."""

from __future__ import annotations

import msgspec
import pytest

from openmaic.browser_import import documents
from openmaic.courses.document import document_of
from openmaic.courses.events import CourseDocument, CourseRetitled, evolve_course
from openmaic.events.log import EventLog, StreamAppend
from openmaic.store.migrations import migrate

THEME = {"backgroundColor": "#ffffff", "themeColors": ["#5b9bd5"], "fontColor": "#333333", "fontName": "Arial"}
OWNER = "owner-folds"


def scene(i: int, title: str = "") -> dict:
    canvas = {"id": f"c{i}", "viewportSize": 1000, "viewportRatio": 0.5625, "theme": THEME, "elements": []}
    return {"id": f"s{i}", "stageId": "doc", "type": "slide", "title": title or f"Scene {i}", "order": i,
            "content": {"type": "slide", "canvas": canvas}}


def document(name: str, scenes: int = 3) -> dict:
    return {"stage": {"id": "doc", "name": name, "createdAt": 1, "updatedAt": 2},
            "scenes": [scene(i) for i in range(scenes)]}


async def whole_fold(log: EventLog, course_id: str):
    doc, _ = await log.fold(course_id, CourseDocument(), evolve_course)
    return document_of(course_id, doc)


async def restore_to(db, course_id: str, seq: int) -> None:
    """What restoring the database to the point where the course's stream ended at ``seq`` leaves of it (done
    below the application, so the log's append-only trigger is not asked)."""
    async with db.connection() as conn, conn.transaction():
        await conn.execute("ALTER TABLE events DISABLE TRIGGER events_append_only_rows")
        await conn.execute("DELETE FROM events WHERE stream_id = $1 AND seq > $2", course_id, seq)
        await conn.execute("UPDATE streams SET head_seq = $2, head_hash = (SELECT hash FROM events WHERE "
                           "stream_id = $1 AND seq = $2) WHERE id = $1", course_id, seq)
        await conn.execute("ALTER TABLE events ENABLE TRIGGER events_append_only_rows")


async def test_a_document_read_through_the_cache_is_the_fold_of_its_whole_stream(db):
    await migrate(db)
    log = EventLog(db)
    for i in range(6):
        assert await documents.put_document(log, OWNER, "doc", document(f"Take {i}"))
        # Each read folds only what was appended since the last one, and must read as a fold from the start.
        course_id = await documents.find_document(db, OWNER, "doc")
        assert await documents.read_document(log, OWNER, "doc") == await whole_fold(log, course_id)
    await documents.put_scene(log, OWNER, "doc", "s9", scene(9, "Added"))
    await documents.delete_scene(log, OWNER, "doc", "s0")
    # A writer outside the persistence routes (a Pro tool) appends to the same course.
    head = (await db.fetchrow("SELECT head_seq FROM streams WHERE id = $1", course_id))["head_seq"]
    await log.append(StreamAppend(stream_id=course_id, events=[CourseRetitled(title="Renamed elsewhere")],
                                  expected_seq=head))
    read = await documents.read_document(log, OWNER, "doc")
    assert read == await whole_fold(log, course_id)
    assert read.stage.name == "Renamed elsewhere"
    assert [s.id for s in read.scenes] == ["s1", "s2", "s9"]
    # The same document saved again is still recognized as unchanged (the decision reads the cached fold too).
    again = msgspec.to_builtins(read)
    assert not await documents.put_document(log, OWNER, "doc", again)


async def test_a_kept_fold_past_the_streams_head_is_dropped(db):
    """A database restored to an earlier point (or a standby promoted without the last commits) has a shorter
    stream than the fold this process kept: the course is folded again from its first event."""
    await migrate(db)
    log = EventLog(db)
    await documents.put_document(log, OWNER, "doc", document("First"))
    course_id = await documents.find_document(db, OWNER, "doc")
    await documents.put_document(log, OWNER, "doc", document("Second"))
    assert (await documents.read_document(log, OWNER, "doc")).stage.name == "Second"
    head = (await db.fetchrow("SELECT head_seq FROM streams WHERE id = $1", course_id))["head_seq"]
    await restore_to(db, course_id, head - 1)
    assert (await documents.read_document(log, OWNER, "doc")).stage.name == "First"
    # And it is written on from there: the save names the head the database has.
    assert await documents.put_document(log, OWNER, "doc", document("Third"))
    assert (await documents.read_document(log, OWNER, "doc")).stage.name == "Third"


@pytest.mark.parametrize("written_since", [1, 2])
async def test_a_kept_fold_the_stream_no_longer_continues_is_dropped(db, written_since):
    """Restored to an earlier point and written on since by another process: the stream is as long as the fold
    this process kept (or longer), but holds other events at its seqs; the hash chain tells."""
    await migrate(db)
    log = EventLog(db)
    await documents.put_document(log, OWNER, "doc", document("First"))
    course_id = await documents.find_document(db, OWNER, "doc")
    await documents.put_document(log, OWNER, "doc", document("Second", scenes=5))
    assert (await documents.read_document(log, OWNER, "doc")).stage.name == "Second"
    head = (await db.fetchrow("SELECT head_seq FROM streams WHERE id = $1", course_id))["head_seq"]
    await restore_to(db, course_id, head - 1)
    other_process = EventLog(db)
    titles = [f"Elsewhere {i}" for i in range(written_since)]
    await other_process.append(StreamAppend(stream_id=course_id, events=[CourseRetitled(title=t) for t in titles],
                                            expected_seq=head - 1))
    assert (await documents.read_document(log, OWNER, "doc")).stage.name == titles[-1]
    assert await documents.read_document(log, OWNER, "doc") == await whole_fold(log, course_id)
