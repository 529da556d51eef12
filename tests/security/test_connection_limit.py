"""At PostgreSQL's connection limit the API answers 503 with a message a user can act on, and ``/readyz`` says not
ready until the refusals stop. Before, the answer was a 500 carrying the server's own words, and ``/readyz`` kept
saying ready (the pool's open connection still answered its ping)."""

from __future__ import annotations

import contextlib
import secrets
import urllib.parse

from openmaic.store.database import CONNECTION_LIMIT_MESSAGE, open_database
from tests.integration.api_harness import running_api
from tests.runtime import wait_for

LIMIT = 3  # the pool's first connection, the LISTEN connection, and one more


async def test_at_the_connection_limit_requests_get_503_and_readiness_fails(db, db_url):
    # A role of its own with a connection limit (a superuser, as the suite's, is exempt from one).
    role = "limited_" + secrets.token_hex(4)
    await db.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {LIMIT}")
    for grant in ("USAGE, CREATE ON SCHEMA public", "ALL ON ALL TABLES IN SCHEMA public",
                  "ALL ON ALL SEQUENCES IN SCHEMA public"):
        await db.execute(f"GRANT {grant} TO {role}")
    parts = urllib.parse.urlsplit(db_url)
    url = urllib.parse.urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
    try:
        async with open_database(url, min_size=1, max_size=10, listen=["openmaic_events"]) as limited, \
                running_api(limited) as api, api.client() as client:  # fmt: skip
            await api.create_stream("s1", owner="local")
            assert (await client.get("/api/agent/sessions/s1")).status_code == 200
            assert (await client.get("/readyz")).status_code == 200
            async with contextlib.AsyncExitStack() as held:
                # Take every connection the role may have: the next request needs one more.
                for _ in range(LIMIT - 2):
                    await held.enter_async_context(limited.connection())
                async with limited.connection():
                    r = await client.get("/api/agent/sessions/s1")
                assert r.status_code == 503, r.text
                assert r.json()["errorCode"] == "SERVICE_UNAVAILABLE" and r.json()["error"] == CONNECTION_LIMIT_MESSAGE
                assert "too many" not in r.text and role not in r.text  # not the server's own words
                # One pooled connection is idle again, so a ping answers; but the server refused this process a
                # connection a moment ago, and requests needing a second one still get 503.
                ready = await client.get("/readyz")
                assert ready.status_code == 503, ready.text
                assert ready.json()["details"]["checks"]["connections"].startswith("failed: PostgreSQL refused")
            # Connections given back: requests are served again at once, and readiness returns.
            assert (await client.get("/api/agent/sessions/s1")).status_code == 200

            async def ready_again() -> bool:
                return (await client.get("/readyz")).status_code == 200

            await wait_for(ready_again, timeout=20, interval=0.25)
    finally:
        await db.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
        await db.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {role}")
        await db.execute(f"REVOKE ALL ON SCHEMA public FROM {role}")
        await db.execute(f"DROP ROLE {role}")
