"""The Models page's service: the view (keys write-only), changes and their refusals, and the import."""

from __future__ import annotations

import msgspec
import pytest

from openmaic.config import Config, ProviderSpec, Secret, parse_config
from openmaic.modelconfig.layer import ModelLayer
from openmaic.modelconfig.settings import SettingsRefused, apply_change, import_proposal, mask_key, settings_view
from openmaic.modelconfig.store import StoredSettings

KEY = "sk-owner-SECRET-0123456789"
DEPLOYMENT = parse_config("""
providers: {corp: {preset: openai, apiKey: corp-key-0123456789, baseUrl: 'https://llm.corp.internal/v1'}}
slots: {llm: 'corp:gpt-4o', course.outline: 'corp:gpt-4o'}
""", source="t", env={})


def stored(layer: ModelLayer, revision: int = 1, unreadable: frozenset[str] = frozenset()) -> StoredSettings:
    return StoredSettings(layer=layer, revision=revision, unreadable=unreadable, sealed={})


def change(config: Config, current: ModelLayer | None, body: dict) -> ModelLayer:
    return apply_change(config, current, body)[0]


def test_the_view_shows_keys_only_as_a_mask_and_locks_the_deployments_slots():
    mine = change(DEPLOYMENT, None, {"kind": "provider", "id": "mine", "preset": "deepseek", "apiKey": KEY})
    mine = change(DEPLOYMENT, mine, {"kind": "slots", "set": {"course.actions": "mine:deepseek-chat"}})
    view = settings_view(DEPLOYMENT, stored(mine, unreadable=frozenset({"gone"})))
    text = msgspec.json.encode(view).decode()
    assert KEY not in text and "corp-key" not in text and "llm.corp.internal" not in text
    own = next(p for p in view["providers"] if p["id"] == "mine")
    assert own["source"] == "workspace" and own["key"] == {"set": True, "mask": "…6789"}
    assert {p["id"]: p["source"] for p in view["providers"]}["corp"] == "deployment"
    slots = {s["slot"]: s for s in view["slots"]}
    assert slots["course.outline"]["locked"] and not slots["course.actions"]["locked"]
    assert slots["course.actions"]["assignment"] == "mine:deepseek-chat"
    assert slots["course.actions"]["effective"] == {"status": "assigned", "resolvedAt": "course.actions",
                                                    "source": "workspace", "providerId": "mine",
                                                    "providerSource": "workspace", "presetId": "deepseek",
                                                    "modelId": "deepseek-chat"}
    assert slots["course.content.quiz"]["effective"]["resolvedAt"] == "llm"
    assert slots["image"]["effective"] == {"status": "unassigned"}
    assert view["revision"] == 1 and view["policy"] == {"allowWorkspaceProviders": True} and view["presets"]
    assert [s["slot"] for s in view["slots"]][:3] == ["llm", "course.research", "course.outline"]
    assert mask_key("short") == "…"


def test_an_empty_key_removes_it_and_the_slots_that_needed_it_follow_their_parents():
    mine = change(DEPLOYMENT, None, {"kind": "provider", "id": "mine", "preset": "deepseek", "apiKey": KEY})
    mine = change(DEPLOYMENT, mine, {"kind": "slots", "set": {"course.actions": "mine:x"}})
    kept = change(DEPLOYMENT, mine, {"kind": "provider", "id": "mine", "preset": "deepseek"})  # apiKey omitted
    assert kept.providers["mine"].api_key == Secret(KEY)
    gone, cleared = apply_change(DEPLOYMENT, mine, {"kind": "provider", "id": "mine", "preset": "deepseek",
                                                    "apiKey": ""})
    assert gone.providers["mine"].api_key is None and "course.actions" not in gone.slots and cleared == ["mine"]
    removed, cleared = apply_change(DEPLOYMENT, mine, {"kind": "remove-provider", "id": "mine"})
    assert removed.providers == {} and removed.slots == {} and cleared == ["mine"]


def test_a_key_stays_with_the_endpoint_and_preset_it_was_entered_for():
    own = change(DEPLOYMENT, None, {"kind": "provider", "id": "own", "preset": "openai-compatible", "apiKey": KEY,
                                    "baseUrl": "https://a.example/v1"})
    own = change(DEPLOYMENT, own, {"kind": "slots", "set": {"course.actions": "own:m"}})
    same, cleared = apply_change(DEPLOYMENT, own, {"kind": "provider", "id": "own", "preset": "openai-compatible",
                                                   "baseUrl": "https://a.example/v1", "models": ["m"]})
    assert same.providers["own"].api_key == Secret(KEY) and cleared == []
    moved, cleared = apply_change(DEPLOYMENT, own, {"kind": "provider", "id": "own", "preset": "openai-compatible",
                                                    "baseUrl": "https://b.example/v1"})
    assert moved.providers["own"].api_key is None and cleared == ["own"]
    assert moved.slots == own.slots  # the assignments stay: a key entered again serves them at once
    rekeyed, cleared = apply_change(DEPLOYMENT, own, {"kind": "provider", "id": "own", "preset": "openai-compatible",
                                                      "baseUrl": "https://b.example/v1", "apiKey": KEY + "2"})
    assert rekeyed.providers["own"].api_key == Secret(KEY + "2") and cleared == []
    plain = change(DEPLOYMENT, None, {"kind": "provider", "id": "plain", "preset": "openai", "apiKey": KEY})
    swapped, cleared = apply_change(DEPLOYMENT, plain, {"kind": "provider", "id": "plain", "preset": "deepseek"})
    assert swapped.providers["plain"].api_key is None and cleared == ["plain"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"kind": "slots", "set": {"course.video": "corp:x"}}, "UNKNOWN_SLOT"),
        ({"kind": "slots", "clear": ["nope"]}, "UNKNOWN_SLOT"),
        ({"kind": "slots", "set": {"course.outline": "corp:x"}}, "SLOT_LOCKED"),
        ({"kind": "slots", "set": {"course.actions": "ghost:x"}}, "INVALID_ASSIGNMENT"),
        ({"kind": "slots", "set": {"course.actions": 5}}, "INVALID_ASSIGNMENT"),
        ({"kind": "slots", "set": {"course.actions": {"model": "corp:x", "colour": 1}}}, "INVALID_ASSIGNMENT"),
        ({"kind": "slots", "set": "llm"}, "INVALID_SETTINGS"),
        ({"kind": "slots", "bogus": 1}, "INVALID_SETTINGS"),
        ({"kind": "provider", "id": "corp", "preset": "openai"}, "PROVIDER_RESERVED"),
        ({"kind": "provider", "id": "demo", "preset": "openai"}, "PROVIDER_RESERVED"),
        ({"kind": "provider", "id": "Bad Id", "preset": "openai"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "nope"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "bedrock"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "openai-compatible"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "openai", "baseUrl": "http://127.0.0.1:8/v1"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "openai", "baseUrl": "http://10.0.0.7/v1"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "openai", "baseUrl": "https://u:p@api.example/v1"},
         "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "openai", "proxy": "http://p"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "tavily", "baseUrl": "https://search.example"}, "INVALID_PROVIDER"),
        ({"kind": "provider", "id": "x", "preset": "openai", "apiKey": 5}, "INVALID_PROVIDER"),
        ({"kind": "remove-provider", "id": "corp"}, "UNKNOWN_PROVIDER"),
        ({"kind": "rename"}, "INVALID_REQUEST"),
        ("slots", "INVALID_REQUEST"),
    ],
)
def test_refusals_carry_openmaics_codes(body, code):
    with pytest.raises(SettingsRefused) as info:
        apply_change(DEPLOYMENT, None, body)
    assert info.value.error_code == code and info.value.status == (409 if code == "SLOT_LOCKED" else 400)


def test_a_policy_without_workspace_providers():
    closed = parse_config("providers: {corp: {preset: openai, apiKey: k}}\nslots: {llm: 'corp:m'}\n"
                          "policy: {allowWorkspaceProviders: false}", source="t", env={})
    with pytest.raises(SettingsRefused) as info:
        apply_change(closed, None, {"kind": "provider", "id": "mine", "preset": "deepseek", "apiKey": KEY})
    assert info.value.error_code == "PROVIDERS_NOT_ALLOWED"
    kept = ModelLayer(source="workspace", providers={"mine": ProviderSpec(preset="deepseek", api_key=Secret(KEY))})
    with pytest.raises(SettingsRefused, match="cannot use a workspace provider"):
        apply_change(closed, kept, {"kind": "slots", "set": {"agent": "mine:x"}})
    assert change(closed, kept, {"kind": "slots", "set": {"agent": "corp:other"}}).slots == {"agent": "corp:other"}
    assert settings_view(closed, None)["presets"] == []


def test_local_endpoints_are_allowed_only_when_the_server_says_so():
    local = parse_config("server: {allow_local_endpoints: true}", source="t", env={})
    body = {"kind": "provider", "id": "lab", "preset": "openai-compatible", "baseUrl": "http://127.0.0.1:8/v1"}
    assert change(local, None, body).providers["lab"].base_url == "http://127.0.0.1:8/v1"


def test_the_import_keeps_what_exists_and_repeating_it_changes_nothing():
    proposal = {"providers": {"mine": {"preset": "deepseek", "apiKey": KEY}, "corp": {"preset": "openai"},
                              "odd": {"preset": "deepseek", "colour": 1}, "bad": {"preset": "nope"}},
                "slots": {"course.actions": "mine:x", "course.outline": "mine:y", "agent": "ghost:z"}}
    layer, imported, skipped = import_proposal(DEPLOYMENT, None, proposal)
    assert imported == [{"kind": "provider", "id": "mine"}, {"kind": "slot", "id": "course.actions"}]
    assert {(s["id"], s["code"]) for s in skipped} == {("corp", "PROVIDER_RESERVED"), ("odd", "MALFORMED"),
                                                       ("bad", "INVALID_PROVIDER"), ("course.outline", "SLOT_LOCKED"),
                                                       ("agent", "INVALID_ASSIGNMENT")}
    again, imported2, skipped2 = import_proposal(DEPLOYMENT, layer, proposal)
    assert again == layer and imported2 == []
    assert {(s["id"], s["code"]) for s in skipped2} >= {("mine", "EXISTS_SAME"), ("course.actions", "EXISTS")}
    other = {"providers": {"mine": {"preset": "deepseek", "apiKey": "sk-another-key-000000"}}}
    assert import_proposal(DEPLOYMENT, layer, other)[2][0]["code"] == "EXISTS_DIFFERENT"
    assert KEY not in str(skipped) + str(skipped2)
