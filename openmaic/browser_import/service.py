"""The one-way import of a 1.1.x browser's data: the binding, then courses, agents and model settings.

OpenMAIC's flow, kept here: the browser's importer first binds its browser id (32 hex characters it chose once)
to the signed-in owner (``POST /api/identity/legacy-import-binding``), then sends every import request with
``X-OpenMAIC-Legacy-Import: <browserId>``; a request whose owner does not hold that binding is a 409
``LEGACY_IMPORT_NOT_BOUND``, so data a browser kept for one owner never lands with another. A browser bound by one
owner cannot be bound by another (409 ``LEGACY_IMPORT_BOUND_ELSEWHERE``); a claim moves the binding with the rest
of an anonymous owner's work (it is a stream), so a browser that imported anonymously and then signed in goes on
importing as the account.

Each import is **idempotent**: what it stores has ids derived from the browser id and the browser's own record
ids or content (:mod:`openmaic.browser_import.translate`), every row is inserted only if absent, and the course's events are
one command (``legacy-import``) on its stream, so a repeated import — the importer retrying, or run again from a
browser that kept its data — writes nothing and answers what the first one stored. The import is one-way and
once: a stage already imported is not updated by a later import of it, and a course deleted after its import stays
deleted. Each import that changed something is recorded on the binding's stream
(:mod:`openmaic.browser_import.events`) in the same transaction as what it stored.
"""

from __future__ import annotations

import hashlib
import re
import msgspec

from openmaic import errors
from openmaic.browser_import.events import (
    LegacyAgentsImported, LegacyImportBound, LegacySettingsImported, LegacyStageImported,
)  # fmt: skip
from openmaic.browser_import.records import BROWSER_ID, StageImport
from openmaic.browser_import.translate import translate_stage
from openmaic.events.log import EventLog, NewStream, StreamAppend, StreamRow
from openmaic.media.assets import DEFAULT_QUOTA_BYTES, AssetPut, AssetQuotaExceeded, check_media_type
from openmaic.store.locks import owner_lock
from openmaic.store.queries import Q

__all__ = [
    "HEADER", "BoundElsewhere", "ImportedStage", "NotBound", "binding_stream", "bind_browser", "browser_of",
    "import_stage", "record_agents_import", "record_settings_import",
]  # fmt: skip

HEADER = "X-OpenMAIC-Legacy-Import"
KIND = "legacy_import"
_BROWSER_ID = re.compile(BROWSER_ID)


class NotBound(errors.Conflict):
    """This request's owner has not bound the browser it names; bind it first."""

    code = "legacy_import_not_bound"
    error_code = "LEGACY_IMPORT_NOT_BOUND"


class BoundElsewhere(errors.Conflict):
    """Another owner bound this browser; its data can only be imported there."""

    code = "legacy_import_bound_elsewhere"
    error_code = "LEGACY_IMPORT_BOUND_ELSEWHERE"


class ImportedStage(msgspec.Struct, frozen=True, kw_only=True):
    course_id: str
    imported: bool
    """False when an earlier import already stored this stage (nothing changed)."""
    scenes: int
    assets: int
    dropped: dict[str, int] = {}


def binding_stream(browser_id: str) -> str:
    return f"legacy-import:{browser_id}"


def _valid(browser_id: str) -> str:
    if not _BROWSER_ID.match(browser_id):
        raise errors.InvalidInput("a browser id is 32 lowercase hexadecimal characters", path="browserId")
    return browser_id


async def bind_browser(log: EventLog, owner: str, browser_id: str) -> None:
    """Bind ``browser_id`` to ``owner`` (again: nothing changes); BoundElsewhere if another owner holds it."""
    sid = binding_stream(_valid(browser_id))
    row = await log.stream_row(sid)
    if row is None:
        await log.append(StreamAppend(
            stream_id=sid, create=NewStream(KIND, owner), status="terminal", command_id="bind",
            events=[LegacyImportBound(browser_id=browser_id)]))  # fmt: skip
        # Two owners binding at once: both creates name the stream, one wins; the other's append was a replay of
        # the winner's command, so reading the owner back tells who holds the browser.
        row = await log.stream_row(sid)
    if row is None or row.owner_id != owner:
        raise BoundElsewhere("this browser's data was bound to another account; sign in there to import it")


async def browser_of(log: EventLog, owner: str, header: str | None) -> str:
    """The browser id an importer request names in its header, once checked to be bound to ``owner``."""
    if header is None:
        raise NotBound(f"import requests carry {HEADER}: <browserId>, bound by POST /api/identity/legacy-import-binding")
    browser_id = header.strip()
    if not _BROWSER_ID.match(browser_id):
        raise errors.InvalidInput(f"{HEADER} is a browser id: 32 lowercase hexadecimal characters", path=HEADER)
    row = await log.stream_row(binding_stream(browser_id))
    if row is None or row.owner_id != owner or row.kind != KIND:
        raise NotBound("this browser is not bound to you: POST /api/identity/legacy-import-binding first")
    return browser_id


IMPORT_LOCK = 0x6F6D6C69
"""The owner-lock namespace of stage imports: of two imports of one stage at once, the second finds the first's."""


async def import_stage(log: EventLog, owner: str, browser_id: str, body: StageImport, *,
                       quota_bytes: int = DEFAULT_QUOTA_BYTES) -> ImportedStage:
    """Store one stage as a course of ``owner`` with its scenes and media (see the module's doc); the media go to
    the asset store as generated media do, within the owner's asset quota (AssetQuotaExceeded: nothing stored)."""
    t = translate_stage(browser_id, owner, body)
    asset_ids = [a.id for a in t.assets]
    done = ImportedStage(course_id=t.course_id, imported=False, scenes=len(t.document.document.scenes), assets=len(asset_ids),
                         dropped=t.dropped)
    course = StreamAppend(stream_id=t.course_id, create=NewStream("course", owner), command_id="legacy-import",
                          events=[t.created, t.document])
    record = StreamAppend(
        stream_id=binding_stream(browser_id), command_id=f"stage:{body.stage.id}",
        events=[LegacyStageImported(stage_id=body.stage.id, course_id=t.course_id, scenes=len(t.document.document.scenes),
                                    assets=asset_ids, dropped=t.dropped)],
    )  # fmt: skip
    # One transaction under the owner's import lock: the assets the scenes point at exist exactly when the course
    # does, and of two imports of one stage at once the second finds the first's course.
    async with log.appending(owner_lock(log.db, owner, IMPORT_LOCK)) as tx:
        conn = tx.conn
        row = await conn.fetchrow_as(StreamRow, Q.stream, t.course_id)
        if row is not None:
            if row.owner_id != owner:  # derived from a browser id bound to owner: only a claim could move it
                raise NotBound("this stage was imported by another account")
            return done  # imported once: a later import of the stage changes nothing
        if t.assets:
            await conn.execute(Q.asset_owner_lock, owner)
        for a in t.assets:
            check_media_type(a.media_type, path="media")  # translated from checked types: the store's own guard
            put = await conn.fetchrow_as(AssetPut, Q.asset_put_within_quota, a.id, owner, a.media_type, len(a.data),
                                         hashlib.sha256(a.data).digest(), a.data, a.kind, t.course_id, quota_bytes)
            if put is None or not put.stored:
                raise AssetQuotaExceeded(  # raised inside the transaction: nothing of this stage is stored
                    f"the asset storage is full; this course's media need {sum(len(x.data) for x in t.assets)} "
                    f"bytes of the {quota_bytes} allowed", quota=quota_bytes)
        await tx.append(course, record)
    return msgspec.structs.replace(done, imported=True)


async def record_agents_import(log: EventLog, browser_id: str, agent_ids: list[str]) -> None:
    """Record on the binding's stream the custom agents an import added (``POST /api/agents/import``)."""
    if not agent_ids:
        return
    key = hashlib.sha256(" ".join(agent_ids).encode()).hexdigest()
    await log.append(StreamAppend(stream_id=binding_stream(browser_id), command_id=f"agents:{key}",
                                  events=[LegacyAgentsImported(agent_ids=agent_ids)]))


async def record_settings_import(log: EventLog, browser_id: str, imported: list[dict[str, str]]) -> None:
    """Record on the binding's stream the model settings an import merged (names only, never a key)."""
    if not imported:
        return
    key = hashlib.sha256(msgspec.json.encode(imported)).hexdigest()
    await log.append(StreamAppend(stream_id=binding_stream(browser_id), command_id=f"settings:{key}",
                                  events=[LegacySettingsImported(imported=imported)]))
