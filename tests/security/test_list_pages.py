"""The browser persistence lists (``/api/stages``, ``/api/folders``, a runtime session's records, a learner's
runtime sessions) come in pages on request, against a real `openmaic serve`: OpenMAIC's own requests (no
``limit``) still get every item, a client that asks for pages sees each item exactly once, and a cursor this
server did not write is a 400 naming ``cursor``."""

from __future__ import annotations

import httpx

from openmaic.courses import format as fmt
from tests.integration.test_persistence_http import ALICE_KEY, BOUND, BROWSER, CONFIG, RUNTIME, SESSION
from tests.serving import running_server

N = 5


def document(doc_id: str, name: str) -> dict:
    """A course as OpenMAIC's document store holds it (valid to the format): one slide with its script."""
    (text,), _ = fmt.normalize_elements([{"id": "t1", "type": "text", "left": 60, "top": 60, "width": 600,
                                         "height": 80, "rotate": 0, "content": "<p>A part of a whole</p>"}])
    canvas = fmt.Slide(id=f"{doc_id}-canvas", viewportSize=fmt.VIEWPORT_SIZE, viewportRatio=fmt.VIEWPORT_RATIO,
                       theme=fmt.DEFAULT_THEME, elements=[text])
    scene = fmt.Scene(id=f"{doc_id}-s1", stageId=doc_id, type="slide", title="What is a fraction", order=1,
                      content=fmt.SlideContent(canvas=canvas),
                      actions=[fmt.SpeechAction(id="a1", text="Today: fractions.")])
    stage = fmt.Stage(id=doc_id, name=name, createdAt=1700000000000, updatedAt=1700000000000)
    doc = fmt.to_json(fmt.Document(stage=stage, scenes=[scene]))
    assert fmt.validate_document(doc, stage_id=doc_id) == []
    return doc


async def _pages(c: httpx.AsyncClient, path: str, key: str | None) -> list[str]:
    """Every id, following the cursors ``limit=2`` at a time: ``nextCursor`` of ``key``'s object, or the
    ``X-Next-Cursor`` of a bare array."""
    seen, params = [], {"limit": 2}
    while True:
        r = await c.get(path, params=params, headers=BOUND)
        assert r.status_code == 200, r.text
        items = r.json()[key] if key else r.json()
        assert 1 <= len(items) <= 2, r.text
        seen += [i["id"] for i in items]
        nxt = r.json()["nextCursor"] if key else r.headers.get("x-next-cursor")
        if nxt is None:
            assert key or "link" not in r.headers
            return seen
        if not key:
            assert 'rel="next"' in r.headers["link"] and "cursor=" in r.headers["link"]
        params = {"limit": 2, "cursor": nxt}


async def test_persistence_lists_page_through_every_item_once(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG + "identity: {single_user_owner: alice}\n") as (c, _):
        r = await c.post("/api/identity/legacy-import-binding", json={"browserId": BROWSER})
        assert r.status_code == 200, r.text
        for i in range(N):
            r = await c.put(f"/api/persistence/documents/stage-{i}", json=document(f"stage-{i}", f"Course {i}"),
                            headers=BOUND)
            assert r.status_code == 204, r.text
            assert (await c.post("/api/folders", json={"name": f"Folder {i}"}, headers=BOUND)).status_code == 201
            session = {**SESSION, "id": f"chat-{i}", "stageId": "stage-0"}
            assert (await c.post(f"{RUNTIME}/sessions", json=session, headers=BOUND)).status_code == 201
            record = {"id": f"r-{i}", "sessionId": "chat-0", "createdAt": SESSION["createdAt"], "payload": {"role": "user", "content": f"message {i}"}}
            r = await c.post(f"{RUNTIME}/sessions/chat-0/records", json=record, headers=BOUND)
            assert r.status_code == 201, r.text

        lists = {"/api/stages": "stages", "/api/folders": "folders", f"{RUNTIME}/sessions/chat-0/records": None,
                 f"{RUNTIME}/stages/stage-0/learners/{ALICE_KEY}/sessions": None}
        for path, key in lists.items():
            whole = await c.get(path, headers=BOUND)  # as OpenMAIC's client asks: every item, no cursor
            assert whole.status_code == 200 and "x-next-cursor" not in whole.headers, whole.text
            items = whole.json()[key] if key else whole.json()
            assert len(items) == N and (not key or whole.json()["nextCursor"] is None), (path, whole.text)
            seen = await _pages(c, path, key)
            assert seen == [i["id"] for i in items], (path, seen)  # every one, once, in the list's order
            for bad in ("not-ours", "W10", "WyJ4Il0", "WyJ4IiwieSJd"):
                r = await c.get(path, params={"limit": 2, "cursor": bad}, headers=BOUND)
                assert r.status_code == 400 and "cursor" in r.text, (path, bad, r.text)
            r = await c.get(path, params={"limit": 5000}, headers=BOUND)
            assert r.status_code == 400 and "limit" in r.text, (path, r.text)
