"""GET /api/assets/{id} over a real socket: owner scoping, Content-Type, ETag, ranges for audio and video."""

from __future__ import annotations

import pytest

from openmaic.api import assets
from openmaic.media.assets import store_generated
from openmaic.models.demo_render import narration, picture
from openmaic.models.media import GeneratedMedia
from tests.integration.api_harness import running_api


async def test_an_asset_is_served_whole_with_its_type_and_etag(db):
    png = picture("A leaf")
    stored = await store_generated(db, "local", "course_1", "image", GeneratedMedia(media_type="image/png", data=png))
    async with running_api(db, blueprints=[assets.bp]) as api, api.client() as client:
        r = await client.get(f"/api/assets/{stored.id}")
        assert r.status_code == 200 and r.content == png
        assert r.headers["content-type"] == "image/png"
        assert r.headers["etag"] == f'"{stored.sha256}"' and r.headers["accept-ranges"] == "bytes"
        assert r.headers["content-length"] == str(len(png)) and r.headers["x-content-type-options"] == "nosniff"
        again = await client.get(f"/api/assets/{stored.id}", headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b""


async def test_ranges_for_audio_across_chunk_boundaries(db):
    clip = narration("A long narration that goes on and on. " * 60)
    assert len(clip) > 2 * assets.CHUNK
    stored = await store_generated(db, "local", "c", "narration", GeneratedMedia(media_type="audio/wav", data=clip))
    url = f"/api/assets/{stored.id}"
    size = len(clip)
    async with running_api(db, blueprints=[assets.bp]) as api, api.client() as client:
        for header, (start, end) in (("bytes=0-99", (0, 99)), (f"bytes={assets.CHUNK - 10}-{assets.CHUNK + 10}",
                                     (assets.CHUNK - 10, assets.CHUNK + 10)), ("bytes=-500", (size - 500, size - 1)),
                                     ("bytes=1000-", (1000, size - 1)), (f"bytes=5-{size + 99}", (5, size - 1))):
            r = await client.get(url, headers={"Range": header})
            assert r.status_code == 206, header
            assert r.headers["content-range"] == f"bytes {start}-{end}/{size}"
            assert r.content == clip[start : end + 1] and r.headers["content-type"] == "audio/wav"
        r = await client.get(url, headers={"Range": f"bytes={size}-"})
        assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{size}"
        r = await client.get(url, headers={"Range": "bytes=0-1,5-9"})  # several ranges: the whole clip
        assert r.status_code == 200 and r.content == clip
        r = await client.get(url, headers={"Range": "bytes=0-9", "If-Range": '"another-version"'})
        assert r.status_code == 200 and len(r.content) == size
        r = await client.get(url)
        assert r.status_code == 200 and r.content == clip


@pytest.mark.parametrize("asset_id", ["other", "asset_" + "0" * 32, "asset_../../etc"])
async def test_another_owners_or_unknown_asset_is_a_plain_not_found(db, asset_id):
    theirs = await store_generated(db, "bob", "c", "image", GeneratedMedia(media_type="image/png", data=picture("x")))
    async with running_api(db, blueprints=[assets.bp]) as api, api.client() as client:
        for target in (theirs.id, asset_id):
            r = await client.get(f"/api/assets/{target}")
            assert (r.status_code, r.text) == (404, "Not found")
