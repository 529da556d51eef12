"""OpenMAIC's course document as typed msgspec Structs, with its validators, normalizers and codecs.

The document (``Document``: ``stage``, ``scenes``, ``outline``, ``dslVersion``) is spelled exactly as OpenMAIC
spells it on the wire: attribute names are the JSON member names, optional members are ``UNSET`` (never
``null``), and elements, actions and scene contents are unions told apart by ``type``. Values come in through
the ``decode_*`` functions (validate, sanitize, type) and leave through :func:`encode`/:func:`to_json`.
"""

from __future__ import annotations

from openmaic.courses.format.actions import *  # noqa: F403
from openmaic.courses.format.actions import __all__ as _actions
from openmaic.courses.format.base import UNSET, new_id
from openmaic.courses.format.codec import decode_json, encode, json_problems, to_json
from openmaic.courses.format.elements import *  # noqa: F403
from openmaic.courses.format.elements import __all__ as _elements
from openmaic.courses.format.outline import *  # noqa: F403
from openmaic.courses.format.outline import __all__ as _outline
from openmaic.courses.format.presets import PRESET_AGENTS
from openmaic.courses.format.problems import FormatInvalid, Problem
from openmaic.courses.format.scenes import *  # noqa: F403
from openmaic.courses.format.scenes import __all__ as _scenes
from openmaic.courses.format.stage import *  # noqa: F403
from openmaic.courses.format.stage import __all__ as _stage
from openmaic.courses.format.latex import render_latex
from openmaic.courses.format.manifest import asset_refs, reference_counts, scene_element_ids
from openmaic.courses.format.normalize import normalize_element, normalize_elements
from openmaic.courses.format.repair import parse_json_response
from openmaic.courses.format.sanitize import sanitize_element, sanitize_html
from openmaic.courses.format.validate import (
    decode_action, decode_document, decode_scene, decode_stage, validate_action, validate_document, validate_scene,
    validate_stage,
)  # fmt: skip
from openmaic.courses.format.version import compare_versions, is_future, migrate

__all__ = [
    *_actions, *_elements, *_outline, *_scenes, *_stage,
    "FormatInvalid", "PRESET_AGENTS", "Problem", "UNSET", "compare_versions", "decode_action", "decode_document",
    "decode_json", "decode_scene", "decode_stage", "encode", "is_future", "json_problems", "migrate", "new_id",
    "asset_refs", "normalize_element", "normalize_elements", "parse_json_response", "reference_counts",
    "render_latex", "sanitize_element", "sanitize_html", "scene_element_ids", "to_json", "validate_action", "validate_document", "validate_scene",
    "validate_stage",
]  # fmt: skip
