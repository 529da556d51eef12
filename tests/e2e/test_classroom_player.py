"""The classroom player in headless Chromium, over a real `openmaic serve` that serves the page and its modules.

The classroom's document is a fixture course (tests/fixtures/courses) answered in place of ``GET
/api/classrooms/{id}`` (Playwright's request interception), with its media made here: WAV clips of a known length
for narration and the video, PNG pictures. The page itself, its modules and the owner check are the server's.
Screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.e2e.classroom_fixtures import classroom_answer, course, png, wav
from tests.e2e.test_workbench_ui import (  # noqa: F401
    ARTIFACTS, Page, config_text, expect, in_browser, pytestmark, running_server,
)
from tests.integration.test_classroom_page import classroom_of

NARRATION_S = 0.6
ASSETS = {
    "asset_" + "a" * 32: ("image/png", png(160, 90)),
    "asset_" + "b" * 32: ("audio/wav", wav(NARRATION_S)),
    "asset_" + "c" * 32: ("audio/wav", wav(0.3)),
    "asset_" + "d" * 32: ("audio/wav", wav(0.5)),  # the "video": a clip Chromium plays to its end
    "asset_" + "e" * 32: ("image/png", png(200, 112, (30, 64, 175))),
}
MEDIA = {
    "gen_img_pend0001": {"status": "pending", "kind": "image"},
    "gen_img_fail0001": {"status": "failed", "kind": "image"},
    "gen_vid_leaf01": {"status": "done", "kind": "video", "assetId": "asset_" + "d" * 32,
                       "posterAssetId": "asset_" + "e" * 32},
}


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"player-{name}.png"), full_page=True)


def serve_fixture(page: Page, classroom_id: str, answer: dict[str, Any], *, grading: bool = False) -> list[dict]:
    """Answer the classroom's read with ``answer`` and its assets with ASSETS; returns the grading requests seen
    (answered 404, as by a server without grading, unless ``grading``: then the server's own route answers)."""
    graded: list[dict] = []
    page.route(re.compile(rf".*/api/classrooms/{re.escape(classroom_id)}$"),
               lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps(answer)))

    def asset(route):
        name = route.request.url.rsplit("/", 1)[1]
        if name not in ASSETS:
            return route.fulfill(status=404, body="Not found")
        kind, body = ASSETS[name]
        return route.fulfill(status=200, content_type=kind, body=body, headers={"Accept-Ranges": "none"})

    page.route(re.compile(r".*/api/assets/[^/]+$"), asset)
    if grading:
        return graded
    page.route(re.compile(r".*/api/quiz-grade$"),
               lambda route: (graded.append(json.loads(route.request.post_data or "{}")),
                              route.fulfill(status=404, body="Not found"))[1])
    return graded


# Instrumentation: when each media clip starts and ends, in page time.
MEDIA_LOG = """
window.__media = [];
const play = HTMLMediaElement.prototype.play;
HTMLMediaElement.prototype.play = function () {
  const entry = {src: this.currentSrc || this.src, start: performance.now(), end: null};
  window.__media.push(entry);
  this.addEventListener('ended', () => { entry.end = performance.now(); }, {once: true});
  return play.call(this);
};
window.__positions = [];
new MutationObserver(() => {
  const root = document.querySelector('.stage-column');
  if (root && root.dataset.action !== window.__last) {
    window.__last = root.dataset.action;
    window.__positions.push({action: root.dataset.action, mode: root.dataset.mode, t: performance.now()});
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-action', 'data-mode']});
"""


def box_of(page: Page, selector: str) -> dict:
    return page.locator(selector).first.evaluate(
        "el => { const r = el.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; }")


async def test_a_course_with_every_element_and_action_plays_through(db_url, tmp_path):
    async with running_server(db_url, tmp_path, config_text()) as base:
        classroom_id = await classroom_of(db_url, "local")
        doc = course("generated_every_element")
        answer = classroom_answer(classroom_id, doc, media=MEDIA)

        def scenario(page: Page) -> None:
            page.add_init_script(MEDIA_LOG)
            graded = serve_fixture(page, classroom_id, answer)
            page.goto(f"/classroom/{classroom_id}")
            expect(page.locator("html")).to_have_attribute("lang", "en")
            expect(page.get_by_role("heading", level=1)).to_have_text("Photosynthesis, generated")
            frame = page.locator(".canvas-frame")
            expect(frame.locator('[data-element-id="text_title"]')).to_contain_text("What plants need")
            # Every element type of the first slide is drawn, in its layer, in document order.
            for kind in ("text", "image", "shape", "line", "latex", "table", "chart", "audio"):
                assert frame.locator(f'.el[data-type="{kind}"]').count() >= 1, kind
            layers = frame.locator(".element-layer")
            assert layers.count() == len(doc["scenes"][0]["content"]["canvas"]["elements"])
            assert layers.nth(0).get_attribute("id") == "slide-element-shape_card"
            expect(frame.locator('[data-element-id="image_leaf"] img')).to_have_js_property("naturalWidth", 160)
            expect(frame.locator('[data-element-id="image_pending"] .skeleton')).to_have_attribute("data-status", "pending")
            expect(frame.locator('[data-element-id="image_failed"] .skeleton')).to_have_attribute("data-status", "failed")
            expect(frame.locator('[data-element-id="image_failed"]')).to_contain_text("could not be generated")
            expect(frame.locator('[data-element-id="chart_pie"] svg[data-chart-type="pie"] path')).to_have_count(3)
            expect(frame.locator('[data-element-id="latex_eq"] math')).to_have_count(1)
            expect(frame.locator('[data-element-id="table_inputs"] th')).to_have_count(2)
            assert frame.locator('[data-element-id="line_arrow"] marker').count() == 2
            # The design viewport is scaled without distortion.
            f = box_of(page, ".canvas-frame")
            assert abs(f["h"] / f["w"] - 0.5625) < 0.01
            content = box_of(page, ".canvas-content")
            assert abs(content["w"] - f["w"]) < 1.5 and abs(content["h"] - f["h"]) < 1.5
            shot(page, "slide")

            page.get_by_role("button", name="Play", exact=True).click()
            # The spotlight lands on the title: the cut-out is the element's box (plus its padding of 6 px).
            spot = page.locator('.spotlight[data-element-id="text_title"]')
            expect(spot).to_be_visible()
            s, e = box_of(page, ".spotlight"), box_of(page, '[data-element-id="text_title"]')
            assert all(abs(a - b) < 1.5 for a, b in [(s["x"] + 6, e["x"]), (s["y"] + 6, e["y"]), (s["w"] - 12, e["w"]),
                                                     (s["h"] - 12, e["h"])]), (s, e)
            expect(page.locator(".speaker .caption")).to_have_text("Plants need three things.")
            expect(page.locator(".speaker .speaker-name")).to_have_text("AI teacher")
            expect(page.locator(".speaker .avatar .initial")).to_have_text("A")  # /avatars/… is not served here
            shot(page, "spotlight")
            expect(page.locator('.laser[data-element-id="image_leaf"]')).to_be_attached()
            expect(page.locator('.spotlight[data-element-id="table_inputs"]')).to_be_attached()
            # The narration drove the next action: it started right after its clip ended, long before the
            # reading-time estimate (2 s) would have.
            media = page.evaluate("window.__media")
            clip = next((m for m in media if "b" * 32 in m["src"]), None)
            assert clip is not None and clip["end"] is not None, ("the narration did not play to its end", media)
            positions = page.evaluate("window.__positions")
            # Actions 2 and 3 are instant (laser, spotlight): the next position seen is past them.
            after = next((p for p in positions if p["action"] and int(p["action"]) > 1), None)
            assert after is not None, positions
            assert clip["end"] <= after["t"] + 1 and after["t"] - clip["start"] < 1500, (clip, positions)
            assert after["t"] - clip["start"] >= NARRATION_S * 1000 - 50

            # Autoplay goes on to the next slide: video, whiteboard, discussion.
            expect(page.locator("main")).to_have_attribute("data-scene", "2")
            page.locator("#speed").select_option("2")
            expect(page.locator(".whiteboard")).to_be_visible()
            board = page.locator(".whiteboard")
            expect(board.locator('.el[data-type="code"] li')).to_have_count(3)  # wb_edit_code inserted a line
            for kind in ("text", "shape", "chart", "latex", "table", "line"):
                assert board.locator(f'.el[data-type="{kind}"]').count() == 1, kind
            shot(page, "whiteboard")
            video = next((m for m in page.evaluate("window.__media") if "d" * 32 in m["src"]), None)
            assert video is not None and video["end"] is not None  # play_video waited for the clip's end
            card = page.get_by_role("dialog", name="Discussion")
            expect(card).to_contain_text("Why are leaves green?")
            expect(card).to_contain_text("好奇宝宝")
            expect(board).to_be_hidden()
            shot(page, "discussion")
            card.get_by_role("button", name="Skip").click()

            # Then the quiz, where autoplay stops.
            expect(page.locator("main")).to_have_attribute("data-scene", "3")
            quiz = page.locator("form.quiz")
            expect(quiz.locator(".quiz-cover")).to_have_text("3 questions · 30 points")
            submit = quiz.get_by_role("button", name="Submit answers")
            expect(submit).to_be_disabled()
            quiz.locator('[data-question-id="q1"]').get_by_label("Water").check()
            quiz.locator('[data-question-id="q2"]').get_by_label("Light").check()
            quiz.locator('[data-question-id="q2"]').get_by_label("CO2").check()
            expect(submit).to_be_disabled()
            quiz.get_by_label("Your answer").fill("To catch more light.")
            submit.click()
            expect(quiz.locator(".quiz-score")).to_have_text("Score: 25 of 30")
            expect(quiz.locator('[data-question-id="q1"]')).to_have_attribute("data-result", "correct")
            expect(quiz.locator('[data-question-id="q2"]')).to_have_attribute("data-result", "correct")
            q3 = quiz.locator('[data-question-id="q3"]')
            expect(q3).to_have_attribute("data-result", "not-graded")
            expect(q3).to_contain_text("To catch more light.")  # the analysis
            assert graded and graded[0]["userAnswer"] == "To catch more light." and graded[0]["points"] == 5
            shot(page, "quiz")
            page.wait_for_timeout(2500)
            expect(page.locator("main")).to_have_attribute("data-scene", "3")  # never leaves a quiz on its own

            # The interactive scene: the widget actions reach the sandboxed page.
            page.get_by_role("button", name="Next scene").click()
            frame_el = page.locator("iframe.interactive-frame")
            expect(frame_el).to_have_attribute("sandbox", "allow-scripts allow-forms allow-popups")
            assert "default-src 'none'" in frame_el.get_attribute("srcdoc")
            fb, cb = box_of(page, "iframe.interactive-frame"), box_of(page, ".canvas-frame")
            assert abs(fb["w"] - cb["w"]) < 1.5 and abs(fb["h"] - cb["h"]) < 1.5
            page.get_by_role("button", name="Play", exact=True).click()
            widget = page.frame_locator("iframe.interactive-frame")
            expect(widget.locator("#result-display")).to_have_text("4.00 A", timeout=20_000)
            expect(widget.locator("#formula-card")).to_be_visible()
            # The frame can reach no network: a fetch from it fails.
            shot(page, "interactive")

            # Past the last scene: the completion page with the course's score.
            page.keyboard.press("ArrowRight")
            expect(page.locator(".course-score")).to_have_text("Your quiz score: 25 of 30 points")
            expect(page.locator(".completion")).to_contain_text("You have reached the end of Photosynthesis, generated.")
            shot(page, "complete")

        # The avatars' pictures (/avatars/…) and the grading route are not on this server: their 404s are expected.
        await in_browser(scenario, base, expected_errors=r"status of 404")


async def test_the_player_on_a_phone_and_in_chinese(db_url, tmp_path):
    async with running_server(db_url, tmp_path, config_text()) as base:
        classroom_id = await classroom_of(db_url, "local")
        answer = classroom_answer(classroom_id, course("zh_cn_course"))

        def scenario(page: Page) -> None:
            serve_fixture(page, classroom_id, answer)
            page.set_viewport_size({"width": 390, "height": 844})
            page.goto(f"/classroom/{classroom_id}")
            expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
            expect(page.get_by_role("button", name="播放")).to_be_visible()
            expect(page.get_by_role("button", name="下一个场景")).to_be_visible()
            f = box_of(page, ".canvas-frame")
            assert f["w"] <= 390 and f["w"] > 300 and abs(f["h"] / f["w"] - 0.5625) < 0.01, f
            assert float(page.locator(".canvas-frame").get_attribute("data-scale")) < 0.4
            t = box_of(page, '[data-element-id="text_zh"]')
            assert abs(t["w"] - 880 * f["w"] / 1000) < 2, (t, f)  # drawn at its design size, scaled
            shot(page, "phone-zh")
            page.locator("#language").select_option("en")
            expect(page.locator("html")).to_have_attribute("lang", "en")
            expect(page.get_by_role("button", name="Play", exact=True)).to_be_visible()

        await in_browser(scenario, base)


async def test_an_unknown_classroom_gets_the_not_found_page(db_url, tmp_path):
    async with running_server(db_url, tmp_path, config_text()) as base:
        theirs = await classroom_of(db_url, "someone-else")

        def scenario(page: Page) -> None:
            for some in ("course-AAAAAAAAAAAAAAAA", theirs):
                response = page.goto(f"/classroom/{some}")
                assert response.status == 404
                expect(page.get_by_role("heading", name="Classroom not found")).to_be_visible()
                expect(page.get_by_text("找不到课堂")).to_be_visible()
            shot(page, "not-found")

        await in_browser(scenario, base, expected_errors=r"404")


async def test_while_a_run_writes_the_course_the_page_plays_what_is_ready_and_fills_in_live(db_url, tmp_path):
    async with running_server(db_url, tmp_path, config_text()) as base:
        classroom_id = await classroom_of(db_url, "local")
        doc = course("generated_every_element")
        first, second = doc["scenes"][0], doc["scenes"][1]
        media = {**MEDIA, "gen_img_pend0001": {"status": "pending", "kind": "image"}}
        writing = classroom_answer(classroom_id, {**doc, "scenes": [first]}, media=media, run_id="run-writing",
                                   pending=[{"id": second["id"], "title": second["title"], "order": 2, "type": "slide"}])
        done_first = json.loads(json.dumps(first))
        pic = next(e for e in done_first["content"]["canvas"]["elements"] if e["id"] == "image_pending")
        pic["src"] = "/api/assets/" + "asset_" + "a" * 32
        written = classroom_answer(classroom_id, {**doc, "scenes": [done_first, second]},
                                   media={**media, "gen_img_pend0001": {"status": "done", "kind": "image",
                                                                        "assetId": "asset_" + "a" * 32}})
        written["classroom"]["seq"] = 2
        state = {"answer": writing, "events": 0}

        def scenario(page: Page) -> None:
            serve_fixture(page, classroom_id, state["answer"])
            page.route(re.compile(rf".*/api/classrooms/{re.escape(classroom_id)}$"),
                       lambda route: route.fulfill(status=200, content_type="application/json",
                                                   body=json.dumps(state["answer"])))

            def events(route):
                state["events"] += 1
                frames = "id: 1\nevent: caught_up\ndata: {}\n\n"
                if state["answer"] is written:
                    frames += 'id: 2\nevent: scene_ready\ndata: {"index": 1}\n\n'
                route.fulfill(status=200, content_type="text/event-stream", body=frames)

            page.route(re.compile(r".*/api/generation-runs/run-writing/events.*"), events)
            page.goto(f"/classroom/{classroom_id}")
            main = page.locator("main")
            expect(main).to_have_attribute("data-state", "generating")
            expect(page.get_by_text("1 of 2 scenes are ready; the rest are being written.")).to_be_visible()
            nav = page.get_by_role("navigation", name="Scenes")
            expect(nav.get_by_role("button").nth(1)).to_contain_text("(being written)")
            skeleton = page.locator('[data-element-id="image_pending"] .skeleton')
            expect(skeleton).to_have_attribute("data-status", "pending")
            # What is ready plays.
            page.get_by_role("button", name="Play", exact=True).click()
            expect(page.locator(".stage-column")).to_have_attribute("data-mode", "playing")
            page.evaluate("window.__sameDocument = true")
            shot(page, "generating")
            assert state["events"] >= 1  # the run's events are followed

            state["answer"] = written
            expect(page.locator('[data-element-id="image_pending"] img')).to_be_visible()
            expect(main).to_have_attribute("data-state", "complete")
            expect(nav.get_by_text("(being written)")).to_have_count(0)
            expect(page.locator("#announcer")).to_contain_text("Charts, code and video")
            assert page.evaluate("window.__sameDocument") is True
            nav.get_by_role("button").nth(1).click()
            expect(page.locator('.canvas-frame [data-element-id="code_py"]')).to_be_visible()

        await in_browser(scenario, base, expected_errors=r"status of 404")


async def test_the_offline_page_plays_with_no_server(tmp_path):
    from openmaic.exports.html_file import build_html

    doc = course("generated_every_element")
    classroom = {"id": "course-offline", **doc, "media": MEDIA, "pendingScenes": [], "generatingRunId": None}
    page_file = tmp_path / "course.html"
    page_file.write_bytes(build_html(classroom, {k: (v[1], v[0]) for k, v in ASSETS.items()}))
    # Any page of this origin will do as in_browser's base; the offline file is opened from disk.
    requests: list[str] = []

    def scenario(page: Page) -> None:
        page.add_init_script(MEDIA_LOG)
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_file.as_uri())
        expect(page.get_by_role("heading", level=1)).to_have_text("Photosynthesis, generated")
        expect(page.locator('[data-element-id="image_leaf"] img')).to_have_js_property("naturalWidth", 160)
        page.keyboard.press("Space")
        expect(page.locator('.spotlight[data-element-id="text_title"]')).to_be_visible()
        expect(page.locator(".stage-column")).to_have_attribute("data-action", "4", timeout=10_000)
        clip = next((m for m in page.evaluate("window.__media") if m["src"].startswith("data:audio/wav")), None)
        assert clip is not None and clip["end"] is not None  # the narration, from the page itself
        page.keyboard.press("Space")
        expect(page.locator(".stage-column")).to_have_attribute("data-mode", "paused")
        page.screenshot(path=str(ARTIFACTS / "player-offline.png"), full_page=True)
        # Scrubbing: a step of the timeline is where playback goes on from; the effects start over.
        page.locator(".timeline li").nth(2).get_by_role("button").click()
        expect(page.locator(".stage-column")).to_have_attribute("data-action", "2")
        expect(page.locator(".timeline li").nth(2).get_by_role("button")).to_have_attribute("aria-current", "step")
        expect(page.locator(".spotlight")).to_have_count(0)
        page.get_by_role("button", name="Play", exact=True).click()
        expect(page.locator('.laser[data-element-id="image_leaf"]')).to_be_attached()
        expect(page.locator('.spotlight[data-element-id="table_inputs"]')).to_be_attached()

    # The agents' pictures (/avatars/…) are the only thing it looks for outside itself; their initials stand in.
    await in_browser(scenario, "http://127.0.0.1:9", expected_errors="ERR_FILE_NOT_FOUND")
    outside = [u for u in requests if not u.startswith("data:") and u != page_file.as_uri()]
    assert outside and all(u.startswith("file:///avatars/") for u in outside), outside


async def test_the_classroom_has_no_serious_accessibility_violations(db_url, tmp_path):
    from tests.e2e.accessibility import serious_violations

    async with running_server(db_url, tmp_path, config_text()) as base:
        classroom_id = await classroom_of(db_url, "local")
        answer = classroom_answer(classroom_id, course("generated_every_element"), media=MEDIA)

        def scenario(page: Page) -> None:
            serve_fixture(page, classroom_id, answer, grading=True)  # the demo model grades and answers
            page.goto(f"/classroom/{classroom_id}")
            expect(page.locator('.canvas-frame [data-element-id="text_title"]')).to_be_visible()
            found = {"slide": serious_violations(page)}
            # The chat, with a question answered by the course's teacher.
            page.keyboard.press("q")
            page.get_by_label("Your question").fill("What do plants need?")
            page.get_by_role("button", name="Send").click()
            expect(page.locator('.chat-message[data-role="assistant"]')).to_have_attribute("data-state", "done")
            found["chat"] = serious_violations(page)
            shot(page, "axe-chat")
            # A graded quiz, then the completion page.
            page.get_by_role("navigation", name="Scenes").get_by_role("button").nth(2).click()
            quiz = page.locator("form.quiz")
            quiz.locator('[data-question-id="q1"]').get_by_label("Water").check()
            quiz.locator('[data-question-id="q2"]').get_by_label("Light").check()
            quiz.get_by_label("Your answer").fill("To catch more light.")
            quiz.get_by_role("button", name="Submit answers").click()
            expect(quiz).to_have_attribute("data-state", "graded")
            found["quiz"] = serious_violations(page)
            page.get_by_role("navigation", name="Scenes").get_by_role("button").nth(3).click()
            page.keyboard.press("ArrowRight")
            expect(page.locator(".completion")).to_be_visible()
            found["complete"] = serious_violations(page)
            page.goto("/classroom/course-AAAAAAAAAAAAAAAA")
            expect(page.get_by_role("heading", name="Classroom not found")).to_be_visible()
            found["not-found"] = serious_violations(page)
            assert not any(found.values()), found

        await in_browser(scenario, base, expected_errors=r"status of 404")
