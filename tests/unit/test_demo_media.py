"""The demo provider's media: real, deterministic PNG pictures and WAV clips, videos as tasks, search results."""

from __future__ import annotations

import io
import struct
import wave
import zlib

import pytest

from openmaic.models.demo_media import DemoMedia
from openmaic.models.demo_render import SAMPLE_RATE, narration, narration_seconds, picture
from openmaic.models.errors import ProviderError
from openmaic.models.media import sniff


def png_size_and_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Parse a PNG the way a decoder would: signature, CRC-checked chunks, IHDR, inflated IDAT rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert (depth, colour) == (8, 2)
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + 3 * width)
    return width, height, raw


def test_picture_is_a_valid_png_that_shows_its_text():
    a = picture("Photosynthesis: light to sugar")
    width, height, raw = png_size_and_pixels(a)
    assert (width, height) == (640, 360)
    assert b"\xff\xff\xff" in raw  # the white text is drawn
    assert picture("Photosynthesis: light to sugar") == a  # deterministic
    assert picture("The water cycle") != a


def test_narration_is_a_wav_whose_length_follows_the_script():
    short, long = "Hello class.", " ".join(["Plants make sugar from light and water."] * 8)
    for text in (short, long):
        clip = narration(text)
        assert sniff(clip) == "audio/wav"
        with wave.open(io.BytesIO(clip)) as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, SAMPLE_RATE)
            seconds = w.getnframes() / w.getframerate()
        assert seconds == pytest.approx(narration_seconds(text), abs=0.01)
    assert narration_seconds(long) > 5 * narration_seconds(short)
    assert narration(short) == narration(short)


async def test_demo_media_serves_every_capability():
    demo = DemoMedia()
    image = await demo.generate_image("any", "A leaf")
    assert (image.media_type, sniff(image.data)) == ("image/png", "image/png")
    clip = await demo.synthesize("any", "Hello there, class.")
    assert (clip.media_type, sniff(clip.data)) == ("audio/wav", "audio/wav")
    task = await demo.submit_video("any", "A seed sprouting")
    assert task == await DemoMedia().submit_video("any", "A seed sprouting")  # a takeover finds the same task
    assert (await demo.poll_video("any", task)).status == "completed"
    poster = await demo.download_poster("any", task)
    assert poster is not None and poster.data == picture("A seed sprouting")
    video = await demo.download_video("any", task)
    assert video.media_type in ("video/mp4", "image/png") and sniff(video.data) == video.media_type
    with pytest.raises(ProviderError, match="no task"):
        await demo.poll_video("any", "video_123")
    sources = await demo.search("Teach 8th graders about photosynthesis", max_results=2)
    assert len(sources) == 2 and all("hotosynthesis" in s.title and s.url.startswith("https://example.org/")
                                     for s in sources)


def _white_pixels(data: bytes) -> int:
    """How many pure white pixels a picture of demo_render has (only its caption's glyphs are pure white)."""
    import struct
    import zlib

    at = data.index(b"IDAT") - 4
    (size,) = struct.unpack(">I", data[at:at + 4])
    raw = zlib.decompress(data[at + 8:at + 8 + size])
    return raw.count(b"\xff\xff\xff")


def test_a_picture_draws_only_what_its_font_can_and_never_question_marks():
    from openmaic.models.demo_render import picture

    assert _white_pixels(picture("A leaf in the sun")) > 0
    assert _white_pixels(picture("光合作用的示意图")) == 0  # a Chinese prompt: no rows of "?"
    latin_only = _white_pixels(picture("CO2 光合作用"))
    assert 0 < latin_only < _white_pixels(picture("CO2 CO2 CO2 CO2"))
