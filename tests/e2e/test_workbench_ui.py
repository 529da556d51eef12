"""The web workbench as a teacher meets it: `openmaic serve` (all roles, the offline demo provider) driven by
headless Chromium through Playwright.

The browser runs in a worker thread (Playwright's sync API) while trio keeps the server fixture. Screenshots land
in tests/artifacts/. The tests skip, saying why, when Chromium or Playwright is not installed.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from openmaic.owners.tokens import create_token
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from tests.fakes.provider_server import Json, Status, open_fake_provider
from tests.serving import serve_processes, wait_ready

try:
    from playwright.sync_api import Page, Request, expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]  # fmt: skip

pytestmark = [
    pytest.mark.skipif(sync_playwright is None,
                       reason="the playwright package is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no browser at {CHROMIUM} (apt-get install chromium)"),
]  # fmt: skip

TIMEOUT_MS = 30_000


def config_text(fake_url: str | None = None) -> str:
    """Course writing is quick; the agent's replies stream slowly enough to be seen (and cancelled) mid-turn.
    Every media slot is the demo's; the demo declares a second model, which a run may choose. With ``fake_url``, quizzes come from the scriptable fake provider there (to make a step fail)."""
    providers = ["  demo: {preset: demo, models: [course, lively], options: {latencyMs: 10}}",
                 "  slow: {preset: demo, options: {latencyMs: 120}}"]
    slots = 'llm: "demo:course", agent: "slow:agent", image: demo, video: demo, tts: demo, webSearch: demo'
    if fake_url is not None:
        providers.append(
            f"  fake: {{preset: openai-compatible, baseUrl: '{fake_url}', apiKey: sk-e2e, "
            "options: {maxRetries: 0, timeoutS: 5}}"
        )
        slots += ', course.content.quiz: "fake:gpt-test"'
    return (
        "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1, step_retries: 1}\n"
        "providers:\n" + "\n".join(providers) + f"\nslots: {{{slots}}}\n"
    )


@asynccontextmanager
async def running_server(db_url: str, tmp_path: Path, config: str) -> AsyncIterator[str]:
    """`openmaic serve` (all roles) on a free port with ``config``; yields its base URL once it is ready."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with serve_processes(db_url, tmp_path, [(None, port)], config) as procs:
        async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as client:
            await wait_ready(client, procs, tmp_path)
        yield base


@pytest.fixture
async def base_url(db_url, tmp_path):
    async with running_server(db_url, tmp_path, config_text()) as base:
        yield base


async def in_browser(scenario: Callable[[Page], None], base: str, *, expected_errors: str | None = None) -> None:
    """Run ``scenario(page)`` in headless Chromium, in a worker thread; fail on any error the page reports (except
    console errors matching the ``expected_errors`` pattern, such as the browser's own note on a 401)."""

    def run() -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        # Playwright runs a plain asyncio loop of its own. trio-asyncio (the database layer's bridge) makes new
        # loops trio-asyncio loops; a policy set in this thread (outside trio) gives this thread plain ones.
        asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
        try:
            browse()
        finally:
            asyncio.set_event_loop_policy(None)

    def browse() -> None:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.set_default_timeout(TIMEOUT_MS)
                expect.set_options(timeout=TIMEOUT_MS)
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                try:
                    scenario(page)
                except AssertionError as exc:
                    exc.add_note(f"errors the page reported: {errors}")
                    raise
                unexpected = [e for e in errors if not (expected_errors and re.search(expected_errors, e))]
                assert not unexpected, unexpected
            finally:
                browser.close()

    await trio.to_thread.run_sync(run)


def shot(page: Page, name: str, *, full_page: bool = True) -> None:
    page.screenshot(path=str(ARTIFACTS / f"workbench-{name}.png"), full_page=full_page)


def main_text(page: Page) -> str:
    return page.locator("main").inner_text()


async def test_a_teacher_reviews_an_outline_confirms_it_and_gets_a_course(base_url):
    def scenario(page: Page) -> None:
        page.goto("/")
        expect(page.get_by_role("heading", name="Your courses")).to_be_visible()
        expect(page.get_by_text("No courses yet.")).to_be_visible()
        page.get_by_role("link", name="New course").first.click()

        expect(page.get_by_role("heading", name="New course")).to_be_focused()
        page.get_by_label("What should the course teach?").fill("Photosynthesis for 12-year-olds")
        expect(page.get_by_label("Let me review the outline first")).to_be_checked()
        notes = b"Plants make glucose from light, water and carbon dioxide. Chlorophyll makes leaves green.\n"
        page.get_by_label("Materials (optional)").set_input_files(
            files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": notes}]
        )
        # The material is read at once: how much, and its first words.
        expect(page.locator(".material")).to_contain_text("characters read")
        expect(page.locator(".material .excerpt")).to_contain_text("Plants make glucose")
        shot(page, "new-course")
        page.get_by_role("button", name="Create course").click()

        # The outline streams in item by item, then waits for the teacher.
        expect(page.locator("main")).to_have_attribute("data-run-state", "awaiting_outline_confirmation")
        expect(page.locator(".badge").first).to_have_text("waiting for confirmation")
        titles = page.get_by_label("Title", exact=True)
        assert titles.count() >= 4
        first = titles.first
        original = first.input_value()
        first.fill("What plants eat")
        page.get_by_label("Description", exact=True).first.fill("See that plants make food from light, water and air.")
        shot(page, "outline-review")

        # A reload shows the same run (a pure fold of its events) and keeps the unconfirmed edit.
        expect(page.locator(".connection")).to_have_text("Live")
        before = main_text(page)
        page.reload()
        expect(page.locator("main")).to_have_attribute("data-run-state", "awaiting_outline_confirmation")
        expect(page.get_by_label("Title", exact=True).first).to_have_value("What plants eat")
        # The page says "Connecting…" until its socket is open again; the text is compared once it is live.
        expect(page.locator(".connection")).to_have_text("Live")
        assert main_text(page) == before
        assert original != "What plants eat"

        # Keyboard only: tab to the Confirm button and press Enter.
        page.get_by_role("button", name="Add a scene").focus()
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Confirm outline and write the course")).to_be_focused()
        page.keyboard.press("Enter")
        page.evaluate(WATCH_SCENE_LIST)

        expect(page.get_by_role("heading", name="Scenes", exact=True)).to_be_visible()
        expect(page.locator(".badge").first).to_have_text(re.compile(r"^(generating \d+/\d+|ready)$"))
        expect(page.locator(".scene").first).to_contain_text("What plants eat")
        n = page.locator(".scene").count()
        # As scenes are written the list is updated in place: it never goes empty once it has shown a scene.
        assert page.evaluate("window.sceneListEmptied") is False
        if page.locator("main").get_attribute("data-run-state") == "generating":
            shot(page, "run-generating")
            page.reload()  # mid-run: the view replays the events and follows on live
            page.evaluate(WATCH_SCENE_LIST)
        expect(page.locator("main")).to_have_attribute("data-run-state", "completed")
        expect(page.locator(".badge").first).to_have_text("ready")
        assert page.evaluate("window.sceneListEmptied") is False
        expect(page.locator(".scene")).to_have_count(n)
        expect(page.locator(".scene-status.ready")).to_have_count(n)
        expect(page.get_by_text(f"{n} of {n} scenes written")).to_be_visible()
        shot(page, "run-completed")
        expect(page.get_by_role("link", name="Enter the classroom")).to_have_attribute(
            "href", re.compile(r"^/classroom/[^/]+$"))

        # The course view: slides drawn from their canvas, quizzes with options and the right answer.
        page.get_by_role("link", name="Open the course").click()
        expect(page.get_by_role("heading", name="Scenes", exact=True)).to_be_visible()
        expect(page.get_by_role("heading", name="1. What plants eat")).to_be_visible()
        expect(page.locator(".slide svg.canvas").first).to_be_visible()
        assert page.locator(".slide .canvas-text p").count() >= 3
        expect(page.locator(".quiz .options li.correct").first).to_contain_text("correct answer")
        shot(page, "course")

        # The library shows the card as ready; deleting it (after confirming) removes it.
        page.get_by_role("link", name="Library", exact=True).click()
        card = page.locator(".card")
        expect(card).to_have_count(1)
        expect(card.locator(".badge")).to_have_text("ready")
        # Learners enter the classroom page (result.url) from the card.
        card.get_by_role("link", name=re.compile("^Enter the classroom")).click()
        expect(page).to_have_url(re.compile(r"/classroom/[^/#]+(#scene-\d+)?$"))  # the page names its scene
        scenes = page.get_by_role("navigation", name="Scenes")
        expect(scenes.get_by_role("button", name=re.compile("What plants eat"))).to_be_visible()
        page.go_back()
        expect(card).to_have_count(1)
        shot(page, "library", full_page=False)
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "library-phone", full_page=False)
        page.once("dialog", lambda d: d.accept())
        card.get_by_role("button", name=re.compile("^Delete")).click()
        expect(page.locator(".card")).to_have_count(0)
        expect(page.get_by_text("No courses yet.")).to_be_visible()

    await in_browser(scenario, base_url)


WATCH_SCENE_LIST = """() => {
  window.sceneListEmptied = false;
  let seen = false;
  new MutationObserver(() => {
    const n = document.querySelectorAll(".scene").length;
    if (n > 0) seen = true;
    else if (seen) window.sceneListEmptied = true;
  }).observe(document.body, { childList: true, subtree: true });
}"""


async def _ready_course(base: str, headers: dict[str, str] | None = None) -> str:
    async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10, headers=headers) as client:
        r = await client.post("/api/generation-runs", json={"requirement": "The water cycle", "outlineReview": "auto"})
        assert r.status_code == 202, r.text
        run_id = r.json()["run"]["id"]
        with trio.fail_after(30):
            while (run := (await client.get(f"/api/generation-runs/{run_id}")).json()["run"])["state"] != "completed":
                assert run["state"] != "paused", run
                await trio.sleep(0.2)
        return run["stageId"]


async def test_a_pro_session_with_a_follow_up_and_a_cancel(base_url):
    course_id = await _ready_course(base_url)

    def scenario(page: Page) -> None:
        page.goto(f"/#/courses/{course_id}")
        expect(page.get_by_role("heading", name="Change it with the agent")).to_be_visible()
        page.get_by_label("What should change?").fill("Describe this course for me")
        page.get_by_role("button", name="Start").click()

        log = page.get_by_role("log", name="Conversation with the agent")
        expect(log.locator(".msg.user").first).to_contain_text("Describe this course for me")
        # Tool calls show as they happen; the reply streams in, then stays.
        expect(log.locator(".msg.tool").first).to_contain_text(re.compile("Read(ing)? the course"))
        # A follow-up while the agent works (Enter sends).
        composer = page.get_by_label("Message to the agent")
        composer.fill("add a scene about chlorophyll")
        composer.press("Enter")
        expect(log.locator(".msg.user")).to_have_count(2)
        expect(log.locator(".msg.assistant").filter(has_text="has ")).to_have_count(1)
        # Said as what it did, without ids or JSON.
        expect(log.locator(".msg.tool").filter(has_text="Added the scene “Chlorophyll”")).to_have_count(1)
        expect(log.locator(".msg.assistant").filter(has_text="Chlorophyll")).to_have_count(1)
        expect(page.locator(".course-panel")).to_contain_text("Chlorophyll")
        expect(page.locator("main")).to_have_attribute("data-session-status", "succeeded")
        shot(page, "session")

        # Another request, cancelled while the agent answers it.
        composer.fill("describe the course again")
        composer.press("Enter")
        expect(log.locator(".msg.user")).to_have_count(3)
        draft = page.locator(".msg.draft")
        expect(draft).to_contain_text("The course")  # the reply streams in, not yet part of the conversation
        page.get_by_role("button", name="Cancel").click()
        expect(page.locator("main")).to_have_attribute("data-session-status", "cancelled")
        expect(log.get_by_text("Stopped because you cancelled.")).to_be_visible()
        expect(draft).to_be_hidden()  # the uncommitted text is dropped (model.output_reset)
        expect(log.locator(".msg.assistant").filter(has_text="has ")).to_have_count(1)
        expect(page.get_by_role("button", name="Cancel")).to_be_disabled()
        shot(page, "session-cancelled")

        # A reload replays the session's events into the same conversation.
        before = log.inner_text()
        page.reload()
        expect(page.locator("main")).to_have_attribute("data-session-status", "cancelled")
        expect(page.locator(".connection")).to_have_text("Live")
        assert log.inner_text() == before
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "session-phone")

    await in_browser(scenario, base_url)


QUIZ = {"title": "Check your understanding", "questions": [
    {"question": "What do plants make in photosynthesis?", "options": ["Glucose", "Salt", "Iron", "Sand"],
     "answer": 0, "explanation": "Glucose stores the energy."},
]}  # fmt: skip


async def test_a_paused_run_shows_its_error_and_retry_finishes_it(db_url, tmp_path):
    async with open_fake_provider() as fake:
        # The quiz fails on its first try and its one automatic retry; the teacher's Retry then gets a quiz.
        fake.push(Status(500), Status(500), Json(QUIZ))
        async with running_server(db_url, tmp_path, config_text(fake.openai_url)) as base:

            def scenario(page: Page) -> None:
                page.goto("/#/new")
                page.get_by_label("What should the course teach?").fill("Photosynthesis for 12-year-olds")
                page.get_by_label("Write the whole course straight away").check()
                page.get_by_role("button", name="Create course").click()

                expect(page.locator("main")).to_have_attribute("data-run-state", "paused")
                alert = page.get_by_role("alert")
                expect(alert).to_contain_text("Writing paused after a failure.")
                expect(alert).to_contain_text("HTTP 500")
                expect(alert).to_contain_text(re.compile(r"Failed step: scene \d+ content"))
                shot(page, "run-paused")

                # The library says so too, and leads back to the run.
                page.get_by_role("link", name="Library", exact=True).click()
                card = page.locator(".card")
                expect(card.locator(".badge")).to_have_text("paused after a failure")
                card.get_by_role("link", name=re.compile("^Open")).click()

                page.get_by_role("button", name="Retry").click()
                expect(page.locator("main")).to_have_attribute("data-run-state", "completed")
                expect(page.get_by_role("alert")).to_have_count(0)
                expect(page.get_by_text("What do plants make in photosynthesis?")).to_be_visible()
                expect(page.locator(".options li.correct")).to_contain_text("Glucose")

            await in_browser(scenario, base)
    assert fake.pending == 0


async def test_with_access_tokens_a_teacher_signs_in_and_everything_goes_over_the_token(db_url, tmp_path):
    async with running_server(db_url, tmp_path, config_text() + "identity: {mode: token}\n") as base:
        async with open_database(db_url) as db:
            token = await create_token(db, "alice")
        course_id = await _ready_course(base, {"Authorization": f"Bearer {token}"})

        def scenario(page: Page) -> None:
            page.goto("/")
            expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
            expect(page.get_by_label("Access token")).to_be_focused()
            page.get_by_label("Access token").fill("tok_000000000000.not-a-real-secret")
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_text("That token is unknown or has been revoked.")).to_be_visible()
            shot(page, "sign-in-refused")

            page.get_by_label("Access token").fill(token)
            page.get_by_role("button", name="Sign in").click()
            # The library's live feed is a WebSocket: the token rides as its subprotocol.
            expect(page.get_by_role("heading", name="Your courses")).to_be_visible()
            expect(page.locator(".connection")).to_have_text("Live")
            card = page.locator(".card").filter(has_text="ready")
            expect(card).to_have_count(1)
            page.goto(f"/#/courses/{course_id}")
            expect(page.get_by_role("heading", name="Change it with the agent")).to_be_visible()
            # A reload keeps the sign-in (the token is stored in this browser).
            page.reload()
            expect(page.get_by_role("heading", name="Change it with the agent")).to_be_visible()

            page.get_by_role("button", name="Sign out").click()
            expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
            expect(page.get_by_role("button", name="Sign out")).to_be_hidden()

        await in_browser(scenario, base, expected_errors=r"status of 401")
