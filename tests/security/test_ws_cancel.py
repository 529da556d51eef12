"""``cancel`` is a Pro session's command only: over the stream's WebSocket a generation run and a course refuse
it, as their HTTP routes do (there is no cancel route for them), and nothing is written.

Before, a ``cancel`` frame on a run's or a course's socket appended ``session.cancel_requested`` to it: a way to
stop a run (or mark a course) that HTTP does not offer.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from openmaic.events.log import EventLog
from openmaic.store.database import open_database
from tests.integration.api_harness import raw_ws
from tests.serving import run_awaiting_confirmation, running_server


async def _types(db_url: str, stream_id: str) -> list[str]:
    """Every event type logged on the stream, internal ones included (read from the log, not the API)."""
    async with open_database(db_url, max_size=1) as db:
        return [e.type for e in await EventLog(db).read_stream(stream_id, limit=10_000)]


async def _refused_on_socket(port: int, stream_id: str) -> dict[str, Any]:
    async with raw_ws(port, f"/api/streams/{stream_id}/ws?after=0", message_queue_size=64) as ws:
        with trio.fail_after(20):
            while json.loads(await ws.get_message())["type"] != "caught_up":
                pass
            await ws.send_message(json.dumps({"type": "cancel", "commandId": "stop-it"}))
            while (frame := json.loads(await ws.get_message()))["type"] == "event":
                pass
    return frame


async def test_cancel_over_the_websocket_is_refused_on_runs_and_courses_as_http_refuses_it(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, port):
        run_id = await run_awaiting_confirmation(client, "Volcanoes")
        r = await client.post("/api/generate-classroom", json={"requirement": "Glaciers"})
        job = r.json()["jobId"]
        with trio.fail_after(60):
            while not (view := (await client.get(f"/api/generate-classroom/{job}")).json())["done"]:
                await trio.sleep(0.2)
        course_id = view["result"]["classroomId"]

        for stream_id, route in ((run_id, f"/api/generation-runs/{run_id}/cancel"),
                                 (course_id, f"/api/classrooms/{course_id}/cancel")):
            before = await _types(db_url, stream_id)
            http = await client.post(route, json={"commandId": "stop-it"})
            assert http.status_code in (404, 405), http.text  # HTTP has no way to cancel these
            frame = await _refused_on_socket(port, stream_id)
            assert frame["type"] == "error" and frame["commandId"] == "stop-it", frame
            assert frame["errorCode"] == "INVALID_REQUEST" and frame["details"] == {"path": "type"}
            assert "cancel" in frame["error"]
            after = await _types(db_url, stream_id)
            assert after == before and "session.cancel_requested" not in after
        # The run was not stopped: it still waits for its outline's confirmation.
        assert (await client.get(f"/api/generation-runs/{run_id}")).json()["run"]["state"] \
            == "awaiting_outline_confirmation"
