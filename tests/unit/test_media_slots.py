"""Media slots resolve through the layered model configuration, as OpenMAIC's openmaic.yml writes them.

A media slot set to ``null`` is off; one assigned to a preset is served by that preset's protocol (with the
preset's default endpoint unless the provider gives its own); one assigned to a preset whose protocol this
server has no driver for, or to a provider without its key, cannot be used and says why; an owner's own
Models page settings route media like chat, each owner's key a driver of its own.
"""

from __future__ import annotations

import textwrap

import pytest

from openmaic.config import Secret, default_config, parse_config
from openmaic.media.slots import MediaRouter
from openmaic.modelconfig.layer import ModelLayer, ProviderSpec
from openmaic.models.demo_media import DemoMedia
from openmaic.models.errors import MissingApiKey, MissingModel
from openmaic.models.openai_media import OpenAIImages, OpenAISpeech, OpenAIVideos
from openmaic.models.provider import DRIVERS, check_slot
from openmaic.models.tavily import TavilySearch

KEY = "sk-test-SECRET-media-slots"

OPENMAIC_YML = """
providers:
  openai: {preset: openai, apiKey: ${OPENAI_API_KEY}}
  images: {preset: openai-image, apiKey: ${OPENAI_API_KEY}}
  speech: {preset: openai-tts, apiKey: ${OPENAI_API_KEY}, baseUrl: 'https://speech.internal/v1'}
  sora: {preset: sora, apiKey: ${OPENAI_API_KEY}}
  tavily: {preset: tavily, apiKey: ${TAVILY_API_KEY}}
slots:
  llm: openai:gpt-4o-mini
  image: images:gpt-image-1
  video: sora:sora-2
  tts: speech:gpt-4o-mini-tts
  webSearch: tavily
"""


def parse(text: str, **env: str) -> object:
    return parse_config(textwrap.dedent(text), source="openmaic.yml",
                        env={"OPENAI_API_KEY": KEY, "TAVILY_API_KEY": KEY, **env})


def test_every_media_protocol_with_a_driver_is_one_the_slot_check_accepts():
    for capability in ("image", "video", "tts", "webSearch"):
        assert "demo" in DRIVERS[capability]
    assert {"openai-images", "sora", "openai-speech", "tavily"} <= DRIVERS["image"] | DRIVERS["video"] \
        | DRIVERS["tts"] | DRIVERS["webSearch"]


def test_media_slots_set_in_an_openmaic_file_are_served_by_their_presets_protocols():
    cfg = parse(OPENMAIC_YML)
    router = MediaRouter(cfg)
    image, video, tts, search = (router.route(c) for c in ("image", "video", "tts", "webSearch"))
    assert isinstance(image[0], OpenAIImages) and image[1] == "gpt-image-1"
    assert isinstance(video[0], OpenAIVideos) and video[1] == "sora-2"
    assert isinstance(tts[0], OpenAISpeech) and tts[1] == "gpt-4o-mini-tts"
    assert isinstance(search[0], TavilySearch)
    # The preset's default endpoint, unless the provider names its own.
    assert image[0].base_url == "https://api.openai.com/v1" and video[0].base_url == "https://api.openai.com/v1"
    assert tts[0].base_url == "https://speech.internal/v1" and search[0].base_url == "https://api.tavily.com"
    assert router.capabilities() == {"image": True, "video": True, "tts": True, "webSearch": True}
    assert router.route("image")[0] is image[0]  # built once per endpoint


def test_a_media_slot_set_to_null_is_off():
    cfg = parse(OPENMAIC_YML.replace("video: sora:sora-2", "video: null").replace("webSearch: tavily",
                                                                                  "webSearch: null"))
    router = MediaRouter(cfg)
    assert router.route("video") is None and router.route("webSearch") is None
    assert router.capabilities() == {"image": True, "video": False, "tts": True, "webSearch": False}


def test_a_file_that_declares_models_but_no_media_slot_has_media_off():
    cfg = parse("providers: {openai: {preset: openai, apiKey: x-0123456789}}\nslots: {llm: openai:gpt-4o}\n")
    assert MediaRouter(cfg).capabilities() == {"image": False, "video": False, "tts": False, "webSearch": False}


def test_with_no_configuration_the_demo_serves_every_media_slot():
    router = MediaRouter(default_config())
    for capability in ("image", "video", "tts", "webSearch"):
        driver, _model = router.route(capability)
        assert isinstance(driver, DemoMedia)


def test_a_media_slot_that_cannot_be_used_says_why():
    no_driver = parse("providers: {mm: {preset: minimax, apiKey: mm-0123456789}}\nslots: {image: mm}\n")
    with pytest.raises(MissingModel, match="minimax"):
        MediaRouter(no_driver).route("image")
    with pytest.raises(MissingModel):
        check_slot(no_driver, "image")
    assert MediaRouter(no_driver).available("image") is False
    no_key = parse("providers: {images: {preset: openai-image}}\nslots: {image: images:gpt-image-1}\n")
    with pytest.raises(MissingApiKey, match="images"):
        MediaRouter(no_key).route("image")


async def test_an_owners_own_settings_route_media_slots_each_with_its_own_driver():
    cfg = parse("providers: {openai: {preset: openai, apiKey: x-0123456789}}\nslots: {llm: openai:gpt-4o}\n")
    layers = {
        "alice": ModelLayer(source="workspace", slots={"image": "mine:gpt-image-1", "tts": None},
                            providers={"mine": ProviderSpec(preset="openai-image", api_key=Secret(KEY + "-a"))}),
        "bob": ModelLayer(source="workspace", slots={"image": "mine:gpt-image-1"},
                          providers={"mine": ProviderSpec(preset="openai-image", api_key=Secret(KEY + "-b"))}),
    }

    async def settings(owner: str) -> ModelLayer | None:
        return layers.get(owner)

    router = MediaRouter(cfg, settings=settings)
    alice, bob = await router.for_owner("alice", "image"), await router.for_owner("bob", "image")
    assert isinstance(alice[0], OpenAIImages) and isinstance(bob[0], OpenAIImages)
    assert alice[0] is not bob[0]  # one owner's key never serves another
    assert await router.for_owner("carol", "image") is None  # nothing of hers: the deployment's (unassigned)
    assert await router.for_owner("alice", "tts") is None
    assert router.capabilities()["image"] is False  # capabilities answer for the deployment


async def test_the_speech_provider_answers_to_its_id_and_its_presets():
    router = MediaRouter(parse(OPENMAIC_YML))
    assert await router.names_for_owner("alice", "tts") == {"speech", "openai-tts"}
    off = MediaRouter(parse(OPENMAIC_YML.replace("tts: speech:gpt-4o-mini-tts", "tts: null")))
    assert await off.names_for_owner("alice", "tts") == frozenset()
