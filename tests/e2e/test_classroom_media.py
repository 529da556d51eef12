"""The classroom page plays a course's media: `openmaic serve` (all roles, the offline demo provider for every
slot) and headless Chromium. A picture is shown (decoded: its natural size is known), a narration clip plays to
``ended``, and a video stands with its poster. Screenshots land in tests/artifacts/."""

from __future__ import annotations

import httpx

from tests.e2e.test_workbench_ui import (
    ARTIFACTS, Page, _ready_course, base_url, config_text, expect, in_browser, running_server,  # noqa: F401
)  # fmt: skip


async def test_the_classroom_shows_pictures_and_plays_narration(base_url):  # noqa: F811
    course_id = await _ready_course(base_url)
    async with httpx.AsyncClient(base_url=base_url, trust_env=False, timeout=10) as client:
        classroom = (await client.get(f"/api/classrooms/{course_id}")).json()["classroom"]
    scenes = classroom["scenes"]
    assert all(s["narrationAssetId"] for s in scenes)
    media = {m["elementId"]: (i, m) for i, s in enumerate(scenes) for m in s["media"]}
    assert {m["status"] for _, m in media.values()} == {"done"}
    image_scene, _ = media["gen_img_1"]
    video_scene, video = media["gen_vid_1"]
    assert video["posterAssetId"]

    def scenario(page: Page) -> None:
        page.goto(f"/classroom/{course_id}#scene-{image_scene + 1}")
        expect(page.locator("main")).to_have_attribute("data-state", "complete")
        expect(page.get_by_role("heading", level=1)).to_have_text(classroom["title"])
        picture = page.locator('figure[data-element-id="gen_img_1"] img')
        expect(picture).to_be_visible()
        width = picture.evaluate("img => img.complete ? img.naturalWidth : new Promise(r => img.onload = () => "
                                 "r(img.naturalWidth))")
        assert width == 640
        audio = page.locator(".scene-panel:not([hidden]) .narration audio")
        expect(audio).to_be_visible()
        # Played for real, sped up: the clip's duration is read, then it plays to its end.
        outcome = audio.evaluate("""a => new Promise((resolve) => {
            const done = () => resolve({ended: a.ended, duration: a.duration, error: a.error && a.error.code});
            a.addEventListener('ended', done, {once: true});
            a.addEventListener('error', done, {once: true});
            a.muted = true; a.playbackRate = 16;
            a.play().catch((e) => resolve({ended: false, duration: a.duration, error: String(e)}));
        })""")
        assert outcome["error"] is None and outcome["ended"] is True, outcome
        assert outcome["duration"] > 1
        page.screenshot(path=str(ARTIFACTS / "classroom-media.png"), full_page=True)
        page.goto(f"/classroom/{course_id}#scene-{video_scene + 1}")
        page.reload()
        figure = page.locator('figure[data-element-id="gen_vid_1"]')
        expect(figure).to_be_visible()
        # The demo has no video encoder: the poster frame stands in for the clip, decoded like any picture.
        poster = figure.locator("img, video")
        expect(poster).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "classroom-video.png"), full_page=True)

    await in_browser(scenario, base_url)
