"""Events of the model layer, appended by the steps that called a model (with the step's own outcome)."""

from __future__ import annotations

from openmaic.events.types import Event, register


@register
class ModelFallbackUsed(Event, tag="model.fallback_used"):
    """The slot's primary model failed after its retries and its ``fallback`` answered instead.

    ``failed`` and ``answered`` are ``provider:model`` references; ``reason`` is the primary's key-free error.
    Committed in the same append as the step's result, so it is recorded exactly when that answer was used.
    """

    slot: str
    failed: str
    reason: str
    answered: str
