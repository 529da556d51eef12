"""Real media files made from text alone, for the offline ``demo`` provider: PNG pictures and WAV clips.

Both are pure functions of their input (the same scene always gives the same bytes) and need nothing beyond
the standard library: a PNG is zlib-compressed RGB rows with CRC-checked chunks, drawn with a 5×7 bitmap font;
a WAV is 16-bit mono PCM in a RIFF container. A browser shows the picture in an ``<img>`` and plays the clip in
an ``<audio>`` element to ``ended``.

* :func:`picture` — a 16:9 card: a two-colour gradient and a few discs chosen from the text's hash, and the
  text itself, word-wrapped, in white.
* :func:`narration` — one soft tone per word (its pitch from the word, its length from the word's length, a
  short rest between words), so a longer script gives a longer clip: about a spoken word's pace.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
import zlib

__all__ = ["SAMPLE_RATE", "narration", "narration_seconds", "picture", "png"]

SAMPLE_RATE = 16_000

# 5×7 glyphs, one string of 7 rows of 5 pixels each ('#' set). Lower case is drawn as upper case.
_GLYPHS: dict[str, str] = {
    "A": ".###.#...##...#######...##...##...#", "B": "####.#...##...#####.#...##...#####.",
    "C": ".###.#...##....#....#....#...#.###.", "D": "####.#...##...##...##...##...#####.",
    "E": "######....#....####.#....#....#####", "F": "######....#....####.#....#....#....",
    "G": ".###.#...##....#.####...##...#.####", "H": "#...##...##...#######...##...##...#",
    "I": ".###...#....#....#....#....#...###.", "J": "..###...#....#....#....#.#..#..##..",
    "K": "#...##..#.#.#..##...#.#..#..#.#...#", "L": "#....#....#....#....#....#....#####",
    "M": "#...###.###.#.##.#.##...##...##...#", "N": "#...###..##.#.##..###...##...##...#",
    "O": ".###.#...##...##...##...##...#.###.", "P": "####.#...##...#####.#....#....#....",
    "Q": ".###.#...##...##...##.#.##..#..##.#", "R": "####.#...##...#####.#.#..#..#.#...#",
    "S": ".#####....#.....###.....#....#####.", "T": "#####..#....#....#....#....#....#..",
    "U": "#...##...##...##...##...##...#.###.", "V": "#...##...##...##...##...#.#.#...#..",
    "W": "#...##...##...##.#.##.#.##.#.#.#.#.", "X": "#...##...#.#.#...#...#.#.#...##...#",
    "Y": "#...##...#.#.#...#....#....#....#..", "Z": "#####....#...#...#...#...#....#####",
    "0": ".###.#...##..###.#.###..##...#.###.", "1": "..#...##....#....#....#....#...###.",
    "2": ".###.#...#....#...#...#...#...#####", "3": "#####...#...#.....#.....##...#.###.",
    "4": "...#...##..#.#.#..#.#####...#....#.", "5": "######....####.....#....##...#.###.",
    "6": "..##..#...#....####.#...##...#.###.", "7": "#####....#...#...#...#....#....#...",
    "8": ".###.#...##...#.###.#...##...#.###.", "9": ".###.#...##...#.####....#...#..##..",
    ".": "..........................##...##..", ",": ".....................##...#...#....",
    ":": "......##...##........##...##.......", ";": ".....##...##.........##...#...#....",
    "!": "..#....#....#....#....#.........#..", "?": ".###.#...#....#...#...#.........#..",
    "'": "..#....#...#.......................", "-": "...............#####...............",
    "(": "...#...#...#....#....#.....#.....#.", ")": ".#.....#.....#....#....#...#...#...",
    "&": ".##..#..#.#.#...#...#.#.##..#..##.#", "/": ".........#...#...#...#...#.........",
    "+": ".......#....#..#####..#....#.......", "%": "##...##..#...#...#...#...#..##...##",
    " ": "...................................",
}


def _glyph(ch: str) -> str:
    g = _GLYPHS.get(ch.upper()) or _GLYPHS["?"]
    return (g + "." * 35)[:35]


def png(width: int, height: int, rows: list[bytes]) -> bytes:
    """A PNG of ``height`` RGB rows of ``width`` pixels (each row ``3 * width`` bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + row for row in rows)  # filter type 0 (None) for every row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b"")


def _wrap(text: str, width: int, lines: int) -> list[str]:
    out: list[str] = []
    current = ""
    for word in text.split():
        word = word[:width]
        if len(current) + len(word) + (1 if current else 0) <= width:
            current = f"{current} {word}".strip()
        else:
            out.append(current)
            current = word
        if len(out) == lines:
            break
    if current and len(out) < lines:
        out.append(current)
    return out


@functools.lru_cache(maxsize=64)
def picture(text: str, *, width: int = 640, height: int = 360) -> bytes:
    """A PNG card showing ``text`` (see the module docstring)."""
    digest = hashlib.sha256(text.encode()).digest()
    top = (digest[0] // 3 + 20, digest[1] // 3 + 30, digest[2] // 3 + 60)
    bottom = (digest[3] // 2 + 60, digest[4] // 2 + 40, digest[5] // 3 + 90)
    discs = [((digest[6 + 3 * i] * width) // 256, (digest[7 + 3 * i] * height) // 256, 20 + digest[8 + 3 * i] // 4)
             for i in range(4)]  # fmt: skip
    canvas = [bytearray() for _ in range(height)]
    for y in range(height):
        t = y / max(1, height - 1)
        base = bytes(int(a + (b - a) * t) for a, b in zip(top, bottom, strict=True))
        row = bytearray(base * width)
        lit = bytes(min(255, c + 40) for c in base)
        for cx, cy, r in discs:
            dy = y - cy
            if abs(dy) >= r:
                continue
            half = int(math.sqrt(r * r - dy * dy))
            x0, x1 = max(0, cx - half), min(width, cx + half)
            if x1 > x0:
                row[3 * x0 : 3 * x1] = lit * (x1 - x0)  # the row's colour, lighter: one slice per disc and row
        canvas[y] = row
    scale = 4
    columns = (width - 40) // (6 * scale)
    # Only what the bitmap font can draw: a prompt in another script (a Chinese course's) would come out as rows of
    # "?"; the picture then shows no words at all, and the slide's own text, drawn by the browser, says what it is.
    drawable = "".join(ch for ch in text if ch.upper() in _GLYPHS or ch.isspace())
    lines = _wrap(" ".join(drawable.split()), columns, 4) or [""]
    top_y = (height - len(lines) * 9 * scale) // 2
    for n, line in enumerate(lines):
        left = (width - len(line) * 6 * scale) // 2
        for k, ch in enumerate(line):
            glyph = _glyph(ch)
            for gy in range(7):
                for gx in range(5):
                    if glyph[gy * 5 + gx] != "#":
                        continue
                    for py in range(scale):
                        y = top_y + n * 9 * scale + gy * scale + py
                        x0 = left + k * 6 * scale + gx * scale
                        if 0 <= y < height and 0 <= x0 and x0 + scale <= width:
                            canvas[y][3 * x0 : 3 * (x0 + scale)] = b"\xff" * (3 * scale)
    return png(width, height, [bytes(r) for r in canvas])


def _word_seconds(word: str) -> float:
    return int((0.12 + 0.055 * min(len(word), 14)) * SAMPLE_RATE) / SAMPLE_RATE


_REST_S = 0.08
_MAX_SECONDS = 120.0


def narration_seconds(text: str) -> float:
    """How long :func:`narration` of ``text`` plays, in seconds."""
    words = text.split() or ["."]
    total = sum(_word_seconds(w) + _REST_S for w in words) + 0.2
    return min(total, _MAX_SECONDS)


@functools.lru_cache(maxsize=256)
def _tone(note: int, letters: int) -> bytes:
    # One word's samples depend only on its note and its (capped) length: at most 12 × 15 distinct tones. A
    # tone is one period repeated (a whole number of samples, so its pitch is within a few cents of the note),
    # with short fades in and out: cheap enough to run on the event loop's thread budget.
    period = max(2, round(SAMPLE_RATE / (196.0 * 2 ** (note / 12))))  # a note of the octave above G3
    n = int((0.12 + 0.055 * letters) * SAMPLE_RATE)
    wave = [0.25 * (math.sin(2 * math.pi * i / period) + 0.3 * math.sin(4 * math.pi * i / period))
            for i in range(period)]  # fmt: skip
    cycle = b"".join(struct.pack("<h", int(v * 32767 * 0.75)) for v in wave)
    body = bytearray((cycle * (n // period + 1))[: 2 * n])
    fade = max(1, min(n // 4, SAMPLE_RATE // 50))
    for i in range(fade):
        for at in (i, n - 1 - i):
            (v,) = struct.unpack_from("<h", body, 2 * at)
            struct.pack_into("<h", body, 2 * at, int(v * i / fade))
    return bytes(body) + b"\x00\x00" * int(_REST_S * SAMPLE_RATE)


def narration(text: str) -> bytes:
    """A WAV clip for ``text`` (see the module docstring)."""
    words = text.split() or ["."]
    samples = bytearray()
    limit = int(_MAX_SECONDS * SAMPLE_RATE)
    for word in words:
        note = hashlib.sha256(word.lower().encode()).digest()[0] % 12
        samples += _tone(note, min(len(word), 14))
        if len(samples) >= 2 * limit:
            break
    samples += b"\x00\x00" * int(0.2 * SAMPLE_RATE)
    data = bytes(samples[: 2 * limit])
    fmt = struct.pack("<HHIIHH", 1, 1, SAMPLE_RATE, SAMPLE_RATE * 2, 2, 16)  # PCM, mono, 16-bit
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + struct.pack("<I", len(data)) + data)  # fmt: skip
