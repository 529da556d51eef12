"""The legacy import stores only media types the asset store serves safely (real sockets, `openmaic serve`).

``POST /api/legacy-import/stages`` kept each record's declared ``mimeType`` (and built a clip's from its
``format``) unchecked: ``text/html``, ``text/javascript`` and ``image/x,text/html`` were stored and served as
such from this origin, and ``image/png`` followed by CR LF and a header gave an asset that answered 500 forever.
Every declared type is now checked against the uploads' list, and a bad one is a clear 400 that stores nothing.
"""

from __future__ import annotations

import copy

import pytest

from openmaic.store.database import open_database
from tests.integration.test_browser_import_http import BOUND, BROWSER, PNG, SMALL, stage_body, state
from tests.serving import running_server

BAD = [
    ("media", "text/html", "is not a media type this server stores"),
    ("media", "text/javascript", "is not a media type this server stores"),
    ("media", "image/x,text/html", "is not a media type this server stores"),
    ("media", "image/svg+xml", "is not a media type this server stores"),
    ("media", "video/mp4", "is not a media type this server stores"),  # a picture's record: image/* only
    ("media", "image/png\r\nSet-Cookie: a=b", "holds control characters"),
    ("audio", "html", "is not a media type this server stores"),
    ("audio", "mp3\r\nSet-Cookie: a=b", "holds control characters"),
]


@pytest.mark.parametrize(("where", "declared", "says"), BAD)
async def test_an_import_declaring_an_unsafe_media_type_is_a_clear_400_that_stores_nothing(
        db_url, tmp_path, where, declared, says):
    async with running_server(db_url, tmp_path, SMALL + "identity: {single_user_owner: alice}\n") as (alice, _):
        assert (await alice.post("/api/identity/legacy-import-binding", json={"browserId": BROWSER})).status_code == 200
        before = await state(db_url)
        body = copy.deepcopy(stage_body())
        if where == "media":
            body["media"][0]["mimeType"] = declared
            path = "media[0].mimeType"
        else:
            body["audio"][0]["format"] = declared
            path = "audio[0].format"
        r = await alice.post("/api/legacy-import/stages", json=body, headers=BOUND)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert says in error["message"] and path in error["message"], error
        assert await state(db_url) == before  # nothing stored: no asset, no course

        # The same stage with its types as a browser wrote them imports, and is served under a safe type.
        r = await alice.post("/api/legacy-import/stages", json=stage_body(), headers=BOUND)
        assert r.status_code == 201, r.text
        room = (await alice.get(f"/api/classrooms/{r.json()['courseId']}")).json()["classroom"]
        r = await alice.get(f"/api/assets/{room['scenes'][0]['media'][0]['assetId']}")
        assert (r.status_code, r.content, r.headers["content-type"]) == (200, PNG, "image/png")


async def test_an_asset_stored_with_an_unsafe_type_before_is_served_as_plain_bytes(db_url, tmp_path):
    async with running_server(db_url, tmp_path, SMALL + "identity: {single_user_owner: alice}\n") as (alice, _):
        async with open_database(db_url, max_size=1) as db:
            for i, declared in enumerate(("image/png\r\nSet-Cookie: a=b", "text/html")):
                await db.execute("INSERT INTO assets (id, owner_id, media_type, size, sha256, data) "
                                 "VALUES ($1, 'alice', $2, 3, '\\x00', 'abc')", f"asset_{i:032x}", declared)
        for i in range(2):
            r = await alice.get(f"/api/assets/asset_{i:032x}")
            assert (r.status_code, r.content, r.headers["content-type"]) == (200, b"abc", "application/octet-stream")
            assert "set-cookie" not in r.headers
