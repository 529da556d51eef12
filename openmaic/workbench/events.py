"""Event types the workbench adds to the shared ones in :mod:`openmaic.events.core`."""

from __future__ import annotations

from openmaic.events.types import Event, register


@register
class ModelOutputReset(Event, tag="model.output_reset"):
    """Discard the ``model.output_delta`` text shown since the last committed turn.

    Appended when streamed text will never be committed: the provider retried the request, the turn was
    cancelled or failed, or a new attempt resumes a turn that a stopped worker had been streaming.
    """

    reason: str = ""


@register
class SessionTitleSet(Event, tag="session.title_set"):
    """The session's title, set by its owner (``None``: no title)."""

    title: str | None = None
