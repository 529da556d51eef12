"""Identity modes over real sockets: single user, bearer tokens, a trusted proxy's header, anonymous cookies."""

from __future__ import annotations

import json
import re
from http.cookies import SimpleCookie

from openmaic.api.identity import COOKIE_MAX_AGE_S
from openmaic.owners.tokens import create_token, revoke_token, token_id
from tests.integration.api_harness import anonymous_owner, make_config, raw_ws, running_api, ws_rejection

EVENTS = "/api/agent/sessions/{}"


async def test_single_user_owns_everything_of_its_owner_and_nothing_else(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("mine", owner="local")
        await api.create_stream("theirs", owner="bob")
        assert (await client.get(EVENTS.format("mine"))).status_code == 200
        assert (await client.get(EVENTS.format("theirs"))).status_code == 404
    async with running_api(db, make_config("identity: {single_user_owner: bob}")) as api, api.client() as client:
        assert (await client.get(EVENTS.format("theirs"))).status_code == 200
        assert (await client.get(EVENTS.format("mine"))).status_code == 404


async def test_bearer_tokens_hashed_revocable_and_required(db):
    async with running_api(db, make_config("identity: {mode: token}")) as api, api.client() as client:
        await api.create_stream("a", owner="alice")
        await api.create_stream("b", owner="bob")
        token = await create_token(db, "alice")
        assert token.startswith(token_id(token) + ".")
        stored = await db.fetchrow("SELECT owner_id, token_hash FROM api_tokens WHERE id = $1", token_id(token))
        assert stored["owner_id"] == "alice" and token.encode() not in bytes(stored["token_hash"])

        r = await client.get(EVENTS.format("a"))
        assert r.status_code == 401 and r.json()["errorCode"] == "INVALID_CREDENTIAL"
        assert "Bearer" in r.json()["error"] and r.headers["www-authenticate"] == "Bearer"
        for bad in ("Bearer nope", "Basic YWxpY2U6eA==", "Bearer"):
            r = await client.get(EVENTS.format("a"), headers={"Authorization": bad})
            assert r.status_code == 401, bad

        auth = {"Authorization": f"Bearer {token}"}
        assert (await client.get(EVENTS.format("a"), headers=auth)).status_code == 200
        assert (await client.get(EVENTS.format("b"), headers=auth)).status_code == 404
        async with raw_ws(api.port, "/api/streams/a/ws", headers=[(b"authorization", auth["Authorization"].encode())]) as ws:
            assert b'"seq":1' in (await ws.get_message()).encode()
        assert (await ws_rejection(api, "/api/streams/a/ws")).status_code == 401
        assert (await client.get("/healthz")).status_code == 200  # operational routes are public

        # Knowing a token's id is not enough to revoke it by "full token".
        assert await revoke_token(db, token_id(token) + ".wrong-secret") is False
        assert await revoke_token(db, token_id(token)) is True
        assert await revoke_token(db, token_id(token)) is False
        r = await client.get(EVENTS.format("a"), headers=auth)
        assert r.status_code == 401 and "revoked" in r.json()["error"]

        other = await create_token(db, "alice")
        assert await revoke_token(db, other) is True
        assert (await client.get(EVENTS.format("a"), headers={"Authorization": f"Bearer {other}"})).status_code == 401


async def test_a_browser_websocket_sends_its_bearer_token_as_a_subprotocol(db):
    async with running_api(db, make_config("identity: {mode: token}")) as api:
        await api.create_stream("s", owner="alice")
        await api.create_stream("b", owner="bob")
        token = await create_token(db, "alice")
        offer = ["openmaic", f"bearer.{token}"]
        async with raw_ws(api.port, "/api/streams/s/ws", subprotocols=offer) as ws:
            # The answer names the protocol, never the token (it would land in logs and proxies' headers).
            assert ws.subprotocol == "openmaic"
            assert json.loads(await ws.get_message())["type"] == "event"
        # Another owner's stream is the same 404 as over HTTP; an unknown or revoked token is a 401.
        assert (await ws_rejection(api, "/api/streams/b/ws", subprotocols=offer)).status_code == 404
        assert (await ws_rejection(api, "/api/streams/s/ws", subprotocols=["openmaic", "bearer.tok_x.y"])
                ).status_code == 401  # fmt: skip
        assert await revoke_token(db, token)
        assert (await ws_rejection(api, "/api/streams/s/ws", subprotocols=offer)).status_code == 401
        # Without any token the handshake is refused, naming both ways to send one.
        rejected = await ws_rejection(api, "/api/streams/s/ws", subprotocols=["openmaic"])
        assert rejected.status_code == 401 and b"bearer.<token>" in rejected.body


async def test_trusted_header_only_from_trusted_proxies(db):
    trusted = make_config("identity: {mode: trusted_header, trusted_proxies: [127.0.0.1/32], user_header: X-User}")
    async with running_api(db, trusted) as api, api.client() as client:
        await api.create_stream("a", owner="alice")
        assert (await client.get(EVENTS.format("a"), headers={"X-User": "alice"})).status_code == 200
        assert (await client.get(EVENTS.format("a"), headers={"X-User": "mallory"})).status_code == 404
        r = await client.get(EVENTS.format("a"))
        assert r.status_code == 401 and "X-User" in r.json()["error"]
        async with raw_ws(api.port, "/api/streams/a/ws", headers=[(b"x-user", b"alice")]) as ws:
            assert b'"seq":1' in (await ws.get_message()).encode()

    elsewhere = make_config("identity: {mode: trusted_header, trusted_proxies: [10.0.0.0/8], user_header: X-User}")
    async with running_api(db, elsewhere) as api, api.client() as client:
        # From 127.0.0.1 the header is ignored, whatever else the request claims about its origin.
        for headers in ({"X-User": "alice"}, {"X-User": "alice", "Remote-Addr": "10.0.0.5", "X-Forwarded-For": "10.0.0.5"}):
            r = await client.get(EVENTS.format("a"), headers=headers)
            assert r.status_code == 401 and r.json()["errorCode"] == "INVALID_CREDENTIAL"
        assert (await ws_rejection(api, "/api/streams/a/ws", [(b"x-user", b"alice")])).status_code == 401


async def test_anonymous_owner_is_openmaics_anonymous_id_cookie_renewed_on_every_answer(db):
    config = make_config("identity: {mode: anonymous}")
    async with running_api(db, config) as api, api.client() as client:
        r = await client.get(EVENTS.format("none"))
        assert r.status_code == 404  # an error response still carries the new owner's cookie
        cookie = SimpleCookie(r.headers["set-cookie"])["anonymous_id"]
        assert cookie["max-age"] == str(COOKIE_MAX_AGE_S) and cookie["httponly"] and cookie["samesite"] == "Lax"
        assert cookie["path"] == "/" and re.fullmatch(r"[0-9a-f-]{36}", cookie.value)
        owner = anonymous_owner(cookie.value)

        await api.create_stream("mine", owner=owner)
        r = await client.get(EVENTS.format("mine"))  # the client sends the cookie back
        assert r.status_code == 200
        renewed = SimpleCookie(r.headers["set-cookie"])["anonymous_id"]  # renewed: 400 days from now again
        assert renewed.value == cookie.value and renewed["max-age"] == str(COOKIE_MAX_AGE_S)
        ws_headers = [(b"cookie", f"anonymous_id={cookie.value}".encode())]
        async with raw_ws(api.port, "/api/streams/mine/ws", headers=ws_headers) as ws:
            assert b'"seq":1' in (await ws.get_message()).encode()
        assert (await ws_rejection(api, "/api/streams/mine/ws")).status_code == 401

        # A malformed cookie is re-minted, never refused, and never taken as someone's id.
        for bad in ("not-a-uuid", cookie.value + "x", "anon:" + cookie.value):
            client.cookies.clear()
            r = await client.get(EVENTS.format("mine"), headers={"Cookie": f"anonymous_id={bad}"})
            assert r.status_code == 404
            assert SimpleCookie(r.headers["set-cookie"])["anonymous_id"].value not in (cookie.value, bad)
