"""The routes of the one-way import of a 1.1.x browser's data (errors in OpenMAIC's ``jsonErr`` form).

* ``POST /api/identity/legacy-import-binding {browserId}`` — binds the browser to the signed-in owner: ``{bound:
  true}`` (again: the same). Same-origin JSON only (403 ``CROSS_ORIGIN_REFUSED``); 409
  ``LEGACY_IMPORT_BOUND_ELSEWHERE`` when another owner bound it; 400 for a malformed id.
* Every importer request below carries ``X-OpenMAIC-Legacy-Import: <browserId>``; without the binding it is a 409
  ``LEGACY_IMPORT_NOT_BOUND`` and nothing is stored.
* ``POST /api/legacy-import/stages {stage, scenes, media, audio}`` — one stage as a course: 201 ``{courseId,
  imported: true, scenes, assets, dropped}``, or 200 with ``imported: false`` when it was imported before (nothing
  changed). Bodies up to ``limits.upload_bytes`` (413 beyond), media as base64, stored within
  ``limits.asset_bytes_per_owner`` (507 ``ASSET_QUOTA_EXCEEDED`` beyond, with nothing of the stage stored).
* ``POST /api/agents/import`` and ``POST /api/model-config/import`` with the header are the agents' and the
  settings' imports (:mod:`openmaic.api.agents`, :mod:`openmaic.api.model_config`).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from quart import Blueprint

from openmaic.api.origins import require_same_origin_json
from openmaic.api.routing import Call, api_route, app_state
from openmaic.browser_import.records import BROWSER_ID, StageImport
from openmaic.browser_import.service import HEADER, bind_browser, browser_of, import_stage
from openmaic.wire import Wire

__all__ = ["bp"]

bp = Blueprint("browser_import", __name__)


class BindingBody(Wire, forbid_unknown_fields=True):
    browser_id: Annotated[str, msgspec.Meta(pattern=BROWSER_ID)]


class Bound(Wire):
    bound: bool


class StageImported(Wire):
    course_id: str
    imported: bool
    scenes: int
    assets: int
    dropped: dict[str, int]


@api_route(bp, "POST", "/api/identity/legacy-import-binding", body=BindingBody, response=Bound, error_style="json",
           errors=(400, 403, 409))
async def bind_legacy_import(call: Call) -> Bound:
    """Bind this browser's 1.1.x data to you, so its importer's requests may write it into your account."""
    require_same_origin_json(call.request, "import bindings", app_state().allowed_origins)
    body: BindingBody = call.body
    await bind_browser(call.services.log, call.user, body.browser_id)
    return Bound(bound=True)


@api_route(bp, "POST", "/api/legacy-import/stages", body=StageImport, response=StageImported, status=201,
           body_limit="upload", error_style="json", errors=(400, 409, 413, 507))
async def import_legacy_stage(call: Call) -> tuple[StageImported, int]:
    """Import one 1.1.x stage with its scenes and media as a course; a repeat changes nothing."""
    browser = await browser_of(call.services.log, call.user, call.request.headers.get(HEADER))
    done = await import_stage(call.services.log, call.user, browser, call.body,
                              quota_bytes=call.services.config.limits.asset_bytes_per_owner)
    answer = StageImported(course_id=done.course_id, imported=done.imported, scenes=done.scenes,
                           assets=done.assets, dropped=done.dropped)
    return answer, 201 if done.imported else 200
