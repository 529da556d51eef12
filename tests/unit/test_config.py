"""Config: defaults, every section, slot inheritance, and one test per class of invalid input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import msgspec
import pytest

from openmaic.config import (
    KNOWN_SLOTS,
    Config,
    ProviderConfig,
    Route,
    Secret,
    default_config,
    load_config,
    parse_config,
)
from openmaic.errors import ConfigError

KEY = "sk-test-SECRET-123"
ENV = {"OPENAI_API_KEY": KEY}

FULL = """
providers:
  openai: {kind: openai, api_key: ${OPENAI_API_KEY}, timeout_s: 30, max_retries: 2}
  local:  {kind: openai, base_url: http://127.0.0.1:11434/v1/, headers: {X-Team: core}}
  claude: {kind: anthropic, api_key: literal-anthropic-key}
  demo:   {kind: demo, latency_ms: 5}
slots:
  llm: openai:gpt-4o-mini
  course.outline: claude:claude-sonnet-4-5
  course.content: local:llama3:8b
  course.content.quiz: demo:quiz
  agent: openai:gpt-4o
limits: {active_runs_per_owner: 3, waiting_runs_per_owner: 7, json_body_bytes: 2048, upload_bytes: 4096}
identity:
  mode: trusted_header
  user_header: X-Remote-User
  trusted_proxies: [10.0.0.1, 192.168.0.0/16, "::1"]
  cookie_name: owner
runtime:
  lease_ttl_s: 20
  heartbeat_s: 4.5
  claim_poll_s: 0.5
  wake_poll_s: 3
  max_unattended_attempts: 9
  shutdown_grace_s: 0
  max_actors: 8
  delta_coalesce_ms: 100
  step_retries: 1
  step_deadlines: {outline: 10, content: 11, actions: 12, agents: 13, materials: 14, turn: 15}
server: {host: 0.0.0.0, port: 9000, sse_ping_s: 5, ws_send_queue: 10, data_dir: /var/lib/openmaic}
"""


def parse(text: str, env: dict[str, str] | None = None, base_dir: Path | None = None) -> Config:
    env = ENV if env is None else env
    return parse_config(textwrap.dedent(text), source="test.yml", env=env, base_dir=base_dir)


def fails(text: str, *expected: str, env: dict[str, str] | None = None, base_dir: Path | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text, env, base_dir)
    message = str(info.value)
    for part in expected:
        assert part in message
    assert KEY not in message
    return message


# --- valid input ---------------------------------------------------------------------------------------------


def test_defaults():
    c = default_config()
    assert c.source == "<defaults>"
    assert list(c.providers) == ["demo"] and c.providers["demo"].kind == "demo"
    assert c.slots == {"llm": "demo:course", "agent": "demo:agent"}
    assert c.route("course.content.slide") == Route("demo", "course")
    assert c.route("agent") == Route("demo", "agent")
    assert (c.runtime.lease_ttl_s, c.runtime.heartbeat_s, c.runtime.claim_poll_s) == (10, 2, 1)
    assert c.runtime.step_deadlines.outline == 300 and c.runtime.step_deadlines.content == 60
    assert c.runtime.max_actors == 32 and c.runtime.delta_coalesce_ms == 150
    assert (c.server.host, c.server.port, c.server.sse_ping_s) == ("127.0.0.1", 8000, 25)
    assert c.identity.mode == "single_user" and c.identity.single_user_owner == "local"
    assert c.limits.active_runs_per_owner == 2 and c.limits.waiting_runs_per_owner == 10


def test_empty_file_and_empty_sections_mean_defaults():
    assert parse("") == msgspec.structs.replace(default_config(), source="test.yml")
    c = parse("# nothing yet\nserver:\nruntime:\n")
    assert c.server == default_config().server and c.providers == default_config().providers


def test_every_section_decoded():
    c = parse(FULL)
    openai, local, claude, demo = (c.providers[n] for n in ("openai", "local", "claude", "demo"))
    assert openai.base_url == "https://api.openai.com/v1" and openai.key() == KEY
    assert (openai.timeout_s, openai.max_retries) == (30.0, 2)
    assert local.base_url == "http://127.0.0.1:11434/v1" and local.key() is None
    assert local.headers == {"X-Team": "core"}
    assert claude.base_url == "https://api.anthropic.com" and claude.key() == "literal-anthropic-key"
    assert demo.latency_ms == 5 and demo.base_url is None
    assert c.limits.active_runs_per_owner == 3 and c.limits.upload_bytes == 4096
    assert c.identity.mode == "trusted_header" and c.identity.user_header == "X-Remote-User"
    assert [str(n) for n in c.identity.proxy_networks()] == ["10.0.0.1/32", "192.168.0.0/16", "::1/128"]
    assert c.identity.cookie_name == "owner"
    rt = c.runtime
    assert (rt.lease_ttl_s, rt.heartbeat_s, rt.claim_poll_s, rt.wake_poll_s) == (20, 4.5, 0.5, 3)
    assert (rt.max_unattended_attempts, rt.shutdown_grace_s, rt.max_actors) == (9, 0, 8)
    assert (rt.delta_coalesce_ms, rt.step_retries) == (100, 1)
    assert rt.step_deadlines.turn == 15 and rt.step_deadlines.materials == 14
    assert c.server.host == "0.0.0.0" and c.server.port == 9000 and c.server.data_dir == "/var/lib/openmaic"
    assert c.source == "test.yml"


def test_route_inheritance():
    c = parse(FULL)
    assert c.route("llm") == Route("openai", "gpt-4o-mini")
    assert c.route("course.outline") == Route("claude", "claude-sonnet-4-5")
    assert c.route("course.agents") == Route("openai", "gpt-4o-mini")
    assert c.route("course.actions") == Route("openai", "gpt-4o-mini")
    assert c.route("course.content") == Route("local", "llama3:8b")  # the model keeps its colons
    assert c.route("course.content.slide") == Route("local", "llama3:8b")
    assert c.route("course.content.interactive") == Route("local", "llama3:8b")
    assert c.route("course.content.quiz") == Route("demo", "quiz")
    assert c.route("agent") == Route("openai", "gpt-4o")
    assert str(c.route("course.content")) == "local:llama3:8b"
    assert set(KNOWN_SLOTS) >= {"llm", "agent", "course.content.quiz"}
    with pytest.raises(ValueError, match="unknown slot"):
        c.route("nope")


def test_providers_absent_means_demo_and_slots_may_use_it():
    c = parse("slots: {llm: 'demo:x'}")
    assert c.route("course.outline") == Route("demo", "x")


def test_interpolation_and_escape():
    c = parse("server: {host: '${HOST}', data_dir: '$${HOME}/x'}", env={"HOST": "10.1.1.1"})
    assert c.server.host == "10.1.1.1" and c.server.data_dir == "${HOME}/x"


def test_api_key_file_is_read_relative_to_the_config(tmp_path: Path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "openai").write_text(KEY + "\n")
    c = parse("providers: {o: {kind: openai, api_key_file: keys/openai}}\nslots: {llm: 'o:m'}", base_dir=tmp_path)
    assert c.providers["o"].key() == KEY
    fails("providers: {o: {kind: openai, api_key_file: missing}}", "providers.o.api_key_file", base_dir=tmp_path)


def test_env_overrides():
    env = {
        "OPENMAIC_HOST": "0.0.0.0",
        "OPENMAIC_PORT": "9100",
        "OPENMAIC_DATA_DIR": "/data",
        "OPENMAIC_IDENTITY_MODE": "anonymous",
        "OPENMAIC_SECRET_KEY": "0123456789abcdef-secret",
    }
    c = parse("server: {port: 1234}", env=env)
    assert (c.server.host, c.server.port, c.server.data_dir) == ("0.0.0.0", 9100, "/data")
    assert c.identity.mode == "anonymous" and c.identity.secret_key == Secret("0123456789abcdef-secret")
    assert "0123456789abcdef" not in repr(c)


def test_load_config_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).source == "<defaults>"
    (tmp_path / "openmaic.yml").write_text("server: {port: 8101}\n")
    assert load_config(env={}).server.port == 8101
    other = tmp_path / "other.yml"
    other.write_text("server: {port: 8102}\n")
    assert load_config(env={"OPENMAIC_CONFIG": str(other)}).server.port == 8102
    assert load_config(other, env={}).source == str(other)
    with pytest.raises(ConfigError, match="OPENMAIC_CONFIG.*nope.yml"):
        load_config(env={"OPENMAIC_CONFIG": str(tmp_path / "nope.yml")})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path, env={})


# --- invalid input: each message names the key path ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bogus: 1", ["bogus: unknown key", "providers, slots, limits"]),
        ("source: x", ["source: unknown key"]),
        ("runtime: {lease_ttl: 3}", ["runtime.lease_ttl: unknown key", "lease_ttl_s"]),
        ("runtime: {step_deadlines: {outlines: 3}}", ["runtime.step_deadlines.outlines: unknown key"]),
        ("providers: {openai: {kind: openai, colour: red}}", ["providers.openai.colour: unknown key"]),
        ("runtime: {lease_ttl_s: soon}", ["runtime.lease_ttl_s: expected a number > 0, got a string"]),
        ("limits: {upload_bytes: 1.5}", ["limits.upload_bytes: expected an integer > 0, got a number"]),
        ("server: {port: true}", ["server.port: expected an integer between 1 and 65535, got true or false"]),
        ("identity: {trusted_proxies: 10.0.0.1}", ["identity.trusted_proxies: expected a list"]),
        ("runtime: {lease_ttl_s: -1}", ["runtime.lease_ttl_s: expected a number > 0, got -1"]),
        ("runtime: {step_deadlines: {turn: 0}}", ["runtime.step_deadlines.turn: expected a number > 0, got 0"]),
        ("runtime: {lease_ttl_s: .inf}", ["runtime.lease_ttl_s: expected a finite number"]),
        ("server: {port: 70000}", ["server.port: expected an integer between 1 and 65535, got 70000"]),
        ("providers: {p: {kind: demo, max_retries: -1}}", ["providers.p.max_retries: expected an integer >= 0"]),
        ("providers: {openai: {kind: gpt}}", ["providers.openai.kind: expected one of openai, anthropic, demo"]),
        ("providers: {openai: {base_url: 'http://x'}}", ["providers.openai.kind: required"]),
        ("providers: {o: {kind: openai, base_url: 'ftp://x'}}", ["providers.o.base_url: expected an http(s) URL"]),
        ("providers: {'a:b': {kind: demo}}", ["providers.a:b: a provider name"]),
        (
            "providers: {openai: {kind: openai}, local: {kind: openai}}\n"
            "slots: {course.outline: 'foo:m', llm: 'openai:m'}",
            ["slots.course.outline: unknown provider 'foo' (configured: openai, local)"],
        ),
        ("providers: {openai: {kind: openai}}", ["slots.llm: unknown provider 'demo'", "slots is not set"]),
        ("slots: {agent: 'demo:a'}", ["slots.llm: required"]),
        ("slots: {llm: 'demo:x', course.video: 'y:z'}", ["slots.course.video: unknown slot", "content.quiz"]),
        ("slots: {llm: gpt-4o}", ["slots.llm: expected 'provider:model', got 'gpt-4o'"]),
        ("slots: {llm: 'demo:'}", ["slots.llm: expected 'provider:model'"]),
        ("slots: {llm: 5}", ["slots.llm: expected a route 'provider:model', got an integer"]),
        ("runtime: {heartbeat_s: 10}", ["runtime.heartbeat_s: must be less than runtime.lease_ttl_s", "expire"]),
        ("runtime: {lease_ttl_s: 3, heartbeat_s: 5}", ["runtime.heartbeat_s"]),
        ("identity: {mode: anonymous}", ["identity.secret_key: required when identity.mode is anonymous"]),
        ("identity: {mode: anonymous, secret_key: short}", ["identity.secret_key: too short"]),
        ("identity: {mode: trusted_header}", ["identity.trusted_proxies: required"]),
        ("identity: {trusted_proxies: [10.0.0.1, 300.1.1.1]}", ["identity.trusted_proxies[1]:", "'300.1.1.1'"]),
        ("identity: {mode: root}", ["identity.mode: expected one of single_user, token, trusted_header, anon"]),
        ("server: {host: ''}", ["server.host: must not be empty"]),
        ("server: {data_dir: '${DATA}'}", ["server.data_dir: environment variable DATA is not set"]),
        ("server: {data_dir: '${1x}'}", ["server.data_dir:", "$${"]),
        ("- a\n- b", ["top level must be a mapping", "got a list"]),
        ("just text", ["top level must be a mapping", "got a string"]),
        ("server: [1", ["test.yml", "invalid YAML at line 1"]),
        ("server:\n  host: a\n   port: 1\n", ["test.yml", "invalid YAML at line 3"]),
    ],
)
def test_invalid(text: str, expected: list[str]):
    fails(text, *expected)


def test_error_carries_the_key_path_and_source():
    with pytest.raises(ConfigError) as info:
        parse("runtime: {lease_ttl_s: -1}")
    assert info.value.details == {"key": "runtime.lease_ttl_s", "source": "test.yml"}
    assert info.value.code == "invalid_config"


def test_both_api_key_and_api_key_file(tmp_path: Path):
    (tmp_path / "k").write_text("other")
    fails(
        "providers: {o: {kind: openai, api_key: '${OPENAI_API_KEY}', api_key_file: k}}",
        "providers.o.api_key_file: give either api_key or api_key_file",
        base_dir=tmp_path,
    )


def test_empty_api_key_from_an_empty_variable():
    fails("providers: {o: {kind: openai, api_key: '${K}'}}", "providers.o.api_key: is empty", env={"K": ""})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OPENMAIC_PORT": "http"}, "OPENMAIC_PORT (server.port): expected an integer between 1 and 65535"),
        ({"OPENMAIC_PORT": "0"}, "OPENMAIC_PORT (server.port): expected an integer between 1 and 65535, got 0"),
        ({"OPENMAIC_IDENTITY_MODE": "root"}, "OPENMAIC_IDENTITY_MODE (identity.mode): expected one of"),
        ({"OPENMAIC_SECRET_KEY": "short", "OPENMAIC_IDENTITY_MODE": "anonymous"}, "OPENMAIC_SECRET_KEY (identity"),
        ({"OPENMAIC_HOST": " "}, "OPENMAIC_HOST (server.host): must not be empty"),
    ],
)
def test_invalid_env_override_names_the_variable(env: dict[str, str], expected: str):
    fails("", expected, env=env)


def test_empty_env_override_is_ignored():
    assert parse("", env={"OPENMAIC_PORT": ""}).server.port == 8000


# --- keys stay secret ---------------------------------------------------------------------------------------


def test_key_never_in_repr_or_str(tmp_path: Path):
    (tmp_path / "k").write_text(KEY)
    text = FULL.replace("local:  {kind: openai,", f"local:  {{kind: openai, headers: {{Authorization: '{KEY}'}},")
    text = text.replace("headers: {X-Team: core}}", "}") + "\n"
    c = parse(text)
    assert c.providers["local"].headers == {"Authorization": KEY}
    from_file = parse("providers: {o: {kind: openai, api_key_file: k}}\nslots: {llm: 'o:m'}", base_dir=tmp_path)
    for config in (c, from_file):
        for shown in (repr(config), str(config), repr(config.providers), str(list(config.providers.values()))):
            assert KEY not in shown
        assert "Secret('***')" in repr(config)
    assert repr(Secret(KEY)) == str(Secret(KEY)) == "Secret('***')"
    assert ProviderConfig(kind="openai", api_key=Secret(KEY)).key() == KEY


@pytest.mark.parametrize(
    "text",
    [
        f"providers: {{o: {{kind: openai, api_key: {KEY}}}}}\nslots: {{llm: 'o:m'}}\nruntime: {{heartbeat_s: 99}}",
        f"providers: {{o: {{kind: openai, api_key: {KEY}, base_url: '{KEY}'}}}}",
        f"providers: {{o: {{kind: openai, api_key: '{KEY}'}}}}\nserver: {{host: [1\n  {KEY}: 2\n",
        f"identity: {{mode: anonymous, secret_key: {KEY}, trusted_proxies: ['{KEY}']}}",
        f"providers: {{o: {{kind: openai, api_key: '{KEY}', headers: {{'{KEY} x': v}}}}}}\nslots: {{llm: 'o:m'}}",
        f"providers: {{o: {{kind: openai, api_key: '{KEY}', api_key_file: '{KEY}'}}}}",
    ],
)
def test_key_never_in_an_error_message(text: str):
    fails(text)
