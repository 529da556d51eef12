"""A run's model per slot (openmaic.models.choices): what the owner's settings allow, and how a choice resolves."""

from __future__ import annotations

import msgspec
import pytest

from openmaic.config import parse_config
from openmaic.events.types import registry
from openmaic.modelconfig.layer import Assignment, ModelLayer, ProviderSpec, Policy
from openmaic.modelconfig.resolve import resolve
from openmaic.modelconfig.workspace import under_policy
from openmaic.models.choices import ModelNotAllowed, check_choices, run_choices, with_choices
from openmaic.runs.events import RunCreated
from openmaic.secret import Secret

DEPLOYMENT = """
providers:
  corp: {preset: openai, apiKey: corp-key-0123456789, models: [gpt-4o, gpt-4o-mini]}
  nokey: {preset: openai, models: [gpt-keyless]}
slots: {llm: 'corp:gpt-4o', course.content: 'corp:gpt-4o-mini', course.actions: 'corp:gpt-4o'}
"""
MINE = ModelLayer(source="workspace", providers={
    "mine": ProviderSpec(preset="deepseek", api_key=Secret("sk-mine-0123456789"), models=("deepseek-chat",))},
    slots={"course.agents": Assignment(model="mine:deepseek-chat", fallback="corp:gpt-4o")})


def config(policy: str = ""):
    return parse_config(DEPLOYMENT + policy, source="t", env={})


def allowed(cfg, workspace) -> dict[str, tuple[str, ...]]:
    return {c.slot: c.allowed for c in run_choices(cfg, workspace)}


def test_the_choices_are_the_usable_models_with_the_slots_own_first():
    cfg = config()
    by_slot = allowed(cfg, MINE)
    assert by_slot["course.agents"] == ("mine:deepseek-chat", "corp:gpt-4o", "corp:gpt-4o-mini")
    # The deployment sets course.content, not its kinds: a kind may still choose, its parent's model first.
    assert by_slot["course.content.slide"] == ("corp:gpt-4o-mini", "corp:gpt-4o", "mine:deepseek-chat")
    assert by_slot["course.actions"] == ("corp:gpt-4o",)  # set by the deployment: locked
    # A provider that needs a key and has none offers nothing.
    assert not any("nokey" in ref for refs in by_slot.values() for ref in refs)


def test_owners_providers_are_no_choice_when_the_policy_keeps_them_dormant():
    cfg = config("policy: {allowWorkspaceProviders: false}\n")
    dormant = under_policy(MINE, Policy(allow_workspace_providers=False), dict(cfg.providers))
    assert allowed(cfg, dormant)["course.agents"] == ("corp:gpt-4o", "corp:gpt-4o-mini")
    with pytest.raises(ModelNotAllowed) as refused:
        check_choices(cfg, dormant, {"course.agents": "mine:deepseek-chat"})
    assert refused.value.status == 400 and refused.value.error_code == "VALIDATION_FAILED"
    assert refused.value.details == {"path": "models.course.agents", "slot": "course.agents",
                                     "allowed": ["corp:gpt-4o", "corp:gpt-4o-mini"]}


def test_a_choice_resolves_as_an_assignment_of_that_slot_without_the_settings_fallback():
    cfg = config()
    chosen = check_choices(cfg, MINE, {"course.agents": "corp:gpt-4o-mini", "course.outline": " ",
                                       "course.content.quiz": "mine:deepseek-chat"})
    assert chosen == {"course.agents": "corp:gpt-4o-mini", "course.content.quiz": "mine:deepseek-chat"}
    layers = cfg.layers(with_choices(MINE, chosen))
    agents = resolve("course.agents", layers)
    assert (agents.target.route, agents.fallback) == ("corp:gpt-4o-mini", None)
    assert resolve("course.content.quiz", layers).target.route == "mine:deepseek-chat"
    assert resolve("course.content.slide", layers).target.route == "corp:gpt-4o-mini"  # untouched
    assert MINE.slots["course.agents"].fallback == "corp:gpt-4o"  # the owner's settings are not changed


@pytest.mark.parametrize(("models", "slot"), [
    ({"course.actions": "corp:gpt-4o-mini"}, "course.actions"),
    ({"course.outline": "corp:gpt-5"}, "course.outline"),
    ({"course.outline": "nokey:gpt-keyless"}, "course.outline"),
    ({"agent": "corp:gpt-4o"}, "agent"),
    ({"x" * 500: "corp:gpt-4o"}, "x" * 80),
])  # fmt: skip
def test_a_choice_not_allowed_names_the_slot(models, slot):
    with pytest.raises(ModelNotAllowed) as refused:
        check_choices(config(), MINE, models)
    assert refused.value.details["slot"] == slot and slot in refused.value.message


def test_a_run_created_before_runs_could_choose_models_reads_as_every_slot_as_in_the_settings():
    stored = b'{"course_id":"course_1","owner_id":"o","input":{"requirement":"Tides","enable_web_search":false}}'
    created = registry.decode("run.created", 2, stored)
    assert isinstance(created, RunCreated) and created.input.models == {} and not created.input.enable_web_search
    tag, version, data = registry.encode(msgspec.structs.replace(
        created, input=msgspec.structs.replace(created.input, models={"course.outline": "corp:gpt-4o"})))
    assert (tag, version) == ("run.created", 2)
    assert registry.decode(tag, version, data).input.models == {"course.outline": "corp:gpt-4o"}
