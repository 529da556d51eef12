"""Model configuration: the legacy environment's translation, slot resolution through layers, whether a slot can
run, the fallback of a routed provider, and the sealing of saved keys."""

from __future__ import annotations

import base64
import os
import stat
import textwrap
import threading
from pathlib import Path

import pytest

from openmaic.config import Config, ProviderSpec, Route, Secret, default_config, parse_config
from openmaic.errors import ConfigError
from openmaic.modelconfig.layer import Assignment, ModelLayer
from openmaic.modelconfig.legacy import LEGACY_ROUTES_MESSAGE, legacy_variables
from openmaic.modelconfig.resolve import resolve
from openmaic.modelconfig.secret_box import (
    INSTANCE_SECRET_FILE, SecretCorrupt, SecretKeyMismatch, derive, instance_key, is_sealed, open_secret, seal_secret,
)  # fmt: skip
from openmaic.models.errors import MissingApiKey, MissingModel, ProviderError
from openmaic.models.events import ModelFallbackUsed
from openmaic.models.provider import RoutedProvider, check_run_slots, check_slot

KEY = "sk-legacy-SECRET-0123456789"


def env_config(env: dict[str, str], tmp_path: Path, text: str = "") -> Config:
    return parse_config(textwrap.dedent(text), source="t.yml", env=env, base_dir=tmp_path, legacy_dir=tmp_path)


# --- environment-only deployments --------------------------------------------------------------------------------


def test_provider_keys_and_default_model_become_a_provider_and_default_slots(tmp_path):
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "DEFAULT_MODEL": "openai:gpt-4o-mini",
           "MODEL_FALLBACK": "anthropic:claude-x", "ANTHROPIC_API_KEY": "sk-ant-0123456789"}
    c = env_config(env, tmp_path)
    assert c.model_source == "environment"
    assert c.providers["openai"] == ProviderSpec(preset="openai", api_key=Secret(KEY), base_url="http://127.0.0.1:9/v1")
    assert c.slots == {}  # nothing is locked: owners may assign their own
    assert c.default_slots["llm"] == Assignment(model="openai:gpt-4o-mini", fallback="anthropic:claude-x")
    assert c.default_slots["agent"] is None  # the agent never used DEFAULT_MODEL
    assert c.route("course.outline") == Route("openai", "gpt-4o-mini")
    assert check_slot(c, "course.outline").fallback.route == "anthropic:claude-x"  # type: ignore[union-attr]
    with pytest.raises(MissingModel, match="agent is turned off"):
        check_slot(c, "agent")
    assert KEY not in repr(c) and not any(KEY in n for n in c.notices)


def test_a_bare_default_model_is_openai_and_the_environment_never_falls_back_to_the_demo(tmp_path):
    c = env_config({"OPENAI_API_KEY": KEY, "DEFAULT_MODEL": "gpt-4o"}, tmp_path)
    assert c.route("llm") == Route("openai", "gpt-4o")
    only_key = env_config({"OPENAI_API_KEY": KEY}, tmp_path)
    assert only_key.model_source == "environment" and "llm" not in only_key.default_slots
    with pytest.raises(MissingModel, match="no model is assigned to course.outline"):
        check_slot(only_key, "course.outline")
    assert any("no DEFAULT_MODEL" in n for n in only_key.notices)
    unconfigured = env_config({"DEFAULT_MODEL": "openai:gpt-4o"}, tmp_path)  # no key for openai
    with pytest.raises(MissingModel):
        check_slot(unconfigured, "llm")
    assert any("DEFAULT_MODEL uses provider \"openai\" without server configuration" in n for n in unconfigured.notices)


def test_server_providers_yml_and_media_defaults(tmp_path):
    (tmp_path / "server-providers.yml").write_text(textwrap.dedent(f"""
        providers:
          deepseek: {{apiKey: {KEY}, models: [deepseek-chat]}}
          ollama: {{baseUrl: 'http://127.0.0.1:11434/v1'}}
          nonsense: {{apiKey: x}}
        tts:
          openai-tts: {{apiKey: k1}}
        image:
          seedream: {{apiKey: k2, models: [seedream-4]}}
          qwen-image: {{apiKey: k3}}
        web-search:
          bocha: {{apiKey: k4}}
          tavily: {{apiKey: k5}}
        pdf:
          mineru: {{apiKey: k6}}
    """))
    env = {"DEEPSEEK_MODELS": "deepseek-reasoner", "DEFAULT_MODEL": "deepseek:deepseek-chat",
           "DEFAULT_IMAGE_PROVIDER": "qwen-image"}
    c = env_config(env, tmp_path)
    assert set(c.providers) == {"deepseek", "ollama", "openai-tts", "seedream", "qwen-image", "bocha", "tavily"}
    assert c.providers["deepseek"].models == ("deepseek-reasoner",)  # the environment wins field by field
    assert c.providers["ollama"].api_key is None  # keyless with a base URL
    assert c.default_slots["tts"] == "openai-tts" and c.default_slots["image"] == "qwen-image"
    assert c.default_slots["webSearch"] == "tavily"  # tavily before bocha
    assert "document" not in c.default_slots  # mineru needs its base URL
    assert any("an entry in providers has no matching preset" in n for n in c.notices)


def test_model_routes_without_openmaic_yml_stops_the_boot(tmp_path):
    with pytest.raises(ConfigError) as info:
        env_config({"MODEL_ROUTES": '{"scene-content": "openai:gpt-4o"}', "OPENAI_API_KEY": KEY}, tmp_path)
    assert str(info.value) == LEGACY_ROUTES_MESSAGE and "write the per-stage models as slots in openmaic.yml" in \
        str(info.value)
    # A file with no model sections says nothing about models: the routes would be lost all the same.
    with pytest.raises(ConfigError, match="MODEL_ROUTES does not carry over"):
        env_config({"MODEL_ROUTES": "{}"}, tmp_path, "runtime: {lease_ttl_s: 20}")
    # With the models in openmaic.yml the legacy variables are not used, and the boot says so.
    c = env_config({"MODEL_ROUTES": "{}", "OPENAI_API_KEY": KEY}, tmp_path, "slots: {llm: 'demo:x'}")
    assert c.model_source == "openmaic.yml" and "openai" not in c.providers and c.notices


@pytest.mark.parametrize("text", ["providers: [1", "- a list", "tts: 5", "speech: {}"])
def test_an_unreadable_server_providers_yml_stops_the_boot(tmp_path, text):
    (tmp_path / "server-providers.yml").write_text(text)
    with pytest.raises(ConfigError, match="server-providers.yml"):
        env_config({}, tmp_path)


def test_legacy_variables_are_recognised():
    env = {"OPENAI_API_KEY": "a", "TTS_OPENAI_BASE_URL": "b", "DEFAULT_MODEL": "c", "PATH": "/bin", "HOME": "/"}
    assert sorted(legacy_variables(env)) == ["DEFAULT_MODEL", "OPENAI_API_KEY", "TTS_OPENAI_BASE_URL"]


# --- resolution and whether a slot can run --------------------------------------------------------------------------


def test_layers_rank_deployment_then_workspace_then_default():
    c = parse_config(textwrap.dedent("""
        providers: {dep: {preset: openai, apiKey: k-dep}}
        slots: {course.outline: 'dep:locked'}
    """), source="t", env={})
    c = Config(providers=c.providers, slots=c.slots, default_slots={"llm": "demo:course"})
    workspace = ModelLayer(source="workspace", providers={"dep": ProviderSpec(preset="openai", api_key=Secret("x")),
                                                          "mine": ProviderSpec(preset="openai", api_key=Secret("y"))},
                           slots={"llm": "mine:gpt", "course.outline": "mine:other", "image": None})
    outline = resolve("course.outline", c.layers(workspace))
    assert outline.locked and outline.source == "deployment" and outline.target.route == "dep:locked"  # type: ignore[union-attr]
    llm = resolve("course.content.quiz", c.layers(workspace))
    assert (llm.source, llm.resolved_at, llm.locked) == ("workspace", "llm", False)
    # A workspace cannot shadow a provider the deployment declares: "dep" is the deployment's.
    dep = resolve("course.actions", [*c.layers(), ModelLayer(source="workspace", slots={"llm": "dep:m"})])
    assert dep.target.provider_source == "deployment" and dep.target.api_key == Secret("k-dep")  # type: ignore[union-attr]
    assert resolve("image", c.layers(workspace)).status == "disabled"
    assert resolve("image", c.layers()).status == "unassigned"
    assert resolve("course.outline", c.layers()).target.route == "dep:locked"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "slot", "error", "message"),
    [
        ("slots: {llm: 'demo:x', course.outline: null}", "course.outline", MissingModel, "course.outline is turned off"),
        ("slots: {llm: null}", "course.content.quiz", MissingModel, r"turned off \(through llm\)"),
        ("slots: {agent: 'demo:x'}", "course.outline", MissingModel, "no model is assigned to course.outline"),
        ("providers: {b: {preset: bedrock}}\nslots: {llm: 'b:claude'}", "llm", MissingModel, "cannot call for chat"),
        ("providers: {o: {preset: openai}}\nslots: {llm: 'o:gpt'}", "llm", MissingApiKey, "'o' of llm needs an API key"),
        ("providers: {o: {preset: openai, apiKey: k}, p: {preset: openai}}\nslots: {llm: {model: 'o:a', fallback: "
         "'p:b'}}", "llm", MissingApiKey, "'p' of llm needs an API key"),
    ],
)
def test_check_slot_refuses_what_cannot_run(text, slot, error, message):
    c = parse_config(text, source="t", env={})
    with pytest.raises(error, match=message) as info:
        check_slot(c, slot)
    assert info.value.error_code in ("MISSING_MODEL", "MISSING_API_KEY") and info.value.status == 400


def test_keyless_and_demo_providers_can_run_and_a_run_needs_one_content_slot():
    c = parse_config("providers: {l: {preset: ollama}}\nslots: {llm: 'l:llama3', image: demo}", source="t", env={})
    assert check_slot(c, "llm").target.provider_id == "l"  # type: ignore[union-attr]
    check_run_slots(c)
    partial = parse_config("slots: {llm: 'demo:x', course.content: null, course.content.quiz: 'demo:q'}", source="t",
                           env={})
    check_run_slots(partial)
    none = parse_config("slots: {llm: 'demo:x', course.content: null}", source="t", env={})
    with pytest.raises(MissingModel, match="course.content.slide is turned off"):
        check_run_slots(none)
    check_run_slots(default_config())  # the built-in demo
    with pytest.raises(MissingModel):
        check_run_slots(Config())  # nothing configured at all


# --- the fallback of a routed provider ------------------------------------------------------------------------------


class _Scripted:
    def __init__(self, name: str, outcome: object) -> None:
        self.name, self.outcome, self.models = name, outcome, []

    async def complete(self, model, messages, output_type, *, on_delta=None, on_retry=None):
        self.models.append(model)
        if on_delta is not None:
            on_delta("partial")
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


async def test_the_fallback_answers_when_the_primary_fails_and_says_so():
    primary = _Scripted("p", ProviderError("the model provider 'p' failed after 3 attempts (HTTP 503)"))
    fallback = _Scripted("f", "answer")
    resets: list[int] = []
    routed = RoutedProvider("course.outline", primary, "p:big", (fallback, "small", "f:small"))  # type: ignore[arg-type]
    assert await routed.complete("big", [], str, on_delta=lambda _: None, on_retry=lambda: resets.append(1)) == "answer"
    assert (primary.models, fallback.models, resets) == (["big"], ["small"], [1])
    assert routed.fallback_events() == [ModelFallbackUsed(
        slot="course.outline", failed="p:big", reason="the model provider 'p' failed after 3 attempts (HTTP 503)",
        answered="f:small")]
    ok = RoutedProvider("llm", _Scripted("p", "fine"), "p:big", (fallback, "small", "f:small"))  # type: ignore[arg-type]
    assert await ok.complete("big", [], str) == "fine" and ok.fallback_events() == []


async def test_both_failing_names_both_and_no_fallback_means_the_primary_error():
    down = ProviderError("the model provider 'p' failed after 1 attempt (HTTP 500)")
    both = RoutedProvider("llm", _Scripted("p", down), "p:a",  # type: ignore[arg-type]
                          (_Scripted("f", ProviderError("the model provider 'f' rejected the request (HTTP 401)")),
                           "b", "f:b"))  # type: ignore[arg-type]
    with pytest.raises(ProviderError, match=r"\(HTTP 500\); its fallback f:b failed too: .*HTTP 401"):
        await both.complete("a", [], str)
    assert both.fallback_events() == []
    alone = RoutedProvider("llm", _Scripted("p", down), "p:a")  # type: ignore[arg-type]
    with pytest.raises(ProviderError) as info:
        await alone.complete("a", [], str)
    assert info.value is down


# --- sealed keys ----------------------------------------------------------------------------------------------------


def test_a_sealed_value_opens_only_under_its_secret_and_its_context():
    key = derive("one-instance-secret-0123456789")
    sealed = seal_secret('{"apiKey":"sk-live-123"}', "workspace-provider:openai", key)
    assert is_sealed(sealed) and set(sealed) == {"v", "kid", "iv", "tag", "ct"} and sealed["kid"] == key.kid
    assert "sk-live" not in str(sealed) and len(base64.b64decode(sealed["iv"])) == 12
    assert open_secret(sealed, "workspace-provider:openai", key) == '{"apiKey":"sk-live-123"}'
    assert seal_secret("x", "c", key)["iv"] != seal_secret("x", "c", key)["iv"]  # a fresh IV per value
    with pytest.raises(SecretCorrupt):  # the provider id is the associated data
        open_secret(sealed, "workspace-provider:other", key)
    with pytest.raises(SecretKeyMismatch):
        open_secret(sealed, "workspace-provider:openai", derive("another-instance-secret-987654"))
    for field in ("ct", "tag", "iv"):
        raw = bytearray(base64.b64decode(sealed[field]))
        raw[0] ^= 1
        flipped = {**sealed, field: base64.b64encode(bytes(raw)).decode()}
        with pytest.raises(SecretCorrupt):
            open_secret(flipped, "workspace-provider:openai", key)
    with pytest.raises(SecretCorrupt):
        open_secret({**sealed, "ct": "not base64!"}, "workspace-provider:openai", key)


def test_the_key_derivation_is_openmaics():
    key = derive("s3cret")
    import hashlib

    expected = hashlib.sha256(b"openmaic.instance-secret:s3cret").digest()
    assert key.key == expected and key.kid == hashlib.sha256(expected).hexdigest()[:16]


def test_the_instance_secret_file_is_created_once_and_only_its_owner_reads_it(tmp_path):
    data = tmp_path / "data"
    first = instance_key(None, data)
    file = data / INSTANCE_SECRET_FILE
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert len(base64.b64decode(file.read_text().strip())) == 32
    assert instance_key(None, data).kid == first.kid  # read, not created again
    assert [p.name for p in data.iterdir()] == [INSTANCE_SECRET_FILE]  # no temporary left behind
    assert instance_key(Secret("configured-secret-0123456789"), data).kid != first.kid


def test_processes_starting_together_share_one_instance_secret(tmp_path):
    kids: list[str] = []
    threads = [threading.Thread(target=lambda: kids.append(instance_key(None, tmp_path).kid)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(kids)) == 1 and len(kids) == 8


@pytest.mark.parametrize("content", ["", "short\n", "A" * 44 + "\n"])
def test_an_incomplete_instance_secret_is_refused(tmp_path, content):
    (tmp_path / INSTANCE_SECRET_FILE).write_text(content)
    with pytest.raises(ConfigError, match="is not a complete instance secret"):
        instance_key(None, tmp_path)


def test_a_short_configured_secret_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="OPENMAIC_SECRET_KEY: too short"):
        instance_key(Secret("short"), tmp_path)
    assert not os.listdir(tmp_path)


def test_every_statement_of_the_settings_sql_is_used_by_the_store():
    import re

    from openmaic.store.queries import load_sql

    sql = load_sql("openmaic.modelconfig", "settings.sql")
    source = (Path(__file__).resolve().parents[2] / "openmaic" / "modelconfig" / "store.py").read_text("utf-8")
    assert set(sql.names()) == set(re.findall(r"\bSQL\.([a-z_]+)\b", source)) - {"names"}
