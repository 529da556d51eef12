"""The classroom page and the interactive-scene frame over HTTP, against a real `openmaic serve`: who gets the page,
who gets the same plain 404, and the policies each document is sent with. (The page itself, in a browser, is in
tests/e2e/test_classroom_ui.py.)"""

from __future__ import annotations

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


def same_answer(a: httpx.Response, b: httpx.Response) -> None:
    assert (a.status_code, a.text) == (b.status_code, b.text) == (404, "Not found")
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
        assert '<script type="module" src="/static/classroom.js">' in page.text

        unknown = await client.get("/classroom/course-AAAAAAAAAAAAAAAA")
        for other in (theirs, gone, "not a classroom", "run-AAAAAAAAAAAAAAAA"):
            same_answer(await client.get(f"/classroom/{other}"), unknown)
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
        for name in ("classroom.js", "classroom.css", "classroom_media.js", "events.js", "sandbox.js"):
            r = await client.get(f"/static/{name}")
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/"), name
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
                    await client.get("/classroom/course-unknown", headers=bearer(bob)))
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
        assert (r.status_code, r.text) == (404, "Not found")
