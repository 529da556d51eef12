"""Fixture courses for the classroom player, served to headless Chromium in the shape of ``GET
/api/classrooms/{id}`` (``{success, classroom: {id, stage, scenes, media, pendingScenes, generatingRunId, …}}``), and
media made here: short WAV clips of a known duration and small PNG pictures."""

from __future__ import annotations

import io
import json
import math
import struct
import wave
import zlib
from pathlib import Path
from typing import Any

COURSES = Path(__file__).resolve().parents[1] / "fixtures" / "courses"


def course(name: str) -> dict[str, Any]:
    """A course document of tests/fixtures/courses (``ohm_golden``, ``generated_every_element``, ``zh_cn_course``)."""
    return json.loads((COURSES / f"{name}.json").read_text("utf-8"))


def classroom_answer(classroom_id: str, document: dict[str, Any], *, media: dict | None = None,
                     pending: list | None = None, run_id: str | None = None) -> dict[str, Any]:
    """The classroom route's answer holding ``document``."""
    return {"success": True, "classroom": {
        "id": classroom_id, "stage": document["stage"], "scenes": document["scenes"],
        "dslVersion": document.get("dslVersion", "0.2.0"), "createdAt": "2026-08-22T09:00:00Z",
        "generatingRunId": run_id, "seq": 1, "media": media or {}, "pendingScenes": pending or [],
    }}


def wav(seconds: float, rate: int = 8000) -> bytes:
    """A mono 16-bit WAV tone lasting exactly ``seconds``."""
    frames = int(seconds * rate)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(i / 8))) for i in range(frames)))
    return buf.getvalue()


def png(width: int = 64, height: int = 36, rgb: tuple[int, int, int] = (34, 139, 34)) -> bytes:
    """A plain-coloured PNG picture."""
    row = b"\x00" + bytes(rgb) * width
    raw = row * height

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
