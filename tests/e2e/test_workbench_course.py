"""The course document through the workbench, as a teacher meets it in headless Chromium: the outline review edits
every field and keeps the media requests; a confirmation from another device is shown; an agent's reorder and
rename show alike on the run page, the course page, the Pro session and the classroom API; every change is a
version that can be restored (the log only grows); a Chinese browser gets the Chinese interface.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import trio

from tests.e2e.test_workbench_ui import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, in_browser, pytestmark, shot
from tests.e2e.test_workbench_ui import base_url  # noqa: F401 - the fixture
from tests.security import pdfs

try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

__all__ = ["pytestmark"]


def client(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base, trust_env=False, timeout=10)


async def wait_run(c: httpx.AsyncClient, run_id: str, state: str) -> dict[str, Any]:
    with trio.fail_after(40):
        while (run := (await c.get(f"/api/generation-runs/{run_id}")).json()["run"])["state"] != state:
            assert run["state"] != "paused", run
            await trio.sleep(0.2)
    return run


async def start_run(base: str, **extra: Any) -> dict[str, Any]:
    async with client(base) as c:
        r = await c.post("/api/generation-runs", json={"requirement": "The water cycle"} | extra)
        assert r.status_code == 202, r.text
        return r.json()["run"]


async def test_every_outline_field_is_edited_and_the_course_keeps_its_media(base_url):  # noqa: F811
    run = await start_run(base_url, outlineReview="wait")
    async with client(base_url) as c:
        proposed = (await wait_run(c, run["id"], "awaiting_outline_confirmation"))["outline"]["outlines"]
    with_media = [o for o in proposed if o.get("mediaGenerations")]
    assert with_media, "the demo outline asks for pictures or videos"

    def scenario(page: Page) -> None:
        page.goto(f"/#/runs/{run['id']}")
        expect(page.get_by_role("heading", name="Review the outline")).to_be_visible()
        page.locator("#item-0-title").fill("Where the water goes")
        page.locator("#item-0-description").fill("Follow one drop around the world.")
        page.locator("#item-0-points").fill("Evaporation\nCondensation\nRain")
        page.locator("#item-0-add-image").click()
        expect(page.locator("#item-0-media-0-prompt")).to_be_focused()
        page.locator("#item-0-media-0-prompt").fill("A raindrop over the sea, drawn simply")
        page.locator("#item-0-media-0-aspect").select_option("4:3")
        # The second scene becomes a quiz: 2 hard questions, single and multiple choice.
        page.locator("#item-1-type").select_option("quiz")
        page.locator("#item-1-questions").fill("2")
        page.locator("#item-1-difficulty").select_option("hard")
        page.locator("#item-1-qt-multiple").check()
        # The last scene moves up one place; a new scene is added at the end, and the new last one removed again.
        last = page.locator(".outline-edit > li").count() - 1
        page.get_by_role("button", name=f"Move scene {last + 1} up").click()
        page.get_by_role("button", name="Add a scene").click()
        page.locator(f"#item-{last + 1}-title").fill("What we learned")
        page.get_by_role("button", name="Add a scene").click()
        page.get_by_role("button", name=f"Remove scene {last + 3}").click()
        expect(page.locator(".outline-edit > li")).to_have_count(last + 2)
        shot(page, "outline-edited")
        page.get_by_role("button", name="Confirm outline and write the course").click()
        expect(page.locator("main")).to_have_attribute("data-run-state", "completed")
        expect(page.locator(".scene h3").first).to_have_text("1. Where the water goes")

    await in_browser(scenario, base_url)
    async with client(base_url) as c:
        done = await wait_run(c, run["id"], "completed")
        confirmed = done["outline"]["outlines"]
        first, second = confirmed[0], confirmed[1]
        assert (first["title"], first["description"], first["keyPoints"]) == (
            "Where the water goes", "Follow one drop around the world.", ["Evaporation", "Condensation", "Rain"])
        added = first["mediaGenerations"][-1]
        assert (added["type"], added["prompt"], added["aspectRatio"]) == (
            "image", "A raindrop over the sea, drawn simply", "4:3")
        assert second["type"] == "quiz"
        assert second["quizConfig"] == {"questionCount": 2, "difficulty": "hard", "questionTypes": ["single", "multiple"]}
        assert [o["title"] for o in confirmed[-3:-1]] == [proposed[-1]["title"], proposed[-2]["title"]]
        assert confirmed[-1]["title"] == "What we learned"
        # Every media request of the proposed outline is still there, with its element id and prompt.
        kept = {m["elementId"]: m["prompt"] for o in confirmed for m in o.get("mediaGenerations") or []}
        for o in with_media:
            for m in o["mediaGenerations"]:
                assert kept.get(m["elementId"]) == m["prompt"], m
        classroom = (await c.get(f"/api/classrooms/{done['stageId']}")).json()["classroom"]
        for o in with_media:
            for m in o["mediaGenerations"]:
                assert m["elementId"] in classroom["media"]
        assert added["elementId"] in classroom["media"]


async def test_a_confirmation_from_another_device_is_shown_with_the_draft_to_keep_or_drop(base_url):  # noqa: F811
    run = await start_run(base_url, outlineReview="wait")
    async with client(base_url) as c:
        await wait_run(c, run["id"], "awaiting_outline_confirmation")

    def scenario(page: Page) -> None:
        page.goto(f"/#/runs/{run['id']}")
        page.locator("#item-0-title").fill("My unsaved title")
        expect(page.locator(".connection")).to_have_text("Live")
        other = page.context.new_page()  # another tab: its own sessionStorage, as another device's
        other.goto(f"/#/runs/{run['id']}")
        other.get_by_role("button", name="Confirm outline and write the course").click()
        expect(other.locator(".outline-edit")).to_have_count(0)
        other.close()
        alert = page.get_by_role("alert").filter(has_text="confirmed on another device")
        expect(alert).to_be_visible()
        expect(alert).to_contain_text("Your unsaved changes on this page were not used.")
        shot(page, "confirmed-elsewhere")
        alert.get_by_role("button", name="Keep my changes").click()
        expect(alert.locator(".kept-draft")).to_contain_text("My unsaved title")
        page.reload()  # the draft is still kept after a reload of this tab
        expect(page.locator("main")).to_have_attribute("data-run-state", re.compile("generating|completed"))

    await in_browser(scenario, base_url)


async def _session(c: httpx.AsyncClient, course_id: str, prompt: str, session_id: str | None = None) -> str:
    if session_id is None:
        r = await c.post("/api/agent/sessions", json={"prompt": prompt, "stageId": course_id})
        assert r.status_code == 202, r.text
        session_id = r.json()["id"]
    else:
        r = await c.post(f"/api/agent/sessions/{session_id}/messages", json={"text": prompt})
        assert r.status_code == 202, r.text
    await trio.sleep(0.3)
    with trio.fail_after(40):
        while (meta := (await c.get(f"/api/agent/sessions/{session_id}")).json())["status"] in ("queued", "running"):
            await trio.sleep(0.2)
    assert meta["status"] == "succeeded", meta
    return session_id


def headings(page: Page, selector: str) -> list[str]:
    return [re.sub(r"^\d+\. ", "", t) for t in page.locator(selector).all_inner_texts()]


async def test_an_agents_reorder_and_rename_show_alike_everywhere_and_a_restore_brings_the_course_back(base_url):  # noqa: F811
    run = await start_run(base_url, outlineReview="auto")
    async with client(base_url) as c:
        done = await wait_run(c, run["id"], "completed")
        course_id = done["stageId"]
        before = (await c.get(f"/api/classrooms/{course_id}")).json()["classroom"]
        session_id = await _session(c, course_id, "reorder the scenes")
        await _session(c, course_id, "rename the first scene to 'Where water goes'", session_id)
        after = (await c.get(f"/api/classrooms/{course_id}")).json()["classroom"]
        titles = [s["title"] for s in after["scenes"]]
        assert titles[0] == "Where water goes"
        assert [s["id"] for s in after["scenes"]] == [s["id"] for s in reversed(before["scenes"])]
        history = (await c.get(f"/api/classrooms/{course_id}/history")).json()
        mine = [v for v in history["versions"] if v.get("sessionId") == session_id]
        assert [v["change"] for v in mine] == ["scene_changed", "reordered"]
        assert all(v["by"] == "agent" for v in mine)
        assert any(v["by"] == "run" for v in history["versions"])
        paged = (await c.get(f"/api/classrooms/{course_id}/history", params={"limit": 2})).json()
        assert len(paged["versions"]) == 2 and paged["nextBefore"] == paged["versions"][-1]["seq"]

    def scenario(page: Page) -> None:
        # The run page shows the course as it is now, by scene id: the agent's order and titles.
        page.goto(f"/#/runs/{run['id']}")
        expect(page.locator(".scene h3").first).to_have_text("1. Where water goes")
        assert headings(page, ".scene h3") == titles
        shot(page, "run-after-agent")
        page.goto(f"/#/courses/{course_id}")
        expect(page.locator(".scene h3").first).to_have_text("1. Where water goes")
        assert headings(page, ".scene h3") == titles
        page.goto(f"/#/sessions/{session_id}")
        expect(page.locator(".course-panel li").first).to_contain_text("Where water goes")
        assert [x.split(" ")[0] for x in page.locator(".course-panel li > span:first-child").all_inner_texts()] == \
            [t.split(" ")[0] for t in titles]
        log = page.get_by_role("log", name="Conversation with the agent")
        expect(log.locator(".msg.tool").filter(has_text="Reordered the scenes")).to_have_count(1)
        expect(log.locator(".msg.tool").filter(has_text="Changed the scene “Where water goes”")).to_have_count(1)
        expect(log).not_to_contain_text("sc_")  # no ids
        shot(page, "session-words")

        # The course page lists the session and its versions; undoing the session restores the course before it.
        page.goto(f"/#/courses/{course_id}")
        history = page.locator(".versions li")
        expect(history.first).to_contain_text("Changed the scene “Where water goes”")
        expect(history.first).to_contain_text("the agent")
        sessions = page.locator(".session-list li")
        expect(sessions).to_have_count(1)
        shot(page, "course-history")
        sessions.get_by_role("button", name="Undo this session").click()
        expect(history.first).to_contain_text("Restored the version of")
        expect(page.locator(".scene h3").first).to_have_text(f"1. {before['scenes'][0]['title']}")
        shot(page, "course-restored")

    await in_browser(scenario, base_url)
    async with client(base_url) as c:
        restored = (await c.get(f"/api/classrooms/{course_id}")).json()["classroom"]
        assert [(s["id"], s["title"]) for s in restored["scenes"]] == [(s["id"], s["title"]) for s in before["scenes"]]
        history = (await c.get(f"/api/classrooms/{course_id}/history")).json()["versions"]
        assert restored["seq"] == after["seq"] + 1  # appended: nothing rewritten
        assert history[0]["change"] == "restored" and history[0]["by"] == "restore"
        # The version before the session's first edit: the last one at or before the course as the run left it.
        assert history[0]["fromSeq"] == max(v["seq"] for v in history if v["seq"] <= before["seq"])
        # The same command id answers the first restore again; a seq the course never had is refused.
        body = {"seq": 2, "commandId": "restore-once"}
        first = await c.post(f"/api/classrooms/{course_id}/restore", json=body)
        again = await c.post(f"/api/classrooms/{course_id}/restore", json=body)
        assert first.status_code == again.status_code == 200 and first.json()["seq"] == again.json()["seq"]
        bad = await c.post(f"/api/classrooms/{course_id}/restore", json={"seq": 10_000})
        assert bad.status_code == 400 and "seq" in bad.text


async def test_a_chinese_browser_gets_the_chinese_interface_and_can_switch_to_english(base_url):  # noqa: F811
    def run() -> None:
        import asyncio

        asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    context = browser.new_context(base_url=base_url, locale="zh-CN", viewport={"width": 1280, "height": 900})
                    page = context.new_page()
                    page.set_default_timeout(TIMEOUT_MS)
                    page.goto("/")
                    expect(page.get_by_role("heading", name="你的课程")).to_be_visible()
                    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
                    expect(page.get_by_role("link", name="新建课程").first).to_be_visible()
                    page.goto("/#/new")
                    expect(page.get_by_label("这门课要教什么？")).to_be_visible()
                    page.screenshot(path=str(ARTIFACTS / "workbench-zh-new-course.png"))
                    page.get_by_label("语言", exact=True).select_option("en")
                    expect(page.get_by_label("What should the course teach?")).to_be_visible()
                    page.reload()  # the choice is kept
                    expect(page.get_by_label("What should the course teach?")).to_be_visible()
                finally:
                    browser.close()
        finally:
            asyncio.set_event_loop_policy(None)

    await trio.to_thread.run_sync(run)


async def test_the_creation_forms_options_reach_the_run(base_url):  # noqa: F811
    at: list[str] = []

    def scenario(page: Page) -> None:
        page.goto("/#/new")
        page.get_by_label("What should the course teach?").fill("Fractions for beginners")
        # A damaged PDF is refused, saying why, and keeps the course from starting until it is removed.
        page.get_by_label("Materials (optional)").set_input_files(
            files=[{"name": "lesson.pdf", "mimeType": "application/pdf", "buffer": b"not really a pdf"}])
        expect(page.locator(".material-refused")).to_contain_text("could not be read as a PDF")
        page.get_by_role("button", name="Create course").click()
        expect(page.get_by_role("alert")).to_contain_text("Some materials could not be read (lesson.pdf)")
        page.get_by_label("Materials (optional)").set_input_files(files=[])
        page.get_by_label("Course language").select_option("zh-CN")
        page.get_by_label("Interactive scenes").check()
        page.get_by_label("Search the web").uncheck()
        page.get_by_label("These agents (by id)").check()
        page.get_by_label("Agent ids, separated by commas").fill("default-1, default-4")
        page.get_by_label("Write the whole course straight away").check()
        shot(page, "new-course-options")
        page.get_by_role("button", name="Create course").click()
        expect(page.locator("main")).to_have_attribute("data-run-state", re.compile(r"\w"))
        page.wait_for_url(re.compile(r"#/runs/"))
        at.append(page.url.rsplit("/", 1)[-1])

    await in_browser(scenario, base_url, expected_errors=r"status of 400")
    async with client(base_url) as c:
        detail = (await c.get(f"/api/generation-runs/{at[0]}")).json()["run"]
        inp = detail["input"]
        assert (inp["language"], inp["interactive"], inp["enableWebSearch"]) == ("zh-CN", True, False)
        assert inp["agents"]["mode"] == "preset" and inp["agents"]["agentIds"] == ["default-1", "default-4"]


async def test_the_forms_model_choice_and_an_earlier_material_reach_the_run(base_url):  # noqa: F811
    async with client(base_url) as c:
        r = await c.post("/api/materials", files={"file": ("stomata.pdf", pdfs.text_pdf("Stomata open at dawn", pages=2),
                                                           "application/pdf")})
        assert r.status_code == 201, r.text
        material = r.json()
    at: list[str] = []

    def scenario(page: Page) -> None:
        page.goto("/#/new")
        # The earlier upload is listed with what was read from it: pages, characters and the first words.
        row = page.locator(".material").filter(has_text="stomata.pdf")
        expect(row).to_contain_text("2 pages")
        expect(row).to_contain_text(f"{material['characters']} characters read")
        expect(row.locator(".excerpt")).to_contain_text("Stomata open at dawn")
        page.get_by_label("stomata.pdf").check()
        page.get_by_label("What should the course teach?").fill("How leaves breathe")
        outline = page.get_by_label("Outline model")
        expect(outline.locator("option").first).to_have_text("As in your settings (demo:course)")
        expect(outline).to_have_value("")
        assert "demo:lively" in outline.locator("option").all_inner_texts()
        outline.select_option("demo:lively")
        page.get_by_label("Write the whole course straight away").check()
        shot(page, "new-course-models-and-earlier-materials")
        page.get_by_role("button", name="Create course").click()
        page.wait_for_url(re.compile(r"#/runs/"))
        at.append(page.url.rsplit("/", 1)[-1])
        # The run page says which model was chosen (and nothing of the steps left to the settings).
        expect(page.locator(".chosen-models")).to_have_text(
            "Models chosen for this course: Outline model: demo:lively")
        expect(page.locator("main")).to_have_attribute("data-run-state", "completed")
        shot(page, "run-with-a-chosen-model", full_page=False)

    await in_browser(scenario, base_url)
    async with client(base_url) as c:
        detail = await wait_run(c, at[0], "completed")
    assert detail["input"]["models"] == {"course.outline": "demo:lively"}  # every other step as in the settings
    assert detail["input"]["materialIds"] == [material["materialId"]]


async def test_the_library_searches_sorts_draws_first_slides_and_resumes_a_waiting_run(base_url):  # noqa: F811
    waiting = await start_run(base_url, outlineReview="wait")
    ready = await start_run(base_url, outlineReview="auto", requirement="Volcanoes")
    async with client(base_url) as c:
        await wait_run(c, waiting["id"], "awaiting_outline_confirmation")
        await wait_run(c, ready["id"], "completed")

    def scenario(page: Page) -> None:
        page.goto("/")
        cards = page.locator(".card")
        expect(cards).to_have_count(2)
        done = cards.filter(has_text="ready")
        expect(done.locator(".card-picture svg.canvas")).to_be_visible()
        expect(done.locator(".meta")).to_contain_text(re.compile(r"\d+ scenes"))
        expect(done.locator(".card-language")).to_have_text("English")
        page.get_by_label("Search by title").fill("volcano")
        expect(cards).to_have_count(1)
        page.get_by_label("Search by title").fill("nothing like this")
        expect(page.get_by_text("No course matches")).to_be_visible()
        page.get_by_label("Search by title").fill("")
        page.get_by_label("Sort by").select_option("name")
        titles = [t.strip() for t in page.locator(".card-title").all_inner_texts()]
        assert titles == sorted(titles, key=str.lower)
        shot(page, "library-cards", full_page=False)
        pending = cards.filter(has_text="waiting for confirmation")
        expect(pending.get_by_role("button", name=re.compile("^Discard"))).to_be_visible()
        pending.get_by_role("link", name="Resume the review").click()
        expect(page.get_by_role("heading", name="Review the outline")).to_be_visible()

    await in_browser(scenario, base_url)
