"""Event types: stable tags, data without the tag, unknown tags, upcasting."""

from __future__ import annotations

import msgspec
import pytest

from openmaic import errors
from openmaic.events.core import SessionMessagePosted
from openmaic.events.types import Event, Registry


def test_encode_stores_data_without_the_tag():
    reg = Registry()
    reg.register(SessionMessagePosted)
    t, v, data = reg.encode(SessionMessagePosted(text="hi"))
    assert (t, v) == ("session.message_posted", 1)
    assert msgspec.json.decode(data) == {"text": "hi", "delivery": "queued"}
    assert reg.decode(t, v, data) == SessionMessagePosted(text="hi")


def test_event_without_fields_encodes_to_an_empty_object():
    reg = Registry()

    class Ping(Event, tag="test.ping"):
        pass

    reg.register(Ping)
    assert reg.encode(Ping())[2] == b"{}"
    assert reg.decode("test.ping", 1, b"{}") == Ping()


def test_encoding_many_events_into_columns_gives_what_encoding_each_gives():
    reg = Registry()

    class Ping(Event, tag="test.ping"):
        pass

    class Bumped(Event, tag="test.bumped"):
        version = 3
        n: int
        note: str = "é \u2028 \"quoted\""

    for cls in (SessionMessagePosted, Ping, Bumped):
        reg.register(cls)
    events = [SessionMessagePosted(text="hi"), Ping(), Bumped(n=7), SessionMessagePosted(text="")]
    types: list[str] = ["earlier"]
    versions: list[int] = [0]
    datas: list[str] = ["{}"]
    reg.encode_into(events, types, versions, datas)
    each = [reg.encode(e) for e in events]
    assert types[1:] == [t for t, _, _ in each] and versions[1:] == [v for _, v, _ in each] == [1, 1, 3, 1]
    assert datas[1:] == [d.decode() for _, _, d in each] and datas[2] == "{}"
    assert types[0] == "earlier" and len(types) == len(versions) == len(datas) == 5
    with pytest.raises(TypeError, match="not a registered"):
        Registry().encode_into([Ping()], [], [], [])


def test_unknown_tag_names_the_tag_and_stream():
    reg = Registry()
    with pytest.raises(errors.UnknownEventType) as exc:
        reg.decode("run.teleported", 1, b"{}", stream_id="run-42", seq=7)
    assert "run.teleported" in str(exc.value) and "run-42" in str(exc.value)


def test_unknown_fields_are_tolerated_for_rolling_deploys():
    reg = Registry()
    reg.register(SessionMessagePosted)
    assert reg.decode("session.message_posted", 1, b'{"text":"a","new_field":1}') == SessionMessagePosted(text="a")


def test_tags_must_be_explicit_and_unique():
    reg = Registry()

    class NoTag(Event):
        pass

    with pytest.raises(TypeError, match="explicit dotted tag"):
        reg.register(NoTag)

    class A(Event, tag="test.same"):
        pass

    class B(Event, tag="test.same"):
        pass

    reg.register(A)
    with pytest.raises(TypeError, match="taken"):
        reg.register(B)


def test_old_versions_are_upcast():
    reg = Registry()

    class Renamed(Event, tag="test.renamed"):
        version = 3
        title: str
        size: int = 0

    reg.register(Renamed)

    @reg.upcaster("test.renamed", 1)
    def v1_to_v2(d):
        return {"title": d["name"]}

    @reg.upcaster("test.renamed", 2)
    def v2_to_v3(d):
        return {**d, "size": 1}

    assert reg.decode("test.renamed", 1, b'{"name":"x"}') == Renamed(title="x", size=1)
    assert reg.decode("test.renamed", 3, b'{"title":"y","size":2}') == Renamed(title="y", size=2)
    with pytest.raises(errors.UnknownEventType, match="no upcaster"):
        reg.decode("test.renamed", 0, b"{}")


def test_invalid_stored_data_is_a_clear_error():
    reg = Registry()
    reg.register(SessionMessagePosted)
    with pytest.raises(errors.UnknownEventType, match="does not decode"):
        reg.decode("session.message_posted", 1, b'{"text": 5}', stream_id="s", seq=2)
