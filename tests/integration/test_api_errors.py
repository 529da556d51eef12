"""Every class of bad input gets the right status and a JSON error naming what was wrong, over real sockets."""

from __future__ import annotations

import logging

import msgspec

from tests.eventsource import open_sse
from tests.integration.api_harness import make_config, running_api, testing_bp, ws_rejection

LIMITS = make_config("limits: {json_body_bytes: 1024}")
URL = "/api/test/streams/s/messages"
JSON = {"Content-Type": "application/json"}


def error_of(r, status: int, code: str) -> dict:
    """OpenMAIC's apiError envelope: {success: false, errorCode, error, details?}."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["success"] is False and body["errorCode"] == code, body
    assert isinstance(body["error"], str) and body["error"]
    assert set(body) <= {"success", "errorCode", "error", "details"}, body
    return body


async def test_bodies_malformed_wrong_types_and_missing_fields_are_400s_naming_the_field(db):
    async with running_api(db, LIMITS, blueprints=[testing_bp]) as api, api.client() as client:
        await api.create_stream("s")
        ok = await client.post(URL, json={"commandId": "c1", "text": "hi"})
        assert ok.status_code == 202
        assert ok.json() == {"success": True, "commandId": "c1", "seq": 2, "replayed": False}
        # Fields the route does not know are ignored, as OpenMAIC's routes ignore them.
        ok = await client.post(URL, json={"commandId": "c2", "text": "hi", "bogus": True, "command_id": 5})
        assert ok.status_code == 202, ok.text

        err = error_of(await client.post(URL, content=b'{"commandId": "c1",', headers=JSON), 400, "INVALID_REQUEST")
        assert "not valid JSON" in err["error"] and "details" not in err
        error_of(await client.post(URL, content=b"", headers=JSON), 400, "INVALID_REQUEST")

        cases = [
            ({"commandId": "c", "text": 5}, "text"),
            ({"commandId": "c", "text": "x", "delivery": "later"}, "delivery"),
            ({"commandId": "c", "text": "x", "meta": {"count": -1}}, "meta.count"),
            ({"commandId": "c", "text": "x", "meta": {"count": 1, "maxItems": "many"}}, "meta.maxItems"),
            ([1, 2], ""),
        ]
        for payload, path in cases:
            err = error_of(await client.post(URL, json=payload), 400, "INVALID_REQUEST")
            assert err["details"]["path"] == path, (payload, err)
            if path:
                assert path in err["error"]
        for payload, path in [({"text": "x"}, "commandId"), ({"commandId": "c", "text": "x", "meta": {}},
                                                             "meta.count")]:
            err = error_of(await client.post(URL, json=payload), 400, "MISSING_REQUIRED_FIELD")
            assert err["error"] == f"Missing required field: {path}" and err["details"] == {"path": path}
        assert (await api.log.stream_row("s")).head_seq == 3  # only the two accepted messages were written


async def test_each_route_answers_errors_in_its_declared_form(db):
    async with running_api(db, blueprints=[testing_bp]) as api, api.client() as client:
        r = await client.get("/api/test/json-style/x")  # OpenMAIC's jsonErr
        assert (r.status_code, r.json()) == (404, {"error": {"code": "INVALID_REQUEST", "message": "no thing 'x'",
                                                             "details": {"thing": "x"}}})
        r = await client.get("/api/test/hidden/x")  # the owner-hiding plain 404
        assert (r.status_code, r.text, r.headers["content-type"]) == (404, "Not found", "text/plain; charset=utf-8")
        error_of(await client.get("/api/test/hidden/conflict"), 409, "CONFLICT")
        error_of(await client.post("/api/test/conflict"), 409, "RUN_STATE_CONFLICT")


async def test_oversized_bodies_are_refused_by_length_and_while_chunked(db):
    async with running_api(db, LIMITS, blueprints=[testing_bp]) as api, api.client() as client:
        await api.create_stream("s")
        big = b'{"commandId": "c", "text": "' + b"x" * 2000 + b'"}'
        err = error_of(await client.post(URL, content=big, headers=JSON), 413, "INVALID_REQUEST")
        assert err["details"] == {"limit": 1024}

        async def chunked(data: bytes, size: int = 300):
            for i in range(0, len(data), size):
                yield data[i : i + size]

        r = await client.post(URL, content=chunked(big), headers=JSON)
        assert "content-length" not in r.request.headers  # really chunked
        error_of(r, 413, "INVALID_REQUEST")
        small = b'{"commandId": "c2", "text": "' + b"y" * 700 + b'"}'
        r = await client.post(URL, content=chunked(small), headers=JSON)
        assert r.status_code == 202, r.text
        # Every route has a limit, including those without a body.
        error_of(await client.request("GET", "/healthz", content=big), 413, "INVALID_REQUEST")


async def test_unknown_route_and_wrong_method(db):
    async with running_api(db, blueprints=[testing_bp]) as api, api.client() as client:
        r = await client.get("/api/nothing/here")
        assert (r.status_code, r.text) == (404, "Not found")
        r = await client.post("/api/agent/sessions/s/events", json={})
        err = error_of(r, 405, "INVALID_REQUEST")
        assert "GET" in err["details"]["allowed"] and "GET" in r.headers["allow"]
        error_of(await client.delete("/healthz"), 405, "INVALID_REQUEST")


async def test_unknown_ids_and_other_owners_ids_get_the_same_404(db):
    async with running_api(db, blueprints=[testing_bp]) as api, api.client() as client:
        async def answers() -> dict:
            return {
                "meta": await client.get("/api/agent/sessions/x"),
                "sse": await client.get("/api/agent/sessions/x/events", headers={"Accept": "text/event-stream"}),
                "message": await client.post("/api/agent/sessions/x/messages", json={"text": "t"}),
                "post": await client.post("/api/test/streams/x/messages", json={"commandId": "c", "text": "t"}),
            }

        missing = await answers()
        ws_missing = await ws_rejection(api, "/api/streams/x/ws")
        await api.create_stream("x", owner="someone-else", events=3)
        theirs = await answers()
        ws_theirs = await ws_rejection(api, "/api/streams/x/ws")
        for name in missing:
            a, b = missing[name], theirs[name]
            if name == "post":
                error_of(a, 404, "INVALID_REQUEST")
            else:
                assert (a.status_code, a.text) == (404, "Not found"), name
            # Identical but for the clock: the two answers may straddle a second.
            assert (a.status_code, a.content, _undated(a.headers)) == \
                (b.status_code, b.content, _undated(b.headers)), name
        assert ws_missing.status_code == ws_theirs.status_code == 404
        assert ws_missing.body == ws_theirs.body
        assert (await api.log.stream_row("x")).head_seq == 4  # nothing was written for the wrong owner


async def test_bad_cursors(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s", events=4)
        for query in ("after=-1", "after=x", "after=9"):  # the WebSocket's after: beyond the head is a 400
            rejected = await ws_rejection(api, f"/api/streams/s/ws?{query}")
            assert rejected.status_code == 400
            assert msgspec.json.decode(rejected.body)["details"]["path"] == "after"
        # An SSE cursor no client can have (malformed, or beyond the head) starts from the beginning (OpenMAIC's).
        for value in ("abc", "-3", "99"):
            async with open_sse(f"{api.url}/api/agent/sessions/s/events", {"Last-Event-ID": value}) as r:
                assert r.status == 200
                assert await anext(r.lines) == ": replaying from event 0", value


async def test_unexpected_errors_are_a_generic_500_with_a_logged_reference(db, caplog):
    async with running_api(db, blueprints=[testing_bp]) as api, api.client() as client:
        with caplog.at_level(logging.ERROR, logger="openmaic.api"):
            r = await client.get("/api/test/boom")
        err = error_of(r, 500, "INTERNAL_ERROR")
        assert "hunter2" not in r.text and "postgresql" not in r.text
        ref = err["details"]["ref"]
        assert ref in err["error"]
        logged = [rec for rec in caplog.records if ref in rec.getMessage()]
        assert logged and logged[0].exc_info is not None
        # The server keeps serving.
        assert (await client.get("/healthz")).status_code == 200


def _undated(headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() != "date"}
