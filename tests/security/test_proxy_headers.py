"""What a reverse proxy tells the server, over real sockets: believed only as the operator configured it.

Before, ``trusted_header`` believed the first of two user headers (a client's own, when the proxy appends instead
of replacing) and took ``mallory, alice`` as a user; the anonymous cookie was never ``Secure`` behind a TLS proxy.
"""

from __future__ import annotations

from http.cookies import SimpleCookie

from tests.integration.api_harness import make_config, running_api

EVENTS = "/api/agent/sessions/{}"


async def test_trusted_header_refuses_a_user_header_sent_twice_or_holding_a_list(db):
    config = make_config("identity: {mode: trusted_header, trusted_proxies: [127.0.0.1/32], user_header: X-User}")
    async with running_api(db, config) as api, api.client() as client:
        await api.create_stream("a", owner="alice")
        assert (await client.get(EVENTS.format("a"), headers={"X-User": "alice"})).status_code == 200
        for headers in ([("X-User", "alice"), ("X-User", "mallory")], [("X-User", "mallory"), ("X-User", "alice")],
                        [("X-User", "alice, mallory")], [("X-User", "mallory,alice")]):
            r = await client.get(EVENTS.format("a"), headers=headers)
            assert r.status_code == 401, (headers, r.text)
            assert r.json()["errorCode"] == "INVALID_CREDENTIAL" and "X-User" in r.json()["error"]


def _anonymous_cookie(r) -> SimpleCookie:
    return SimpleCookie(r.headers["set-cookie"])["anonymous_id"]


async def test_the_anonymous_cookie_is_secure_when_a_trusted_proxy_says_https(db):
    behind = make_config("identity: {mode: anonymous, trusted_proxies: [127.0.0.1/32]}")
    async with running_api(db, behind) as api, api.client() as client:
        assert _anonymous_cookie(await client.get(EVENTS.format("none"), headers={"X-Forwarded-Proto": "https"}))["secure"]
        assert _anonymous_cookie(await client.get(EVENTS.format("none"), headers={"X-Forwarded-Proto": "https, http"}))["secure"]
        assert not _anonymous_cookie(await client.get(EVENTS.format("none"), headers={"X-Forwarded-Proto": "http"}))["secure"]
        assert not _anonymous_cookie(await client.get(EVENTS.format("none")))["secure"]

    # From a peer that is not a trusted proxy the header is ignored.
    elsewhere = make_config("identity: {mode: anonymous, trusted_proxies: [10.0.0.0/8]}")
    async with running_api(db, elsewhere) as api, api.client() as client:
        assert not _anonymous_cookie(await client.get(EVENTS.format("none"), headers={"X-Forwarded-Proto": "https"}))["secure"]
