"""Config: defaults, every section, slot inheritance, and one test per class of invalid input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import msgspec
import pytest

from openmaic.config import (
    DEFAULT_SLOTS,
    KNOWN_SLOTS,
    Config,
    ProviderConfig,
    Route,
    Secret,
    default_config,
    load_config,
    parse_config,
)
from openmaic.modelconfig.layer import Assignment
from openmaic.errors import ConfigError

KEY = "sk-test-SECRET-123"
ENV = {"PROVIDER_KEY": KEY}

FULL = """
providers:
  openai: {preset: openai, apiKey: ${PROVIDER_KEY}, options: {timeoutS: 30, maxRetries: 2}}
  local:  {preset: openai-compatible, baseUrl: http://127.0.0.1:11434/v1/, models: [llama3:8b]}
  claude: {preset: anthropic, apiKey: literal-anthropic-key}
  demo:   {preset: demo, options: {latencyMs: 5}}
slots:
  llm: openai:gpt-4o-mini
  course.outline: {model: claude:claude-sonnet-4-5, fallback: openai:gpt-4o, thinking: {mode: enabled, budgetTokens: 2048}}
  course.content: local:llama3:8b
  course.content.quiz: demo:quiz
  agent: {model: openai:gpt-4o, api: openai-completions, contextWindow: 128000}
  webSearch: null
  image: demo
policy: {allowWorkspaceProviders: false}
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
    assert c.providers == {} and c.slots == {} and c.model_source == "built-in"
    assert c.default_slots == DEFAULT_SLOTS and c.default_slots["llm"] == "demo:course"
    assert c.route("course.content.slide") == Route("demo", "course")
    for root in ("image", "video", "tts", "webSearch", "asr", "document"):
        assert c.route(root) == Route("demo", None)
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
    assert openai.preset == "openai" and openai.api_key == Secret(KEY) and openai.base_url is None
    assert openai.options == {"timeoutS": 30, "maxRetries": 2}
    assert local.base_url == "http://127.0.0.1:11434/v1" and local.api_key is None and local.models == ("llama3:8b",)
    assert claude.api_key == Secret("literal-anthropic-key")
    assert demo.options == {"latencyMs": 5}
    assert c.model_source == "openmaic.yml" and c.default_slots == {} and not c.policy.allow_workspace_providers
    outline = c.slots["course.outline"]
    assert outline == Assignment(model="claude:claude-sonnet-4-5", fallback="openai:gpt-4o",
                                 thinking={"mode": "enabled", "budgetTokens": 2048})
    assert c.slots["agent"] == Assignment(model="openai:gpt-4o", api="openai-completions", context_window=128000)
    assert c.slots["webSearch"] is None and c.slots["image"] == "demo"
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
    assert c.route("agent.title") == Route("openai", "gpt-4o")
    assert c.route("image") == Route("demo", None)
    assert str(c.route("course.content")) == "local:llama3:8b"
    assert set(KNOWN_SLOTS) >= {"llm", "agent", "course.content.quiz", "image", "video", "tts", "webSearch"}
    with pytest.raises(ConfigError, match="webSearch: disabled"):
        c.route("webSearch")
    with pytest.raises(ConfigError, match="video: unassigned"):
        c.route("video")
    with pytest.raises(ValueError, match="unknown slot"):
        c.route("nope")


def test_the_demo_provider_is_always_declared():
    c = parse("slots: {llm: 'demo:x'}")
    assert c.route("course.outline") == Route("demo", "x")
    assert c.route("agent") == Route("demo", "x")  # inherited from llm
    with pytest.raises(ConfigError, match="image: unassigned"):
        c.route("image")  # a file that declares models gets no built-in defaults


def test_interpolation_and_escape():
    c = parse("server: {host: '${HOST}', data_dir: '$${HOME}/x'}", env={"HOST": "10.1.1.1"})
    assert c.server.host == "10.1.1.1" and c.server.data_dir == "${HOME}/x"


def test_an_openmaic_file_boots_as_written():
    text = """
    providers:
      openai:
        preset: openai
        apiKey: ${PROVIDER_KEY}
        models: [gpt-4o-mini, gpt-4o]
        proxy: http://proxy.internal:3128
      vendor:
        preset: kling
        credentials: {accessKeyId: ${PROVIDER_KEY}, accessKeySecret: other-secret}
      mm: {preset: minimax, apiKey: mm-key-123456}
      voice: {preset: voxcpm-tts, baseUrl: 'http://10.0.0.5:8000', options: {backend: vllm}}
    slots:
      llm: {model: openai:gpt-4o-mini, fallback: 'mm:MiniMax-M2.7'}
      agent: null
      tts: voice
      video: vendor:kling-v2
      image: 'mm:image-01'
      webSearch: mm
      asr: null
      document: null
    policy:
      allowWorkspaceProviders: true
    """
    c = parse(text)
    assert c.providers["vendor"].credentials["accessKeyId"] == Secret(KEY)
    assert c.providers["openai"].proxy == "http://proxy.internal:3128"
    assert c.route("image") == Route("mm", "image-01") and c.route("webSearch") == Route("mm", None)
    assert KEY not in repr(c) and "other-secret" not in repr(c)


def test_interpolation_of_an_empty_variable_is_an_error():
    fails("providers: {o: {preset: openai, apiKey: '${K}'}}", "providers.o.apiKey: environment variable K is not set",
          env={"K": ""})


def test_earlier_provider_keys_say_what_replaced_them():
    fails("providers: {o: {kind: openai}}", "providers.o.kind: not an openmaic.yml provider key", "preset")
    fails("providers: {o: {preset: openai, api_key: x}}", "providers.o.api_key:", "apiKey")
    fails("providers: {o: {preset: openai, timeout_s: 3}}", "providers.o.timeout_s:", "timeoutS")


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
    # The instance secret seals saved keys; it no longer signs the anonymous cookie.
    assert c.identity.mode == "anonymous" and c.identity.cookie_name == "anonymous_id"
    assert c.secret_key == Secret("0123456789abcdef-secret")
    assert "0123456789abcdef" not in repr(c)


def test_the_replica_comes_from_the_file_or_database_replica_url():
    assert parse("").database.replica_url is None  # none: every read goes to the primary
    c = parse("database: {replica_url: 'postgresql://r1/db', replica_wait_ms: 50}",
              env={"DATABASE_REPLICA_URL": "postgresql://r2/db"})
    assert (c.database.replica_url, c.database.replica_wait_ms, c.database.replica_pool_size) == \
        ("postgresql://r2/db", 50, 5)
    fails("database: {replica_wait_ms: -1}", "database.replica_wait_ms: expected an integer >= 0, got -1")


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
        ("bogus: 1", ["bogus: unknown key", "providers, slots, policy, limits"]),
        ("source: x", ["source: unknown key"]),
        ("model_source: x", ["model_source: unknown key"]),
        ("runtime: {lease_ttl: 3}", ["runtime.lease_ttl: unknown key", "lease_ttl_s"]),
        ("runtime: {step_deadlines: {outlines: 3}}", ["runtime.step_deadlines.outlines: unknown key"]),
        ("providers: {openai: {preset: openai, colour: red}}", ["providers.openai.colour: unknown key", "baseUrl"]),
        ("runtime: {lease_ttl_s: soon}", ["runtime.lease_ttl_s: expected a number > 0, got a string"]),
        ("limits: {upload_bytes: 1.5}", ["limits.upload_bytes: expected an integer > 0, got a number"]),
        ("server: {port: true}", ["server.port: expected an integer between 1 and 65535, got true or false"]),
        ("identity: {trusted_proxies: 10.0.0.1}", ["identity.trusted_proxies: expected a list"]),
        ("runtime: {lease_ttl_s: -1}", ["runtime.lease_ttl_s: expected a number > 0, got -1"]),
        ("runtime: {step_deadlines: {turn: 0}}", ["runtime.step_deadlines.turn: expected a number > 0, got 0"]),
        ("runtime: {lease_ttl_s: .inf}", ["runtime.lease_ttl_s: expected a finite number"]),
        ("server: {port: 70000}", ["server.port: expected an integer between 1 and 65535, got 70000"]),
        ("providers: [a]", ["providers: expected a mapping"]),
        ("providers: {openai: 3}", ["providers.openai: expected a mapping with keys preset"]),
        ("providers: {OpenAI: {preset: openai}}", ["providers.OpenAI: invalid provider id"]),
        ("providers: {'a:b': {preset: demo}}", ["providers.a:b: invalid provider id"]),
        ("providers: {openai: {baseUrl: 'http://x'}}", ["providers.openai.preset: required"]),
        ("providers: {openai: {preset: 5}}", ["providers.openai.preset: expected a preset id, got an integer"]),
        ("providers: {openai: {preset: gpt}}", ["providers.openai.preset: unknown preset \"gpt\"", "anthropic"]),
        ("providers: {o: {preset: openai-compatible}}", ["providers.o.baseUrl: preset \"openai-compatible\" needs"]),
        ("providers: {o: {preset: openai, baseUrl: 'ftp://x'}}", ["providers.o.baseUrl: expected an http(s) URL"]),
        ("providers: {o: {preset: openai, baseUrl: 'https://u:p@x'}}", ["providers.o.baseUrl: must not contain"]),
        ("providers: {o: {preset: openai, proxy: 7}}", ["providers.o.proxy: expected an http(s) URL"]),
        ("providers: {o: {preset: openai, apiKey: 7}}", ["providers.o.apiKey: expected a non-empty string"]),
        ("providers: {o: {preset: openai, apiKey: ''}}", ["providers.o.apiKey: expected a non-empty string"]),
        ("providers: {o: {preset: openai, models: []}}", ["providers.o.models: expected a non-empty list"]),
        ("providers: {o: {preset: openai, models: [1]}}", ["providers.o.models: expected a non-empty list"]),
        ("providers: {o: {preset: kling, credentials: {a: 1}}}", ["providers.o.credentials.a: expected a non-empty"]),
        ("providers: {o: {preset: openai, options: {'1x': 1}}}", ["providers.o.options.1x: invalid option name"]),
        ("providers: {o: {preset: openai, options: {a: [1]}}}", ["providers.o.options.a: expected a string"]),
        ("providers: {o: {preset: openai, options: {timeoutS: 0}}}", ["providers.o.options.timeoutS: expected a number > 0"]),
        ("providers: {o: {preset: openai, options: {maxRetries: 1.5}}}", ["providers.o.options.maxRetries: expected an integer"]),
        ("providers: {o: {preset: openai}, l: {preset: ollama}}\nslots: {course.outline: 'foo:m'}",
         ["slots.course.outline: provider \"foo\" is not declared under providers"]),
        ("slots: {llm: 'demo:x', course.video: 'y:z'}", ["slots.course.video: unknown slot", "content.quiz", "webSearch"]),
        ("slots: [llm]", ["slots: expected a mapping"]),
        ("slots: {llm: demo}", ["slots.llm: a chat model needs \"providerId:modelId\""]),
        ("slots: {llm: 'Demo:x'}", ["slots.llm: expected \"providerId:modelId\""]),
        ("slots: {llm: 5}", ["slots.llm: expected null, \"providerId:modelId\" or a mapping, got an integer"]),
        ("slots: {llm: {fallback: 'demo:x'}}", ["slots.llm.model: required"]),
        ("slots: {llm: {model: 'demo:x', colour: red}}", ["slots.llm.colour: unknown key", "fallback"]),
        ("slots: {llm: {model: 'demo:x', fallback: 3}}", ["slots.llm.fallback: expected \"providerId:modelId\""]),
        ("slots: {llm: {model: 'demo:x', fallback: 'nope:y'}}", ["slots.llm.fallback: provider \"nope\" is not declared"]),
        ("slots: {image: {model: demo, fallback: demo}}", ["slots.image.fallback: only language model slots"]),
        ("slots: {llm: {model: 'demo:x', api: chat}}", ["slots.llm: api and contextWindow only apply to the agent"]),
        ("slots: {agent: {model: 'demo:x', contextWindow: 0}}", ["slots.agent.contextWindow: expected an integer > 0"]),
        ("slots: {llm: {model: 'demo:x', thinking: {mode: loud}}}", ["slots.llm.thinking.mode: expected one of default"]),
        ("slots: {llm: {model: 'demo:x', thinking: {effort: 9}}}", ["slots.llm.thinking.effort: expected one of none"]),
        ("slots: {llm: {model: 'demo:x', thinking: {budgetTokens: -1}}}", ["slots.llm.thinking.budgetTokens"]),
        ("slots: {llm: {model: 'demo:x', thinking: {enabled: yes please}}}", ["slots.llm.thinking.enabled: expected true"]),
        ("slots: {llm: {model: 'demo:x', thinking: {deep: 1}}}", ["slots.llm.thinking.deep: unknown key"]),
        ("providers: {t: {preset: tavily, apiKey: k}}\nslots: {llm: 't:m'}", ["slots.llm: provider \"t\" (preset \"tavily\") does not offer chat"]),
        ("policy: {allowWorkspaceProviders: maybe}", ["policy.allowWorkspaceProviders: expected true or false"]),
        ("policy: {lockEverything: true}", ["policy.lockEverything: unknown key"]),
        ("policy: 3", ["policy: expected a mapping"]),
        ("runtime: {heartbeat_s: 10}", ["runtime.heartbeat_s: must be less than runtime.lease_ttl_s", "expire"]),
        ("runtime: {lease_ttl_s: 3, heartbeat_s: 5}", ["runtime.heartbeat_s"]),
        ("identity: {mode: anonymous, secret_key: short}", ["identity.secret_key: no longer used", "anonymous_id"]),
        ("identity: {mode: shared}", ["identity.mode: shared needs ACCESS_CODE"]),
        ("identity: {mode: trusted_header}", ["identity.trusted_proxies: required"]),
        ("identity: {trusted_proxies: [10.0.0.1, 300.1.1.1]}", ["identity.trusted_proxies[1]:", "'300.1.1.1'"]),
        ("identity: {mode: root}", ["identity.mode: expected one of single_user, token, trusted_header, anon"]),
        ("identity: {single_user_owner: 'Anon:x'}", ["identity.single_user_owner: must not start with 'anon:'"]),
        ("limits: {claims_over_quota: maybe}", ["limits.claims_over_quota: expected one of refuse, allow"]),
        ("server: {host: ''}", ["server.host: must not be empty"]),
        ("server: {allow_local_endpoints: 1}", ["server.allow_local_endpoints: expected true or false, got an integer"]),
        ("server: {allowed_hosts: [ok.example, 'https://x.example']}", ["server.allowed_hosts[1]:", "host name"]),
        ("server: {allowed_hosts: ['*.']}", ["server.allowed_hosts[0]:"]),
        ("server: {allowed_hosts: openmaic.example.org}", ["server.allowed_hosts: expected a list"]),
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


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OPENMAIC_PORT": "http"}, "OPENMAIC_PORT (server.port): expected an integer between 1 and 65535"),
        ({"OPENMAIC_PORT": "0"}, "OPENMAIC_PORT (server.port): expected an integer between 1 and 65535, got 0"),
        ({"OPENMAIC_IDENTITY_MODE": "root"}, "OPENMAIC_IDENTITY_MODE (identity.mode): expected one of"),
        ({"OPENMAIC_SECRET_KEY": "short"}, "OPENMAIC_SECRET_KEY: too short"),
        ({"OPENMAIC_HOST": " "}, "OPENMAIC_HOST (server.host): must not be empty"),
    ],
)
def test_invalid_env_override_names_the_variable(env: dict[str, str], expected: str):
    fails("", expected, env=env)


def test_openmaics_owner_variables_choose_the_mode_unless_the_file_names_a_host_method():
    shared = parse("", env={"PERSISTENCE_SHARED_OWNER_ID": "team-a", "ACCESS_CODE": "open-sesame"})
    assert (shared.identity.mode, shared.identity.single_user_owner) == ("shared", "team-a")
    assert shared.access_code == Secret("open-sesame") and "open-sesame" not in repr(shared)
    single = parse("identity: {mode: anonymous}", env={"OWNER_SINGLE_USER": "true", "OWNER_SINGLE_USER_ID": "ada"})
    assert (single.identity.mode, single.identity.single_user_owner) == ("single_user", "ada") and single.notices
    host = parse("identity: {mode: token}", env={"OWNER_SINGLE_USER": "true", "ACCESS_CODE": "c"})
    assert host.identity.mode == "token" and host.access_code == Secret("c")
    fails("", "PERSISTENCE_SHARED_OWNER_ID needs ACCESS_CODE", env={"PERSISTENCE_SHARED_OWNER_ID": "team-a"})


def test_empty_env_override_is_ignored():
    assert parse("", env={"OPENMAIC_PORT": ""}).server.port == 8000


# --- keys stay secret ---------------------------------------------------------------------------------------


def test_key_never_in_repr_or_str():
    c = parse(FULL)
    for config in (c,):
        for shown in (repr(config), str(config), repr(config.providers), str(list(config.providers.values()))):
            assert KEY not in shown and "literal-anthropic-key" not in shown
        assert "Secret('***')" in repr(config)
    assert repr(Secret(KEY)) == str(Secret(KEY)) == "Secret('***')"
    assert ProviderConfig(kind="openai", api_key=Secret(KEY)).key() == KEY
    assert KEY not in repr(ProviderConfig(kind="openai", api_key=Secret(KEY), headers={"Authorization": KEY}))


@pytest.mark.parametrize(
    "text",
    [
        f"providers: {{o: {{preset: openai, apiKey: {KEY}}}}}\nslots: {{llm: 'o:m'}}\nruntime: {{heartbeat_s: 99}}",
        f"providers: {{o: {{preset: openai, apiKey: {KEY}, baseUrl: '{KEY}'}}}}",
        f"providers: {{o: {{preset: openai, apiKey: '{KEY}'}}}}\nserver: {{host: [1\n  {KEY}: 2\n",
        f"identity: {{mode: anonymous, secret_key: {KEY}, trusted_proxies: ['{KEY}']}}",
        f"providers: {{o: {{preset: '{KEY}', apiKey: '{KEY}'}}}}",
        f"providers: {{o: {{preset: openai, apiKey: '{KEY}'}}}}\nslots: {{llm: '{KEY}'}}",
        "providers: {o: {preset: '${PROVIDER_KEY}'}}",
        "providers: {o: {preset: openai}}\nslots: {llm: '${PROVIDER_KEY}:m'}",
    ],
)
def test_key_never_in_an_error_message(text: str):
    fails(text)
