"""A generation run's choice of model per slot: what the owner's settings allow, and the choice applied.

A run may name, for each chat slot its steps call (:data:`RUN_SLOTS`), one model to use instead of the one the
owner's settings assign (``models: {"course.outline": "corp:gpt-4o-mini"}``; a slot left out is "as in the
settings"). What is allowed for a slot is what the owner could assign it on the Models page and run now:

* the model the slot resolves to today (its default);
* every model a usable provider declares (``models: [...]`` of a deployment provider, of one of the owner's own
  when the deployment's policy lets owners add providers, and the demo's own), and every model the deployment's or
  the owner's settings assign to a chat slot;

each kept only when the slot, assigned it, can run (a driver for its protocol, a key when it needs one, what the
slot requires). A slot the deployment sets itself (``locked``) allows only its own model, as the Models page does.

The choice is applied as an assignment of that slot in the owner's workspace layer (:func:`with_choices`), so it
resolves exactly as a Models page assignment of the same slot would: without the fallback the settings may give
it (the teacher named one model). A choice stays as the run's input; if the settings change so that it can no
longer run, the step that needs it fails naming the slot (``MissingModel`` / ``MissingApiKey``) and the run
pauses, rather than silently using another model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from openmaic.config import Config
from openmaic.errors import InvalidInput
from openmaic.modelconfig.layer import Assignment, ModelLayer
from openmaic.modelconfig.resolve import in_precedence
from openmaic.modelconfig.slots import slot as slot_def
from openmaic.models.errors import ModelNotReady
from openmaic.models.provider import check_slot

__all__ = ["RUN_SLOTS", "ModelNotAllowed", "SlotChoices", "check_choices", "run_choices", "with_choice",
           "with_choices"]

RUN_SLOTS: tuple[str, ...] = ("course.outline", "course.agents", "course.content.slide", "course.content.quiz",
                              "course.content.interactive", "course.actions")
"""The chat slots a generation run's steps call, in the order the run calls them (research searches the web
through the ``webSearch`` slot, which is no model choice)."""


class ModelNotAllowed(InvalidInput):
    """A run named a model its owner's settings do not allow for that slot (or a slot a run cannot choose)."""

    code = "model_not_allowed"
    error_code = "VALIDATION_FAILED"


@dataclass(frozen=True)
class SlotChoices:
    """What a run may choose for one slot: ``default`` is what the settings give it now (``None`` when the slot
    cannot run as they stand), ``allowed`` every choice, the default first."""

    slot: str
    default: str | None
    allowed: tuple[str, ...]
    locked: bool


def with_choice(workspace: ModelLayer | None, slot: str, ref: str) -> ModelLayer:
    """``workspace`` with ``slot`` assigned ``ref`` (an owner without settings gets a layer of their own)."""
    base = workspace or ModelLayer(source="workspace")
    return ModelLayer(source="workspace", providers=base.providers, slots={**base.slots, slot: ref})


def with_choices(workspace: ModelLayer | None, chosen: Mapping[str, str]) -> ModelLayer | None:
    """``workspace`` with every chosen slot assigned its choice."""
    for name, ref in chosen.items():
        workspace = with_choice(workspace, name, ref)
    return workspace


def _route(config: Config, slot: str, workspace: ModelLayer | None) -> str | None:
    """The route ``slot`` runs on through these settings, or ``None`` when it cannot run."""
    try:
        found = check_slot(config, slot, workspace)
    except ModelNotReady:
        return None
    return None if found.target is None else found.target.route


def _candidates(config: Config, workspace: ModelLayer | None) -> list[str]:
    """Every chat model the settings name: the providers' declared models, then every chat slot's assignment."""
    layers = in_precedence(config.layers(workspace))
    out: list[str] = []
    for layer in layers:
        for pid, spec in layer.providers.items():
            out += [f"{pid}:{m}" for m in spec.models]
    for layer in layers:
        for name, value in layer.slots.items():
            if value is None or slot_def(name).capability != "chat":
                continue
            spec = Assignment(model=value) if isinstance(value, str) else value
            out += [spec.model, *([spec.fallback] if spec.fallback else [])]
    return list(dict.fromkeys(ref for ref in out if ":" in ref))


def run_choices(config: Config, workspace: ModelLayer | None) -> list[SlotChoices]:
    """What a run may choose for each of :data:`RUN_SLOTS` through the owner's ``workspace`` settings."""
    candidates = _candidates(config, workspace)
    out = []
    for name in RUN_SLOTS:
        default = _route(config, name, workspace)
        locked = name in config.slots
        allowed = [] if default is None else [default]
        if not locked:
            allowed += [ref for ref in candidates
                        if ref not in allowed and _route(config, name, with_choice(workspace, name, ref)) == ref]
        out.append(SlotChoices(slot=name, default=default, allowed=tuple(allowed), locked=locked))
    return out


def check_choices(config: Config, workspace: ModelLayer | None, chosen: Mapping[str, str]) -> dict[str, str]:
    """``chosen`` without the slots left "as in the settings" (an empty value), each choice checked: a slot a run
    cannot choose, or a model not allowed for it, is :class:`ModelNotAllowed` naming the slot and what is allowed."""
    picked = {name: ref.strip() for name, ref in chosen.items() if ref.strip()}
    if not picked:
        return {}
    for name in picked:
        if name not in RUN_SLOTS:
            shown = name[:80]
            raise ModelNotAllowed(f"models: {shown!r} is not a slot a run can choose a model for; choose among "
                                  f"{', '.join(RUN_SLOTS)}", path=f"models.{shown}", slot=shown, slots=list(RUN_SLOTS))
    by_slot = {c.slot: c for c in run_choices(config, workspace)}
    for name, ref in picked.items():
        allowed = by_slot[name].allowed
        if ref not in allowed:
            shown = ", ".join(allowed) if allowed else "none (the slot cannot run as your settings stand)"
            raise ModelNotAllowed(f"models.{name}: {ref[:200]!r} is not a model your settings allow for {name}; the "
                                  f"allowed choices are: {shown}", path=f"models.{name}", slot=name,
                                  allowed=list(allowed))
    return picked
