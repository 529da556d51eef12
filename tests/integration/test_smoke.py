from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.log import EventLog, NewStream, StreamAppend


async def test_append_and_read(db):
    log = EventLog(db)
    r = await log.append(
        StreamAppend(stream_id="s1", events=[SessionCreated(kind="test", owner_id="o")], create=NewStream("test", "o"))
    )
    assert r[0].first_seq == 1
    r2 = await log.append_one("s1", [SessionMessagePosted(text="hi"), SessionMessagePosted(text="yo")])
    assert (r2.first_seq, r2.last_seq) == (2, 3)
    evs = await log.read_stream("s1")
    assert [e.seq for e in evs] == [1, 2, 3]
    assert log.decode(evs[1]) == SessionMessagePosted(text="hi")
    all_ = await log.read_all()
    assert len(all_) == 3
