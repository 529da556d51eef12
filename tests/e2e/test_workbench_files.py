"""The workbench's page and static files over HTTP (no browser needed)."""

from __future__ import annotations

import re

from openmaic.api import web
from tests.integration.api_harness import make_config, running_api


async def test_the_page_and_its_modules_are_served_and_nothing_else(db):
    async with running_api(db, make_config("identity: {mode: token}"), blueprints=[web.bp]) as api, \
            api.client() as client:  # fmt: skip
        # Public even where the API needs a token: the page holds no data.
        page = await client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        # Every file the page and its modules load is served with its type.
        names = re.findall(r'/static/([\w.]+)', page.text)
        script = (await client.get("/static/app.js")).text
        names += re.findall(r'from "\./([\w.]+)"', script)
        assert {"app.js", "styles.css", "api.js", "fold.js", "stream.js"} <= set(names)
        for name in names:
            r = await client.get(f"/static/{name}")
            kind = "text/css" if name.endswith(".css") else "text/javascript"
            assert r.status_code == 200 and r.headers["content-type"].startswith(kind), name
            assert r.headers["x-content-type-options"] == "nosniff"
        # Only files of the package with a known type: no source, no traversal, no hidden files.
        for path in ("/static/__init__.py", "/static/..%2Fweb.py", "/static/../api/web.py", "/static/.x.js",
                     "/static/missing.js", "/static/sub/app.js", "/static/app%00.js", "/static/app.js%20"):  # fmt: skip
            r = await client.get(path)
            assert r.status_code == 404, path
            assert r.text == "Not found", path
        doc = (await client.get("/api/openapi.json")).json()
        assert "/" in doc["paths"] and "/static/{name}" in doc["paths"]
