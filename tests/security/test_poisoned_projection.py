"""A log written before the doors refused NUL may hold it: the read models project it anyway, cleaned, live and
in a rebuild. (Before, library_cards and session_list stopped for every owner, and a rebuild failed alike.)"""

from __future__ import annotations

from openmaic.courses.events import CourseCreated
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.projections import default_projections
from openmaic.projections.base import live_tables, lock_key
from openmaic.projections.projector import Applier
from openmaic.projections.rebuild import rebuild
from openmaic.store.queries import Q


async def append_around_the_doors(db, log: EventLog, stream_id: str, title: str, owner: str) -> None:
    """Append ``course.created`` with ``title`` in which ``POISON`` becomes the escape ``\\u0000``: the bytes an
    older version stored, which today's log refuses."""
    batch = StreamAppend(stream_id=stream_id, events=[CourseCreated(title=title)], create=NewStream("course", owner))
    columns = list(log.append_args([batch]))
    columns[-1] = [d.replace("POISON", "\\u0000") for d in columns[-1]]
    await db.fetch(Q.append, *columns)


async def test_a_nul_in_the_log_is_projected_cleaned_live_and_in_a_rebuild(db):
    log = EventLog(db)
    await append_around_the_doors(db, log, "course-evil", "evilPOISONpill", "mallory")
    await log.append(StreamAppend(stream_id="course-fine", events=[CourseCreated(title="Fractions")],
                                  create=NewStream("course", "alice")))
    assert await db.fetchval("SELECT count(*) FROM events WHERE data::text LIKE '%\\\\u0000%'") == 1
    for projection in default_projections():
        applier = Applier(db, log, projection, checkpoint=projection.name, tables=live_tables(projection),
                          pause_key=lock_key("apply", projection.name))
        await applier.catch_up()
    titles = {r["course_id"]: r["title"] for r in await db.fetch("SELECT course_id, title FROM library_cards")}
    assert titles == {"course-evil": "evilpill", "course-fine": "Fractions"}
    for projection in default_projections():
        await rebuild(db, log, projection)
    titles = {r["course_id"]: r["title"] for r in await db.fetch("SELECT course_id, title FROM library_cards")}
    assert titles == {"course-evil": "evilpill", "course-fine": "Fractions"}
