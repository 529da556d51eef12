"""The classroom page and the interactive-scene frame over HTTP, against a real `openmaic serve`: who gets the page,
who gets the same plain 404, and the policies each document is sent with. (The page itself, in a browser, is in
tests/e2e/test_classroom_player.py.)"""

from __future__ import annotations

import io

import httpx
import trio

from openmaic.owners.tokens import create_token
from openmaic.api.web import CLASSROOM_CSP, SCENE_FRAME_CSP, WORKBENCH_CSP
from openmaic.config import default_config
from openmaic.events.log import EventLog
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from openmaic.store.database import open_database
from tests.integration.test_serve_models import serving
from tests.serving import FAST_CONFIG, running_server


async def classroom_of(db_url: str, owner: str, *, deleted: bool = False) -> str:
    """A classroom of ``owner`` (its run goes on in the server's workers); deleted at once with ``deleted``."""
    async with open_database(db_url, max_size=2) as db:
        runs = RunService(EventLog(db), default_config())
        _, state = await runs.start(owner, RunInput(requirement="Tides", outline_review="auto"))
        if deleted:
            await runs.delete_course(owner, state.course_id, "delete-it")
        return state.course_id


def same_answer(a: httpx.Response, b: httpx.Response, *, page: bool = False) -> None:
    """Both the same 404: the plain ``Not found`` of the API, or (``page``) the classroom's not-found page."""
    assert a.status_code == b.status_code == 404 and a.text == b.text
    if page:
        assert "Classroom not found" in a.text and "找不到课堂" in a.text
        assert a.headers["content-type"] == "text/html; charset=utf-8"
    else:
        assert a.text == "Not found"
    assert {k: v for k, v in a.headers.items() if k != "date"} == {k: v for k, v in b.headers.items() if k != "date"}


async def test_the_classroom_page_is_its_owners_and_the_same_404_for_anyone_else(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, _):
        mine = await classroom_of(db_url, "local")
        theirs = await classroom_of(db_url, "someone-else")
        gone = await classroom_of(db_url, "local", deleted=True)

        page = await client.get(f"/classroom/{mine}")
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"] == CLASSROOM_CSP
        assert (page.headers["x-content-type-options"], page.headers["referrer-policy"]) == ("nosniff", "no-referrer")
        assert '<script type="module" src="/static/classroom/bundle.js">' in page.text

        unknown = await client.get("/classroom/course-AAAAAAAAAAAAAAAA")
        for other in (theirs, gone, "not a classroom", "run-AAAAAAAAAAAAAAAA"):
            same_answer(await client.get(f"/classroom/{other}"), unknown, page=True)
        zh = await client.get("/classroom/course-AAAAAAAAAAAAAAAA", headers={"Accept-Language": "zh-CN,zh;q=0.9"})
        assert zh.status_code == 404 and '<html lang="zh-CN">' in zh.text
        # The classroom the page reads answers the same way.
        assert (await client.get(f"/api/classrooms/{mine}")).status_code == 200
        same_answer(await client.get(f"/api/classrooms/{theirs}"), await client.get("/api/classrooms/course-x"))

        # The frame and the pages' policies.
        frame = await client.get("/scene-frame")
        assert frame.status_code == 200 and frame.headers["content-security-policy"] == SCENE_FRAME_CSP
        assert frame.headers["x-dns-prefetch-control"] == "off"
        for directive in ("default-src 'none'", "connect-src 'none'", "form-action 'none'", "sandbox allow-scripts"):
            assert directive in SCENE_FRAME_CSP
        assert "frame-src 'self'" in CLASSROOM_CSP and "frame-src 'self'" in WORKBENCH_CSP
        assert (await client.get("/")).headers["content-security-policy"] == WORKBENCH_CSP
        # Pages only come from their own routes, with their own policies: never as static files.
        for name in ("classroom.html", "scene_frame.html", "index.html"):
            r = await client.get(f"/static/{name}")
            assert (r.status_code, r.text) == (404, "Not found"), name
        for name in ("classroom.css", "events.js", "sandbox.js", "classroom/main.js", "classroom/engine.js",
                     "classroom/bundle.js"):
            r = await client.get(f"/static/{name}")
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/"), name
        # The player in one file: every module of it, main last.
        bundle = (await client.get("/static/classroom/bundle.js")).text
        assert "const __module_chat = " in bundle and bundle.rstrip().endswith("})();")
        assert bundle.index("const __module_util = ") < bundle.index("const __module_main = ")
        for name in ("classroom/..%2Fapi.js", "classroom/x.css", "classroom/missing.js", "classroom/.main.js"):
            r = await client.get(f"/static/{name}")
            assert (r.status_code, r.text) == (404, "Not found"), name
        paths = (await client.get("/api/openapi.json")).json()["paths"]
        assert {"/classroom/{id}", "/scene-frame"} <= set(paths)

        # A classroom's page stays its owner's when its run finishes.
        with trio.fail_after(30):
            while (await client.get(f"/api/classrooms/{mine}")).json()["classroom"]["generatingRunId"]:
                await trio.sleep(0.1)
        assert (await client.get(f"/classroom/{mine}")).status_code == 200


async def test_in_token_mode_a_navigation_gets_the_page_and_a_token_is_checked(db_url, tmp_path):
    async with running_server(db_url, tmp_path, FAST_CONFIG + "identity: {mode: token}\n") as (client, _):
        async with open_database(db_url, max_size=2) as db:
            alice, bob = await create_token(db, "alice"), await create_token(db, "bob")
        classroom = await classroom_of(db_url, "alice")

        # A browser's navigation carries no token: the page (which holds no data) is sent for any id, and the
        # classroom it then reads with the stored token is checked like every route.
        for some in (classroom, "course-unknown"):
            r = await client.get(f"/classroom/{some}")
            assert r.status_code == 200 and r.headers["content-security-policy"] == CLASSROOM_CSP
        assert (await client.get(f"/api/classrooms/{classroom}")).status_code == 401
        assert (await client.get("/scene-frame")).status_code == 200

        # A request that presents a token is checked: its owner's classroom, the same 404 for another's.
        def bearer(token: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {token}"}

        assert (await client.get(f"/classroom/{classroom}", headers=bearer(alice))).status_code == 200
        same_answer(await client.get(f"/classroom/{classroom}", headers=bearer(bob)),
                    await client.get("/classroom/course-unknown", headers=bearer(bob)), page=True)
        r = await client.get(f"/classroom/{classroom}", headers=bearer("tok_000000000000.nope"))
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")


async def test_behind_an_access_code_the_page_says_nothing_until_the_code_is_given(db_url, tmp_path):
    env = {"ACCESS_CODE": "open-sesame-0123456789", "OWNER_SINGLE_USER": "true", "OWNER_SINGLE_USER_ID": "ada"}
    async with serving(db_url, tmp_path, env=env) as client:
        classroom = await classroom_of(db_url, "ada")
        mine, unknown = await client.get(f"/classroom/{classroom}"), await client.get("/classroom/course-unknown")
        assert mine.status_code == unknown.status_code == 200 and mine.text == unknown.text  # no existence oracle
        assert (await client.get(f"/api/classrooms/{classroom}")).status_code == 401
        r = await client.post("/api/access-code/verify", json={"code": "open-sesame-0123456789"})
        assert r.status_code == 200, r.text
        assert (await client.get(f"/classroom/{classroom}")).status_code == 200
        r = await client.get("/classroom/course-unknown")
        assert r.status_code == 404 and "Classroom not found" in r.text


async def test_the_pages_files_are_compressed_and_revalidated(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, _):
        plain = await client.get("/static/classroom/elements.js", headers={"Accept-Encoding": "identity"})
        assert plain.status_code == 200 and "content-encoding" not in plain.headers
        assert plain.headers["cache-control"] == "no-cache" and plain.headers["vary"] == "Accept-Encoding"
        packed = await client.get("/static/classroom/elements.js", headers={"Accept-Encoding": "gzip, br"})
        assert packed.headers["content-encoding"] == "gzip"
        assert int(packed.headers["content-length"]) < len(plain.content) / 2
        assert packed.content == plain.content  # httpx undoes the gzip
        assert packed.headers["etag"] != plain.headers["etag"]  # two representations, two validators
        again = await client.get("/static/classroom/elements.js",
                                 headers={"Accept-Encoding": "gzip", "If-None-Match": packed.headers["etag"]})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == packed.headers["etag"]
        stale = await client.get("/static/classroom/elements.js", headers={"If-None-Match": '"0123"'})
        assert stale.status_code == 200
        page = await client.get("/", headers={"Accept-Encoding": "gzip"})
        assert page.headers["content-encoding"] == "gzip" and "etag" in page.headers


async def test_the_exports_are_their_owners_and_open(db_url, tmp_path):
    from pptx import Presentation

    async with running_server(db_url, tmp_path) as (client, _):
        mine = await classroom_of(db_url, "local")
        theirs = await classroom_of(db_url, "someone-else")
        with trio.fail_after(30):
            while (await client.get(f"/api/classrooms/{mine}")).json()["classroom"]["generatingRunId"]:
                await trio.sleep(0.1)
        r = await client.get(f"/api/classrooms/{mine}/export.pptx")
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/vnd.openxmlformats-officedocument.presentationml.presentation"
        assert r.headers["content-disposition"].startswith('attachment; filename="')
        prs = Presentation(io.BytesIO(r.content))
        scenes = (await client.get(f"/api/classrooms/{mine}")).json()["classroom"]["scenes"]
        assert len(prs.slides) == len(scenes) >= 1
        r = await client.get(f"/api/classrooms/{mine}/export.html")
        assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
        assert 'id="classroom-data"' in r.text and r.headers["content-security-policy"] == "sandbox allow-scripts"
        for ext in ("pptx", "html"):
            same_answer(await client.get(f"/api/classrooms/{theirs}/export.{ext}"),
                        await client.get(f"/api/classrooms/course-unknown/export.{ext}"))
