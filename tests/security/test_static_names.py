"""A static file name the file system refuses is a 404 like any missing file, unauthenticated and without a
traceback. Before, a long name (ENAMETOOLONG) was a 500."""

from __future__ import annotations

from openmaic.api import web
from tests.integration.api_harness import make_config, running_api


async def test_a_long_or_unreadable_static_name_is_a_plain_404(db, caplog):
    async with running_api(db, make_config("identity: {mode: token}"), blueprints=[web.bp]) as api, \
            api.client() as client:  # fmt: skip
        for name in ("a" * 300 + ".js", "b" * 99 + ".js", "c" * 5000 + ".css", "app" + "-" * 400 + ".js"):
            r = await client.get(f"/static/{name}")
            assert (r.status_code, r.text) == (404, "Not found"), (len(name), r.status_code, r.text[:200])
        assert (await client.get("/static/app.js")).status_code == 200
    assert not [rec for rec in caplog.records if rec.exc_info], "a refused name must not log a traceback"
