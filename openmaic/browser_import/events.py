"""Events of a browser's import stream (``legacy-import:<browserId>``, kind ``legacy_import``, its owner's).

The stream is the binding: it exists once the owner bound the browser, it belongs to the owner who bound it (and
moves with a claim like every stream), and each import that changed something is an event on it, so the history
says what came from which browser, when, and into whose hands. A repeated import that changes nothing writes
nothing.
"""

from __future__ import annotations

from openmaic.events.types import Event, register

__all__ = ["LegacyAgentsImported", "LegacyImportBound", "LegacySettingsImported", "LegacyStageImported"]


@register
class LegacyImportBound(Event, tag="legacy_import.bound"):
    """The owner bound this browser: its importer's requests are theirs."""

    browser_id: str


@register
class LegacyStageImported(Event, tag="legacy_import.stage_imported"):
    """A 1.1.x stage became the course ``course_id`` (its own stream records the course itself)."""

    stage_id: str
    course_id: str
    scenes: int
    assets: list[str] = []
    dropped: dict[str, int] = {}
    """What the course could not keep, by kind (see :mod:`openmaic.browser_import.translate`)."""


@register
class LegacyAgentsImported(Event, tag="legacy_import.agents_imported"):
    """Custom agents of the browser's registry became the owner's, under the same ids."""

    agent_ids: list[str]


@register
class LegacySettingsImported(Event, tag="legacy_import.settings_imported"):
    """Model settings the browser kept were merged into the owner's (``{kind, id}`` items; never a key)."""

    imported: list[dict[str, str]]
