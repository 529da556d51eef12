"""The classroom as a learner comes back to it, in headless Chromium over a real `openmaic serve` (token mode: the
learner is whoever the stored token names; the classroom's `classroom` model slot is the scriptable fake
provider): questions and discussions answered by the course's agents, streamed and kept per learner; a short
answer graded by the model with its comment; the place and the answers kept as learner runtime records, so a
reload and a second browser of the same learner resume there, and another learner starts afresh.

The classroom's document is a fixture course answered in place of ``GET /api/classrooms/{id}`` (as in
test_classroom_player.py); everything else, the runtime records and the model routes included, is the server's.
Screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio

from openmaic.owners.tokens import create_token
from openmaic.store.database import open_database
from tests.e2e.classroom_fixtures import classroom_answer, course
from tests.e2e.test_classroom_player import serve_fixture
from tests.e2e.test_workbench_ui import ARTIFACTS, Page, expect, in_browser, pytestmark, running_server  # noqa: F401
from tests.fakes.provider_server import Json, Text, open_fake_provider

CLASSROOM = "course-learner000000001"
PAGE_ERRORS: list[str] = []  # what the pages of open_as reported (each test checks it stayed empty)


def config(fake_url: str) -> str:
    return (
        "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1}\n"
        "identity: {mode: token}\n"
        "providers:\n  demo: {preset: demo, options: {latencyMs: 10}}\n"
        f"  fake: {{preset: openai-compatible, baseUrl: '{fake_url}', apiKey: sk-e2e, "
        "options: {maxRetries: 0, timeoutS: 10}}\n"
        'slots: {llm: "demo:course", classroom: "fake:gpt-classroom"}\n'
    )


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"learner-{name}.png"), full_page=True)


def open_as(page: Page, token: str, base: str) -> Page:
    """A new browser (its own context: no cookies or storage shared) signed in with ``token``, on the classroom."""
    context = page.context.browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    # The script runs in every frame, the sandboxed interactive scene's too, which has no storage to write.
    context.add_init_script(f"try {{ localStorage.setItem('openmaic.token', {json.dumps(token)}) }} catch {{}}")
    other = context.new_page()
    other.on("pageerror", lambda e: PAGE_ERRORS.append(str(e)))
    serve_fixture(other, CLASSROOM, classroom_answer(CLASSROOM, course("generated_every_element")), grading=True)
    other.goto(f"/classroom/{CLASSROOM}")
    expect(other.locator("main")).to_have_attribute("aria-busy", "false")
    return other


def answer_quiz(page: Page) -> Any:
    """Answer the fixture course's quiz (two choice questions and the short answer) and submit it; the quiz form."""
    quiz = page.locator("form.quiz")
    quiz.locator('[data-question-id="q1"]').get_by_label("Water").check()
    quiz.locator('[data-question-id="q2"]').get_by_label("Light").check()
    quiz.locator('[data-question-id="q2"]').get_by_label("CO2").check()
    quiz.get_by_label("Your answer").fill("So the leaves catch more light.")
    quiz.get_by_role("button", name="Submit answers").click()
    return quiz


async def tokens(db_url: str) -> tuple[str, str]:
    async with open_database(db_url) as db:
        return await create_token(db, "alice"), await create_token(db, "bob")


async def test_a_question_streams_the_agents_answer_which_stays_with_its_learner(db_url, tmp_path):
    async with open_fake_provider() as fake, running_server(db_url, tmp_path, config(fake.openai_url)) as base:
        alice, bob = await tokens(db_url)
        gate = trio.Event()
        said = "Chlorophyll reflects green light, so the leaves look green to us."
        first_piece = said[: -(-len(said) // 3)]  # the fake's first of three pieces
        fake.push(Text(said, chunks=3, gate=gate),
                  Text("Because chlorophyll takes in red and blue light and gives back the green.", chunks=2),
                  Text("So a plant under green light alone would go hungry?", chunks=2))

        PAGE_ERRORS.clear()

        def scenario(page: Page) -> None:
            page.close()
            first = open_as(page, alice, base)
            # A question at any point: Q opens the chat (the scene pauses) with the question box focused.
            first.get_by_role("button", name="Play", exact=True).click()
            expect(first.locator(".stage-column")).to_have_attribute("data-mode", "playing")
            first.keyboard.press("q")
            chat = first.get_by_role("complementary", name="Talk with the class")
            expect(chat).to_be_visible()
            expect(first.locator(".stage-column")).to_have_attribute("data-mode", "paused")
            expect(chat.get_by_label("Your question")).to_be_focused()
            chat.get_by_label("Your question").fill("Why are leaves green?")
            chat.get_by_label("Your question").press("Enter")
            # The answer arrives piece by piece: the first piece shows while the model holds the rest back.
            reply = chat.locator('.chat-message[data-role="assistant"]')
            expect(reply).to_have_attribute("data-state", "streaming")
            expect(reply.locator(".chat-text")).to_have_text(first_piece)
            expect(reply.locator(".chat-name")).to_have_text("AI teacher")
            shot(first, "chat-streaming")
            trio.from_thread.run_sync(gate.set)
            expect(reply).to_have_attribute("data-state", "done")
            expect(reply.locator(".chat-text")).to_have_text(said)
            shot(first, "chat-answered")

            # A reload shows the conversation again.
            first.reload()
            first.get_by_role("button", name="Ask a question").click()
            messages = first.locator(".chat-message")
            expect(messages).to_have_count(2)
            expect(messages.nth(0)).to_contain_text("Why are leaves green?")
            expect(messages.nth(1)).to_contain_text("so the leaves look green to us.")

            # A discussion of the course opens the chat on its topic; the agent who opened it answers.
            first.get_by_role("navigation", name="Scenes").get_by_role("button").nth(1).click()
            first.locator(".timeline li").nth(14).get_by_role("button").click()
            first.get_by_role("button", name="Play", exact=True).click()
            card = first.get_by_role("dialog", name="Discussion")
            expect(card).to_contain_text("Why are leaves green?")
            card.get_by_role("button", name="Join").click()
            expect(first.locator(".chat-topic")).to_have_text("Discussion: Why are leaves green?")
            answer = first.locator('.chat-message[data-role="assistant"]').nth(1)
            expect(answer).to_have_attribute("data-state", "done")
            expect(answer.locator(".chat-name")).to_have_text("好奇宝宝")
            expect(answer).to_contain_text("gives back the green")
            # Then another agent of the course follows up in the same discussion.
            follow_up = first.locator('.chat-message[data-role="assistant"]').nth(2)
            expect(follow_up).to_have_attribute("data-state", "done")
            expect(follow_up).to_contain_text("would go hungry?")
            expect(follow_up.locator(".chat-name")).not_to_have_text("好奇宝宝")
            shot(first, "chat-discussion")

            # The same learner on another device sees the same conversation; another learner sees none of it.
            second = open_as(page, alice, base)
            second.keyboard.press("q")
            expect(second.locator(".chat-message")).to_have_count(5)
            shot(second, "chat-second-device")
            other = open_as(page, bob, base)
            other.keyboard.press("q")
            expect(other.locator(".chat-panel")).to_have_attribute("data-loaded", "true")
            expect(other.locator(".chat-message")).to_have_count(0)
            expect(other.get_by_text("Ask anything about this scene; the teacher answers.")).to_be_visible()

        await in_browser(scenario, base, expected_errors=r"status of 404")
        assert not PAGE_ERRORS
        # Each question was grounded in the scene on stage: its title, the text of its elements, its speech.
        asked = fake.requests[0].body["messages"][-1]["content"]
        for line in ("What plants need", "> Plants need three things.", "> Why are leaves green?"):
            assert line in asked, (line, asked)
        discussed = fake.requests[1].body["messages"]
        assert "好奇宝宝" in discussed[0]["content"] and "> Why are leaves green?" in discussed[-1]["content"]
        assert "Charts, code and video" in discussed[-1]["content"]
        assert [m["role"] for m in discussed] == ["system", "user", "assistant", "user"]
        followed = fake.requests[2].body["messages"]
        assert "好奇宝宝 has answered" in followed[-1]["content"]
        assert followed[0]["content"].startswith("You are AI teacher")  # the roster's other agent follows up
        assert fake.pending == 0 and not fake.errors


async def test_a_question_left_without_its_reply_is_answered_when_the_conversation_is_shown(db_url, tmp_path):
    async with open_fake_provider() as fake, running_server(db_url, tmp_path, config(fake.openai_url)) as base:
        alice, _ = await tokens(db_url)
        # The state a server killed mid-reply leaves: the learner's question kept, no reply after it.
        auth = {"Authorization": f"Bearer {alice}"}
        async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10, headers=auth) as client:
            key = (await client.get("/api/persistence/learner-key")).json()["learnerKey"]
            sid, now = f"classroom-chat:{CLASSROOM}", "2026-12-02T10:00:00.000Z"
            r = await client.post("/api/persistence/runtime/sessions", json={
                "id": sid, "kind": "chat", "stageId": CLASSROOM, "learnerKey": key, "status": "active",
                "createdAt": now, "updatedAt": now})
            assert r.status_code == 201, r.text
            r = await client.post(f"/api/persistence/runtime/sessions/{sid}/records", json={
                "id": "msg-left", "sessionId": sid, "createdAt": now,
                "payload": {"role": "user", "content": "Do roots drink?"}})
            assert r.status_code == 201, r.text
        fake.push(Text("Yes: roots take in water and minerals from the soil.", chunks=2))
        PAGE_ERRORS.clear()

        def scenario(page: Page) -> None:
            page.close()
            first = open_as(page, alice, base)
            first.keyboard.press("q")
            messages = first.locator(".chat-message")
            expect(messages).to_have_count(2)
            expect(messages.nth(0)).to_contain_text("Do roots drink?")
            expect(messages.nth(1)).to_have_attribute("data-state", "done")
            expect(messages.nth(1)).to_contain_text("roots take in water")
            shot(first, "chat-recovered")
            # Shown again (a reload, another device): the reply is there, and nobody answers it a second time.
            second = open_as(page, alice, base)
            second.keyboard.press("q")
            expect(second.locator(".chat-panel")).to_have_attribute("data-loaded", "true")
            expect(second.locator(".chat-message")).to_have_count(2)

        await in_browser(scenario, base, expected_errors=r"status of 404")
        assert not PAGE_ERRORS
        assert len(fake.requests) == 1 and fake.pending == 0 and not fake.errors
        assert "> Do roots drink?" in fake.requests[0].body["messages"][-1]["content"]


async def test_a_learners_answers_and_place_are_kept_for_a_reload_and_another_device(db_url, tmp_path):
    async with open_fake_provider() as fake, running_server(db_url, tmp_path, config(fake.openai_url)) as base:
        alice, bob = await tokens(db_url)
        fake.push(Json({"score": 4, "comment": "Right: facing the sun catches more light."}))

        PAGE_ERRORS.clear()

        def scenario(page: Page) -> None:
            page.close()
            first = open_as(page, alice, base)
            nav = first.get_by_role("navigation", name="Scenes")
            nav.get_by_role("button").nth(2).click()
            quiz = answer_quiz(first)
            # The short answer is graded by the model, with its comment beside the explanation.
            q3 = quiz.locator('[data-question-id="q3"]')
            expect(q3).to_have_attribute("data-result", "correct")  # 4 of 5: at least 80 %
            expect(q3.locator(".grader-comment")).to_have_text("Comment: Right: facing the sun catches more light.")
            expect(quiz.locator(".quiz-score")).to_have_text("Score: 29 of 30")
            shot(first, "quiz-graded")

            # Then on to the second scene, to its fourth action: that place is kept.
            nav.get_by_role("button").nth(1).click()
            first.locator(".timeline li").nth(3).get_by_role("button").click()
            expect(first.locator("main")).to_have_attribute("data-kept", "2:3")

            first.reload()
            expect(first.locator("main")).to_have_attribute("data-scene", "2")
            expect(first.locator(".stage-column")).to_have_attribute("data-action", "3")
            expect(first.locator(".whiteboard")).to_be_visible()  # the actions before it replayed (wb_open)
            shot(first, "resumed")

            # Another device of the same learner resumes there too, with the answers and their grades shown.
            second = open_as(page, alice, base)
            expect(second.locator("main")).to_have_attribute("data-scene", "2")
            expect(second.locator(".stage-column")).to_have_attribute("data-action", "3")
            second.get_by_role("navigation", name="Scenes").get_by_role("button").nth(2).click()
            kept = second.locator("form.quiz")
            expect(kept).to_have_attribute("data-state", "graded")
            expect(kept.get_by_label("Your answer")).to_have_value("So the leaves catch more light.")
            expect(kept.locator('[data-question-id="q1"]').get_by_label("Water")).to_be_checked()
            expect(kept.locator(".grader-comment")).to_contain_text("facing the sun")
            expect(kept.locator(".quiz-score")).to_have_text("Score: 29 of 30")
            shot(second, "quiz-second-device")
            # The completion page counts the kept answers, per quiz and for the course.
            second.get_by_role("navigation", name="Scenes").get_by_role("button").nth(3).click()
            second.keyboard.press("ArrowRight")
            expect(second.locator(".course-score")).to_have_text("Your quiz score: 29 of 30 points")
            expect(second.locator('.scene-scores tr[data-scene-id="scn_gen_3"]')).to_contain_text("29 of 30")
            expect(second.locator("main")).to_have_attribute("data-kept", "complete")
            shot(second, "complete-kept")
            second.reload()
            expect(second.locator(".course-score")).to_have_text("Your quiz score: 29 of 30 points")

            # Another learner starts at the beginning, with nothing answered.
            other = open_as(page, bob, base)
            expect(other.locator("main")).to_have_attribute("data-scene", "1")
            other.get_by_role("navigation", name="Scenes").get_by_role("button").nth(2).click()
            expect(other.locator("form.quiz")).not_to_have_attribute("data-state", "graded")
            expect(other.get_by_label("Your answer")).to_have_value("")

        await in_browser(scenario, base, expected_errors=r"status of 404")
        assert not PAGE_ERRORS
        graded = fake.requests[0].body["messages"][-1]["content"]
        assert "> So the leaves catch more light." in graded and "Mentions light." in graded
        assert fake.pending == 0 and not fake.errors


async def test_a_short_answer_is_marked_as_openmaics_quiz_view_marks_it(db_url, tmp_path):
    # OpenMAIC's quiz view (components/scene-renderers/quiz-view.tsx, gradeShortAnswerQuestion): a short answer is
    # correct at 80 % of its points or more and incorrect below, zero included; the points earned are shown with
    # the grader's comment either way.
    marks = [(5, "correct", "Correct"), (4, "correct", "Correct"), (2, "incorrect", "Incorrect"),
             (0, "incorrect", "Incorrect")]
    async with open_fake_provider() as fake, running_server(db_url, tmp_path, config(fake.openai_url)) as base:
        alice, _ = await tokens(db_url)
        for score, _, _ in marks:
            fake.push(Json({"score": score, "comment": f"Worth {score}."}))
        PAGE_ERRORS.clear()

        def scenario(page: Page) -> None:
            page.close()
            first = open_as(page, alice, base)
            first.get_by_role("navigation", name="Scenes").get_by_role("button").nth(2).click()
            for score, result, verdict in marks:
                quiz = answer_quiz(first)
                q3 = quiz.locator('[data-question-id="q3"]')
                expect(q3).to_have_attribute("data-result", result)
                expect(q3.locator(".verdict")).to_have_text(f"{verdict} · {score} of 5 points")
                expect(q3.locator(".grader-comment")).to_have_text(f"Comment: Worth {score}.")
                expect(quiz.locator(".quiz-score")).to_have_text(f"Score: {25 + score} of 30")
                shot(first, f"short-answer-{score}-of-5")
                quiz.get_by_role("button", name="Try again").click()

        await in_browser(scenario, base, expected_errors=r"status of 404")
        assert not PAGE_ERRORS
