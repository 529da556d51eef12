"""Where an owner's model settings live: one row of ``model_settings`` per owner, keys sealed apart.

The ``config`` column holds the workspace layer in ``openmaic.yml``'s shape without any secret; each provider's
``apiKey`` and ``credentials`` are sealed together (:mod:`openmaic.modelconfig.secret_box`) under the context
``workspace-provider:<id>`` in ``secrets``, and opened on read. A secret that no longer opens (the instance
secret was changed or lost) is reported in ``unreadable``, and a save that brings no new key for that provider
keeps the sealed value as it is: a misconfigured instance secret must not destroy keys on the first settings
change. A damaged sealed value (a flipped byte) is refused the same way and never opened.

Every write is a compare-and-swap on the revision the caller read (:class:`SettingsConflict` otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from openmaic.errors import Conflict, ConfigError
from openmaic.modelconfig.layer import ModelLayer, ProviderSpec, parse_model_shape, to_document
from openmaic.modelconfig.secret_box import InstanceKey, SecretCorrupt, SecretKeyMismatch, open_secret, seal_secret
from openmaic.secret import Secret
from openmaic.store.database import Database
from openmaic.store.queries import load_sql

__all__ = ["SettingsConflict", "StoredSettings", "read_settings", "save_settings", "secret_context"]

SQL = load_sql("openmaic.modelconfig", "settings.sql")


class SettingsConflict(Conflict):
    """The settings changed since they were read; reload them."""

    code = "settings_conflict"
    error_code = "CONFLICT"


@dataclass(frozen=True)
class StoredSettings:
    """An owner's settings with their keys opened; ``unreadable`` names providers whose key does not open."""

    layer: ModelLayer
    revision: int
    unreadable: frozenset[str]
    sealed: dict[str, Any]
    """The stored sealed values, as they are (kept for providers whose key cannot be opened)."""


def secret_context(provider_id: str) -> str:
    """The associated data a provider's sealed key is bound to."""
    return f"workspace-provider:{provider_id}"


def _stored_error(path: str, what: str) -> ConfigError:
    return ConfigError(f"stored model settings: {path}: {what}", key=path)


class _Stored(msgspec.Struct, frozen=True):
    """An owner's row of ``model_settings``: the settings and the sealed keys as JSON text, and its revision."""

    config: str
    secrets: str
    revision: int


def _open(row: _Stored, key: InstanceKey) -> StoredSettings:
    config = msgspec.json.decode(row.config)
    sealed: dict[str, Any] = msgspec.json.decode(row.secrets)
    layer, _ = parse_model_shape(config, _stored_error, source="workspace")
    providers: dict[str, ProviderSpec] = {}
    unreadable: set[str] = set()
    for pid, spec in layer.providers.items():
        box = sealed.get(pid)
        if box is None:
            providers[pid] = spec
            continue
        try:
            opened = msgspec.json.decode(open_secret(box, secret_context(pid), key))
        except (SecretKeyMismatch, SecretCorrupt, msgspec.DecodeError):
            unreadable.add(pid)
            providers[pid] = spec
            continue
        providers[pid] = msgspec.structs.replace(
            spec,
            api_key=Secret(opened["apiKey"]) if opened.get("apiKey") else None,
            credentials={k: Secret(v) for k, v in (opened.get("credentials") or {}).items()},
        )
    return StoredSettings(layer=msgspec.structs.replace(layer, providers=providers), revision=row.revision,
                          unreadable=frozenset(unreadable), sealed=sealed)


async def read_settings(db: Database, owner: str, key: InstanceKey) -> StoredSettings | None:
    """The owner's settings, or ``None`` when they never saved any."""
    row = await db.fetchrow_as(_Stored, SQL.read, owner)
    return None if row is None else _open(row, key)


async def save_settings(db: Database, owner: str, layer: ModelLayer, expected: int | None, key: InstanceKey, *,
                        current: StoredSettings | None = None, clear_keys: Iterable[str] = ()) -> int:
    """Replace the owner's settings with ``layer`` if they are still at revision ``expected`` (``None``: never
    saved); returns the new revision. ``current`` is what the caller read (its unreadable keys are kept unless
    named in ``clear_keys``)."""
    if (current.revision if current else None) != expected:
        raise SettingsConflict()
    clear = set(clear_keys)
    sealed: dict[str, Any] = {}
    for pid, spec in layer.providers.items():
        secret: dict[str, Any] = {}
        if spec.api_key is not None:
            secret["apiKey"] = spec.api_key.reveal()
        if spec.credentials:
            secret["credentials"] = {k: v.reveal() for k, v in spec.credentials.items()}
        if secret:
            sealed[pid] = seal_secret(msgspec.json.encode(secret).decode(), secret_context(pid), key)
        elif current is not None and pid in current.unreadable and pid not in clear and pid in current.sealed:
            sealed[pid] = current.sealed[pid]
    config = msgspec.json.encode(to_document(layer)).decode()
    boxes = msgspec.json.encode(sealed).decode()
    if expected is None:
        revision = await db.fetchval(SQL.insert, owner, config, boxes)
    else:
        revision = await db.fetchval(SQL.update, owner, config, boxes, expected)
    if revision is None:
        raise SettingsConflict()
    return int(revision)
