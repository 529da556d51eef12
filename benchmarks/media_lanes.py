"""Media beside the scenes: a course with media finishes in about its critical path, not the sum of its calls.

    python -m benchmarks.media_lanes [--scenes 6] [--latency-ms 200] [--runs 3]

Every provider call (chat, image, video submit/poll/download/poster, speech, search) takes a fixed latency L
(the offline demo's answers, each after ``trio.sleep(L)``). The course has N slide scenes, each showing one
picture, and one video. One worker runs the generation kind and the media kind, as ``openmaic serve`` does.

* the scene lane: research, outline, agents, then per scene content, actions and narration: (3 + 3N) calls;
* the media lane, from the agents step on: N pictures + one video (submit, poll, download, poster): N + 4 calls.

The ideal wall time is the critical path, (3 + 3N)·L here (the media lane is shorter and runs beside it); one
lane after the other would be (7 + 4N)·L. Each run with media is timed beside a baseline in the same process:
the same course with the image and video slots off (no media lane; the scene lane is the same, research and
narration included), so "media on − baseline" is what the lane costs the course: about 0 when the lanes run
in parallel, (N + 4)·L if they ran one after the other. Reported per run: both wall times, that difference, the
ideal, and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import msgspec
import trio

from benchmarks._cluster import benchmark_database
from openmaic.actors.worker import Worker
from openmaic.config import default_config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import Wakeups
from openmaic.media.lane import MediaKind
from openmaic.media.slots import MediaRouter
from openmaic.models.demo_render import narration, picture
from openmaic.models.media import CAPABILITIES, GeneratedMedia
from openmaic.models.demo import DemoProvider
from openmaic.models.demo_course.brief import read_brief
from openmaic.models.demo_media import DemoMedia
from openmaic.models.types import TurnResult
from openmaic.runs.events import RunInput
from openmaic.runs.kind import GenerationKind
from openmaic.runs.service import RunService
from openmaic.services import Services
from openmaic.store.database import open_database


class SlowChat:
    """The demo's answers, each after a fixed latency; the outline has ``scenes`` slides, one picture each, and
    one video, and each scene's script is one speech (so its narration is one speech call, as the formula says)."""

    def __init__(self, latency: float, scenes: int) -> None:
        self.name = "slow"
        self.latency = latency
        self.scenes = scenes
        self.calls = 0
        self._demo = DemoProvider("slow")

    def outline(self) -> dict[str, Any]:
        """The outline as a model writes it (OpenMAIC's format): the run gives the media its own refs."""
        items = [{"type": "slide", "title": f"Part {i + 1}", "description": f"Understand part {i + 1}.",
                  "keyPoints": ["one", "two"],
                  "mediaGenerations": [{"type": "image", "prompt": f"Part {i + 1}", "elementId": f"img_{i + 1}"}]
                  + ([{"type": "video", "prompt": "The whole", "elementId": "vid_1"}] if i == 0 else [])}
                 for i in range(self.scenes)]  # fmt: skip
        return {"languageDirective": "Teach in English.", "courseTitle": "Benchmark course", "outlines": items}

    async def stream_turn(self, model: str, messages: list[Any], tools: list[Any], *, on_delta: Any,
                          on_retry: Any = None) -> TurnResult:
        self.calls += 1
        await trio.sleep(self.latency)
        step = (read_brief(messages) or {}).get("step")
        if step == "outline":
            text = json.dumps(self.outline())
        elif step == "actions":
            text = json.dumps([{"type": "text", "content": "Here is this part, in one breath."}])
        else:
            return await self._demo.stream_turn(model, messages, tools, on_delta=on_delta, on_retry=on_retry)
        on_delta(text)
        return TurnResult(text=text, tool_calls=[], stop_reason="end_turn")


class SlowMedia:
    """Media after a fixed latency per call: one small picture and one short clip made once, so the benchmark
    measures the lanes, not the demo's drawing (the demo's own media are tested elsewhere)."""

    poll_interval_s = 0.0

    def __init__(self, latency: float) -> None:
        self.name = "slow"
        self.latency = latency
        self.calls = 0
        self._demo = DemoMedia("slow")
        self._png = GeneratedMedia(media_type="image/png", data=picture("benchmark", width=64, height=36))
        self._wav = GeneratedMedia(media_type="audio/wav", data=narration("a short clip"))

    async def _call(self) -> None:
        self.calls += 1
        await trio.sleep(self.latency)

    async def generate_image(self, model: str, prompt: str, **kw: Any) -> GeneratedMedia:
        await self._call()
        return GeneratedMedia(media_type="image/png", data=self._png.data + prompt.encode())  # distinct assets

    async def submit_video(self, model: str, prompt: str, **kw: Any) -> str:
        await self._call()
        return await self._demo.submit_video(model, prompt)

    async def poll_video(self, model: str, task_id: str) -> Any:
        await self._call()
        return await self._demo.poll_video(model, task_id)

    async def download_video(self, model: str, task_id: str) -> GeneratedMedia:
        await self._call()
        return self._png

    async def download_poster(self, model: str, task_id: str) -> GeneratedMedia:
        await self._call()
        return self._png

    async def synthesize(self, model: str, text: str, **kw: Any) -> GeneratedMedia:
        await self._call()
        return self._wav

    async def search(self, query: str, **kw: Any) -> Any:
        await self._call()
        return await self._demo.search(query)


class SlowModels:
    def __init__(self, chat: SlowChat) -> None:
        self.chat = chat

    def for_slot(self, slot: str, **kw: Any) -> tuple[SlowChat, str]:
        return self.chat, "course"

    async def for_owner(self, owner: str, slot: str, **kw: Any) -> tuple[SlowChat, str]:
        return self.chat, "course"


async def one_course(url: str, latency: float, scenes: int, media_on: bool, tag: str) -> tuple[float, int, int]:
    """Wall time of one course from its creation to its completion, and the chat and media calls it made."""
    config = default_config()
    rt = msgspec.structs.replace(config.runtime, claim_poll_s=0.05, wake_poll_s=0.5)
    config = msgspec.structs.replace(config, runtime=rt)
    chat, slow_media = SlowChat(latency, scenes), SlowMedia(latency)
    router = MediaRouter(config, overrides={c: None for c in CAPABILITIES})
    for c in CAPABILITIES if media_on else ("tts", "webSearch"):
        router.pin(c, slow_media, "m")
    async with open_database(url, listen=["openmaic_events"], max_size=20) as db:
        wakeups = Wakeups()
        log = EventLog(db, wakeups)
        services = Services(config=config, db=db, log=log, wakeups=wakeups, models=SlowModels(chat),  # type: ignore[arg-type]
                            media=router)
        kinds = {"generation": GenerationKind(config, retry_backoff_s=0.05), "media": MediaKind(config)}
        worker = Worker(log, wakeups, kinds, rt, services=services)
        svc = RunService(log, config)
        async with trio.open_nursery() as nursery:
            await nursery.start(wakeups.run, db)
            await nursery.start(worker.run)
            started = time.perf_counter()
            snap = await svc.create_run("bench", f"run-{tag}", RunInput(requirement="Teach a benchmark",
                                                                         outline_review="auto"))
            with trio.fail_after(600):
                while (await svc.snapshot("bench", snap.id)).state not in ("completed", "paused"):
                    await trio.sleep(0.01)
            elapsed = time.perf_counter() - started
            state = (await svc.snapshot("bench", snap.id)).state
            assert state == "completed", state
            worker.shutdown()
            nursery.cancel_scope.cancel()
    return elapsed, chat.calls, slow_media.calls


async def main(scenes: int, latency_ms: int, runs: int) -> None:
    latency = latency_ms / 1000
    critical = (3 + 3 * scenes) * latency
    sequential = (7 + 4 * scenes) * latency
    load_before = os.getloadavg()[0]
    print("== media lanes benchmark ==")
    print(f"command: python -m benchmarks.media_lanes --scenes {scenes} --latency-ms {latency_ms} --runs {runs}")
    print(f"machine: {os.cpu_count()} CPUs; 1-min load average {load_before:.2f} before")
    print(f"course: {scenes} slide scenes, {scenes} pictures and 1 video; every provider call takes L = {latency_ms} ms")
    print(f"ideal (critical path, the scene lane): (3 + 3N)·L = {critical:.2f} s; "
          f"lanes one after the other: (7 + 4N)·L = {sequential:.2f} s")
    print()
    print("| run | baseline: pictures and video off (s) | calls | media on (s) | calls | on − baseline (s) | "
          "on / ideal |")
    print("|-----|--------------------------------------|-------|--------------|-------|-------------------|"
          "------------|")
    ons: list[float] = []
    diffs: list[float] = []
    async with benchmark_database() as url:
        for k in range(1, runs + 1):
            off_s, off_chat, off_media = await one_course(url, latency, scenes, False, f"off{k}")
            on_s, on_chat, on_media = await one_course(url, latency, scenes, True, f"on{k}")
            ons.append(on_s)
            print(f"| {k} | {off_s:.2f} | {off_chat + off_media} | {on_s:.2f} | {on_chat + on_media} | "
                  f"{on_s - off_s:+.2f} | {on_s / critical:.2f} |", flush=True)
            diffs.append(on_s - off_s)
    print()
    print(f"media on: {min(ons):.2f}–{max(ons):.2f} s over {runs} runs (ideal {critical:.2f} s, sequential "
          f"{sequential:.2f} s); on − baseline {min(diffs):+.2f} to {max(diffs):+.2f} s (the media lane's "
          f"{(scenes + 4) * latency:.2f} s of calls, if it were not in parallel); 1-min load average "
          f"{os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenes", type=int, default=6)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    a = parser.parse_args()
    trio.run(main, a.scenes, a.latency_ms, a.runs)
