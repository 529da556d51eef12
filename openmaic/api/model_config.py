"""The Models page over HTTP: OpenMAIC's ``/api/model-config`` routes (errors in its ``jsonErr`` form).

* ``GET /api/model-config`` — the owner's view (:func:`openmaic.modelconfig.settings.settings_view`):
  ``{revision, policy, presets, providers, slots}``; keys shown only as ``{set, mask, unreadable}``.
* ``PUT /api/model-config {revision, change}`` — one change against the revision the caller read (``null``
  before the first save); a stale revision is 409 ``CONFLICT``; a slot the deployment sets is 409
  ``SLOT_LOCKED``; the other refusals are 400 with OpenMAIC's codes. Answers the new view.
* ``GET /api/model-config/run-choices`` — this server's addition: per chat slot a generation run calls, the models
  a run may choose for it (``models`` of its start body; :mod:`openmaic.models.choices`):
  ``{slots: [{slot, default, allowed, locked}]}``.
* ``POST /api/model-config/import {providers?, slots?}`` — merges settings a browser kept; existing settings win;
  answers ``{imported, skipped, view}``. Repeating it changes nothing. A 1.1.x browser's importer sends it with
  ``X-OpenMAIC-Legacy-Import`` (:mod:`openmaic.browser_import.service`): the binding is checked first (409
  ``LEGACY_IMPORT_NOT_BOUND``) and what was merged is recorded on the binding's stream.

The owner is always the request's, never a parameter. Keys are sealed before they are stored
(:mod:`openmaic.modelconfig.store`) and never returned, logged or put in an event. A key is bound to the endpoint
and preset it was entered for: a change of either without a key drops it, and the answer says so (``keyDropped``,
``notice``). Every change is recorded in the owner's log with the settings (:mod:`openmaic.modelconfig.changes`):
what changed, by whose request, and what became of the key.
"""

from __future__ import annotations

from typing import Any

import msgspec
from quart import Blueprint

from openmaic.api.routing import Call, api_route, app_state
from openmaic.api.wire import Wire
from openmaic.browser_import.service import HEADER, browser_of, record_settings_import
from openmaic.config import Config
from openmaic.modelconfig.secret_box import InstanceKey, process_instance_key
from openmaic.modelconfig.settings import apply_change, import_proposal, settings_view
from openmaic.modelconfig.changes import KeyFate, ModelSettingsChanged, save_recorded
from openmaic.modelconfig.store import SettingsConflict, StoredSettings, read_settings
from openmaic.modelconfig.workspace import workspace_layer
from openmaic.models.choices import run_choices

__all__ = ["bp"]

bp = Blueprint("model_config", __name__)

IMPORT_ATTEMPTS = 3
"""Attempts of an import against settings writes that raced it."""


class PutBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    revision: int | None
    """The revision the caller read (``null``: they have never saved)."""
    change: dict[str, Any]
    """``{kind: "slots", set?, clear?}``, ``{kind: "provider", id, preset, apiKey?, baseUrl?, models?}`` or
    ``{kind: "remove-provider", id}``."""


class ImportBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    providers: dict[str, Any] | None = None
    slots: dict[str, Any] | None = None


def key_of(config: Config) -> InstanceKey:
    """The process's instance key (read or created once)."""
    return process_instance_key(config.secret_key, config.server.data_dir)


@api_route(bp, "GET", "/api/model-config", error_style="json")
async def get_model_config(call: Call) -> dict[str, Any]:
    """The owner's model settings: every slot with its effective model, the providers (keys masked), the presets."""
    config = call.services.config
    return settings_view(config, await read_settings(call.services.db, call.user, key_of(config)))


class RunChoice(Wire):
    slot: str
    default: str | None
    """The model the settings give the slot now (``provider:model``); null when it cannot run as they stand."""
    allowed: list[str]
    """Every model a run may choose for the slot, the default first."""
    locked: bool
    """The deployment sets this slot: its own model is the only choice."""


class RunChoicesAnswer(Wire):
    slots: list[RunChoice]


@api_route(bp, "GET", "/api/model-config/run-choices", response=RunChoicesAnswer, error_style="json")
async def get_run_choices(call: Call) -> RunChoicesAnswer:
    """The models a generation run may choose per slot (its ``models`` input), through the owner's settings."""
    config = call.services.config
    workspace = await workspace_layer(call.services.db, call.user, key_of(config), config.policy,
                                      dict(config.providers))
    return RunChoicesAnswer(slots=[RunChoice(slot=c.slot, default=c.default, allowed=list(c.allowed), locked=c.locked)
                                   for c in run_choices(config, workspace)])


@api_route(bp, "PUT", "/api/model-config", body=PutBody, errors=(400, 409), error_style="json")
async def put_model_config(call: Call) -> dict[str, Any]:
    """Apply one change to the owner's model settings against the revision they read; answers the new view."""
    config, db, key = call.services.config, call.services.db, key_of(call.services.config)
    body: PutBody = call.body
    current = await read_settings(db, call.user, key)
    if (current.revision if current else None) != body.revision:
        raise SettingsConflict("The settings changed; reload them")
    layer, clear = apply_change(config, current.layer if current else None, body.change)
    record, dropped = _record(call, current, body.change, clear)
    try:
        await save_recorded(call.services.log, call.user, layer, body.revision, key, record, current=current,
                            clear_keys=clear)
    except SettingsConflict:
        raise SettingsConflict("The settings changed; reload them") from None
    view = settings_view(config, await read_settings(db, call.user, key))
    if dropped:
        view["keyDropped"] = dropped
        view["notice"] = (f"The API key of {dropped} was removed because its endpoint or preset changed; enter the "
                          "key again to use it")
    return view


def _record(call: Call, current: StoredSettings | None, change: dict[str, Any],
            clear: list[str]) -> tuple[ModelSettingsChanged, str | None]:
    """The event recording ``change`` (``apply_change`` accepted it), and the provider whose key it dropped because
    its endpoint or preset changed, if any."""
    who = _who(call)
    kind = change["kind"]
    if kind == "slots":
        return ModelSettingsChanged(change="slots", slots_set=sorted(change.get("set") or {}),
                                    slots_cleared=sorted(change.get("clear") or []), **who), None
    pid = change["id"]
    before = current.layer.providers.get(pid) if current is not None else None
    had = before is not None and (before.api_key is not None or pid in current.unreadable)  # type: ignore[union-attr]
    if kind == "remove-provider":
        return ModelSettingsChanged(change="remove-provider", provider=pid, key="removed" if had else None,
                                    **who), None
    fate: KeyFate | None
    if "apiKey" in change:
        fate = "set" if change["apiKey"] else "removed" if had else None
    elif pid in clear:
        fate = "dropped" if had else None
    else:
        fate = "kept" if had else None
    base_url = change["baseUrl"] if "baseUrl" in change else before.base_url if before is not None else None
    record = ModelSettingsChanged(change="provider", provider=pid, preset=change.get("preset"), base_url=base_url,
                                  key=fate, **who)
    return record, pid if fate == "dropped" else None


def _who(call: Call) -> dict[str, Any]:
    identity = call.services.config.identity
    resolver = app_state().identity
    return {"by": call.user, "mode": identity.mode, "client": resolver.client_address(call.request)}


@api_route(bp, "POST", "/api/model-config/import", body=ImportBody, errors=(400, 409), error_style="json")
async def import_model_config(call: Call) -> dict[str, Any]:
    """Merge settings a browser kept into the owner's (existing settings win); safe to repeat."""
    config, db, key = call.services.config, call.services.db, key_of(call.services.config)
    body: ImportBody = call.body
    # A 1.1.x browser's importer sends its binding: checked before anything is merged, recorded after.
    header = call.request.headers.get(HEADER)
    browser = await browser_of(call.services.log, call.user, header) if header is not None else None
    proposal = {"providers": body.providers or {}, "slots": body.slots or {}}
    for attempt in range(1, IMPORT_ATTEMPTS + 1):
        current = await read_settings(db, call.user, key)
        layer, imported, skipped = import_proposal(config, current.layer if current else None, proposal)
        try:
            if imported and layer is not None:
                keys = sorted(i["id"] for i in imported if i["kind"] == "provider"
                              and (body.providers or {}).get(i["id"], {}).get("apiKey"))
                record = ModelSettingsChanged(change="import", imported=imported, keys_set=keys, **_who(call))
                await save_recorded(call.services.log, call.user, layer, current.revision if current else None, key,
                                    record, current=current)
        except SettingsConflict:
            if attempt < IMPORT_ATTEMPTS:
                continue
            raise SettingsConflict("The settings kept changing; try again") from None
        if browser is not None:
            await record_settings_import(call.services.log, browser, imported)
        return {"imported": imported, "skipped": skipped,
                "view": settings_view(config, await read_settings(db, call.user, key))}
    raise AssertionError("unreachable")

