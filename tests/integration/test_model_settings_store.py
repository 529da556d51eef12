"""Owners' model settings in PostgreSQL: keys sealed apart from the settings, never stored in the clear, reported
unreadable (and kept) under another instance secret, refused when damaged, and written by compare-and-swap."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest

from openmaic.config import Config, ProviderSpec, Secret, default_config
from openmaic.events.log import EventLog
from openmaic.modelconfig.layer import Assignment, ModelLayer, Policy
from openmaic.modelconfig.secret_box import SecretCorrupt, derive, open_secret, process_instance_key
from openmaic.modelconfig.store import SettingsConflict, read_settings, save_settings, secret_context
from openmaic.models.errors import MissingApiKey, MissingModel
from openmaic.models.provider import ModelRouter, check_run_for_owner, settings_reader
from openmaic.runs.events import RunInput
from openmaic.runs.kind import GenerationKind
from openmaic.runs.service import RunService
from tests.fakes.provider_server import Text, open_fake_provider
from tests.runtime import FAST, open_worker, wait_for

KEY = "sk-workspace-LIVE-key-0123456789abcdef"
CRED = "cred-SECRET-value-9876543210"
INSTANCE = derive("the-instance-secret-0123456789")


def layer(key: str | None = KEY) -> ModelLayer:
    return ModelLayer(source="workspace", providers={
        "mine": ProviderSpec(preset="openai-compatible", base_url="http://10.1.2.3:8000/v1",
                             api_key=Secret(key) if key else None, models=("llama3",)),
        "kl": ProviderSpec(preset="kling", credentials={"accessKeyId": Secret("AKID-public"),
                                                        "accessKeySecret": Secret(CRED)}),
    }, slots={"llm": Assignment(model="mine:llama3", fallback="demo:course"), "image": None})


async def test_round_trip_and_no_key_bytes_in_the_database(db):
    assert await read_settings(db, "alice", INSTANCE) is None
    assert await save_settings(db, "alice", layer(), None, INSTANCE) == 1
    stored = await read_settings(db, "alice", INSTANCE)
    assert stored is not None and stored.revision == 1 and stored.unreadable == frozenset()
    assert stored.layer.providers["mine"].api_key == Secret(KEY)
    assert stored.layer.providers["kl"].credentials["accessKeySecret"] == Secret(CRED)
    assert stored.layer.slots == layer().slots
    # Read the table as a backup would see it: the key is in no column, in no encoding.
    row = await db.fetchrow("SELECT owner_id, config::text AS c, secrets::text AS s, revision FROM model_settings")
    dump = "".join(str(v) for v in row.values())
    for secret in (KEY, CRED):
        for form in (secret, base64.b64encode(secret.encode()).decode(), secret.encode().hex()):
            assert form not in dump
    sealed = msgspec.json.decode(row["s"])
    assert set(sealed) == {"mine", "kl"} and sealed["mine"]["kid"] == INSTANCE.kid
    assert "apiKey" not in row["c"] and "credentials" not in row["c"] and "10.1.2.3" in row["c"]


async def test_a_changed_instance_secret_reports_unreadable_and_keeps_the_key(db):
    await save_settings(db, "bob", layer(), None, INSTANCE)
    other = derive("a-rotated-instance-secret-42424242")
    stored = await read_settings(db, "bob", other)
    assert stored is not None and stored.unreadable == frozenset({"mine", "kl"})
    assert stored.layer.providers["mine"].api_key is None  # nothing is made up
    # A save under the new secret that brings no new key keeps the sealed value untouched ...
    await save_settings(db, "bob", layer(key=None), 1, other, current=stored)
    assert (await read_settings(db, "bob", INSTANCE)).layer.providers["mine"].api_key == Secret(KEY)  # type: ignore[union-attr]
    # ... unless that provider's key is removed on purpose.
    again = await read_settings(db, "bob", other)
    await save_settings(db, "bob", layer(key=None), 2, other, current=again, clear_keys=["mine"])
    back = await read_settings(db, "bob", INSTANCE)
    assert back is not None and back.layer.providers["mine"].api_key is None
    assert back.unreadable == {"kl"}  # its credentials came with the save, so they are sealed under the new secret


async def test_a_flipped_byte_is_refused(db):
    await save_settings(db, "carol", layer(), None, INSTANCE)
    row = await db.fetchrow("SELECT secrets::text AS s FROM model_settings WHERE owner_id = 'carol'")
    sealed = msgspec.json.decode(row["s"])
    ct = bytearray(base64.b64decode(sealed["mine"]["ct"]))
    ct[len(ct) // 2] ^= 0x40
    sealed["mine"]["ct"] = base64.b64encode(bytes(ct)).decode()
    await db.execute("UPDATE model_settings SET secrets = $1::jsonb WHERE owner_id = 'carol'",
                     msgspec.json.encode(sealed).decode())
    with pytest.raises(SecretCorrupt):
        open_secret(sealed["mine"], secret_context("mine"), INSTANCE)
    stored = await read_settings(db, "carol", INSTANCE)
    assert stored is not None and stored.unreadable == frozenset({"mine"})
    assert stored.layer.providers["mine"].api_key is None and stored.layer.providers["kl"].credentials


async def test_a_sealed_key_moved_to_another_provider_does_not_open(db):
    await save_settings(db, "dave", layer(), None, INSTANCE)
    row = await db.fetchrow("SELECT secrets::text AS s FROM model_settings WHERE owner_id = 'dave'")
    sealed = msgspec.json.decode(row["s"])
    sealed["kl"] = sealed["mine"]  # bound to workspace-provider:mine
    await db.execute("UPDATE model_settings SET secrets = $1::jsonb WHERE owner_id = 'dave'",
                     msgspec.json.encode(sealed).decode())
    assert (await read_settings(db, "dave", INSTANCE)).unreadable == frozenset({"kl"})  # type: ignore[union-attr]


async def test_stale_revisions_are_refused(db):
    await save_settings(db, "erin", layer(), None, INSTANCE)
    with pytest.raises(SettingsConflict):
        await save_settings(db, "erin", layer(), None, INSTANCE)  # a second "first" save
    current = await read_settings(db, "erin", INSTANCE)
    assert await save_settings(db, "erin", layer(), 1, INSTANCE, current=current) == 2
    with pytest.raises(SettingsConflict):
        await save_settings(db, "erin", layer(), 1, INSTANCE, current=current)  # the row moved on to 2
    assert (await read_settings(db, "erin", INSTANCE)).revision == 2  # type: ignore[union-attr]


# --- a run uses its owner's own settings, as the deployment's policy allows ----------------------------------------

OUTLINE = {"languageDirective": "Teach in English.", "courseTitle": "Alice's own model", "outlines": [
    {"type": "slide", "title": "One", "description": "g", "keyPoints": []},
    {"type": "quiz", "title": "Two", "description": "g", "keyPoints": []},
]}  # fmt: skip


async def _outline_of(db_url: str, log: EventLog, cfg: Config, owner: str) -> str:
    svc = RunService(log, cfg)
    snap = await svc.create_run(owner, "c1", RunInput(requirement="Tides", outline_review="wait"))
    kind = GenerationKind(cfg, retry_backoff_s=0.05, admission_poll_s=0.2)
    async with open_worker(db_url, cfg.runtime, kinds={"generation": kind}, config=cfg,
                           model_settings=lambda db: settings_reader(cfg, db, INSTANCE)):
        async def proposed() -> bool:
            return (await svc.snapshot(owner, snap.id)).state in ("awaiting_outline_confirmation", "paused")
        await wait_for(proposed, timeout=30)
    return (await svc.snapshot(owner, snap.id)).title


@pytest.mark.parametrize("allowed", [True, False])
async def test_a_run_answers_from_its_owners_provider_when_the_policy_allows(db, db_url, allowed):
    async with open_fake_provider() as fake:
        mine = ModelLayer(source="workspace", providers={
            "mine": ProviderSpec(preset="openai-compatible", base_url=fake.openai_url, api_key=Secret(KEY),
                                 options={"maxRetries": 0})}, slots={"course.outline": "mine:gpt-mine"})
        await save_settings(db, "alice", mine, None, INSTANCE)
        # The fake listens on loopback, which an owner's endpoint may reach only where the operator allows it.
        base = default_config()
        cfg = msgspec.structs.replace(base, runtime=FAST, policy=Policy(allow_workspace_providers=allowed),
                                      server=msgspec.structs.replace(base.server, allow_local_endpoints=True))
        fake.push(Text(json.dumps(OUTLINE)))
        log = EventLog(db)
        title = await _outline_of(db_url, log, cfg, "alice")
        if allowed:
            assert title == "Alice's own model"
            assert [r.body["model"] for r in fake.requests] == ["gpt-mine"]
            assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
        else:  # dormant: the outline slot follows its parent again, the built-in demo
            assert fake.requests == [] and title != "Alice's own model"
        # Another owner never sees Alice's settings.
        assert await _outline_of(db_url, log, cfg, "bob") != "Alice's own model"
        assert len(fake.requests) == (1 if allowed else 0)


async def test_submit_checks_see_the_owners_settings(db):
    reader = settings_reader(default_config(), db, INSTANCE)
    router = ModelRouter(default_config(), settings=reader)
    await router.check_run("carol")  # the built-in demo
    off = ModelLayer(source="workspace", slots={"course.outline": None})
    await save_settings(db, "carol", off, None, INSTANCE)
    with pytest.raises(MissingModel, match="course.outline is turned off"):
        await router.check_run("carol")
    keyless = ModelLayer(source="workspace", providers={"o": ProviderSpec(preset="openai")},
                         slots={"course.actions": "o:gpt"})
    await save_settings(db, "dan", keyless, None, INSTANCE)
    with pytest.raises(MissingApiKey, match="'o' of course.actions needs an API key"):
        await router.check_run("dan")
    await router.check_run("erin")  # no settings at all


async def test_the_submit_check_of_the_api_process_reads_the_owners_settings(db, tmp_path):
    cfg = msgspec.structs.replace(default_config(), server=msgspec.structs.replace(default_config().server,
                                                                                    data_dir=str(tmp_path)))
    await check_run_for_owner(cfg, db, "fay")
    key = process_instance_key(cfg.secret_key, str(tmp_path))
    await save_settings(db, "fay", ModelLayer(source="workspace", slots={"llm": None}), None, key)
    with pytest.raises(MissingModel, match="course.outline is turned off \\(through llm\\)"):
        await check_run_for_owner(cfg, db, "fay")


async def test_a_chosen_model_the_settings_no_longer_allow_pauses_its_step_naming_the_slot(db, db_url, tmp_path):
    """A run's model choice is checked when it starts and used as it was chosen: once the owner removes the
    provider, the step that needs it fails naming the slot (the run pauses) instead of using another model."""
    base = default_config()
    cfg = msgspec.structs.replace(base, runtime=FAST, server=msgspec.structs.replace(
        base.server, allow_local_endpoints=True, data_dir=str(tmp_path)))
    key = process_instance_key(cfg.secret_key, str(tmp_path))
    mine = ModelLayer(source="workspace", providers={
        "mine": ProviderSpec(preset="openai-compatible", base_url="http://127.0.0.1:9/v1", models=("gpt-mine",))})
    await save_settings(db, "gus", mine, None, key)
    svc = RunService(EventLog(db), cfg)
    snap = await svc.create_run("gus", "c1", RunInput(requirement="Tides", outline_review="auto",
                                                      models={"course.outline": "mine:gpt-mine"}))
    current = await read_settings(db, "gus", key)
    await save_settings(db, "gus", ModelLayer(source="workspace"), 1, key, current=current)  # the provider goes
    kind = GenerationKind(cfg, retry_backoff_s=0.05, admission_poll_s=0.2)
    async with open_worker(db_url, cfg.runtime, kinds={"generation": kind}, config=cfg,
                           model_settings=lambda db: settings_reader(cfg, db, key)):
        async def settled() -> bool:
            return (await svc.snapshot("gus", snap.id)).state in ("paused", "awaiting_outline_confirmation",
                                                                   "completed")
        await wait_for(settled, timeout=30)
    paused = await svc.snapshot("gus", snap.id)
    assert (paused.state, paused.step) == ("paused", "outline"), paused
    assert "course.outline" in (paused.error or "") and "provider is not declared" in (paused.error or "")
