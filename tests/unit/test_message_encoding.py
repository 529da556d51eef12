"""How a user message with images goes on the wire to each provider protocol."""

from __future__ import annotations

import base64

from openmaic.models import anthropic, openai
from openmaic.models.types import Image, SystemMessage, UserMessage

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
JPEG = b"\xff\xd8\xff" + b"\x01" * 8


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_openai_sends_text_then_each_image_as_a_data_url():
    look = UserMessage(text="look", images=(Image("image/png", PNG), Image("image/jpeg", JPEG)))
    msgs = [SystemMessage(text="sys"), look]
    assert openai.encode_messages(msgs)[1] == {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64(JPEG)}"}},
    ]}  # fmt: skip
    # Without images the content stays a plain string, as before.
    assert openai.encode_messages([UserMessage(text="hi")]) == [{"role": "user", "content": "hi"}]


def test_anthropic_sends_base64_image_blocks_before_the_text():
    look = UserMessage(text="look", images=(Image("image/png", PNG),))
    system, msgs = anthropic.encode_messages([SystemMessage(text="sys"), look])
    assert system == "sys"
    assert msgs == [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
        {"type": "text", "text": "look"},
    ]}]  # fmt: skip
