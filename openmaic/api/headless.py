"""OpenMAIC's headless generation API, the one its ``openmaic`` skill drives with curl and one cookie jar.

* ``GET /api/generate-classroom/capabilities`` says what this server can do before the skill asks for it: which
  media it generates (each media slot that resolves) and which materials it reads, with their limits.
  It needs no owner.
* ``POST /api/generate-classroom {requirement, materialIds?}`` starts a run that confirms its own outline (no
  headless caller will ever confirm one) and answers 202 with the *job view*; every other field is ignored, but
  ``pdfContent`` (OpenMAIC's old inline PDF text) is refused, pointing at ``POST /api/materials``. The body is at
  most 64 KiB.
* ``GET /api/generate-classroom/{jobId}`` is the job view of that run (``pollUrl``): ``queued``, ``running``,
  ``succeeded`` with ``result.url`` (the classroom page), or ``failed`` (with ``error``; ``retryable`` when
  ``POST /api/generation-runs/{runId}/retry`` can resume it). Another owner's job is the same JSON 404 as an
  unknown one.
"""

from __future__ import annotations

from typing import Any

import msgspec
from quart import Blueprint

from openmaic import errors
from openmaic.api.health import MediaCapabilities, media_view
from openmaic.api.idempotency import idempotency_key
from openmaic.api.routing import Call, api_route, origin
from openmaic.api.wire import Success, Wire
from openmaic.capabilities import material_limits
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService, valid_run_id
from openmaic.runs.views import JobView, job_view

__all__ = ["bp"]

bp = Blueprint("headless", __name__)

MAX_START_BODY_BYTES = 64 * 1024
"""OpenMAIC's ``MAX_START_BODY_BYTES``."""


class JobNotFound(errors.NotFound):
    """Classroom generation job not found"""


class MaterialFormatView(Wire):
    id: str
    mime: str
    extensions: list[str]


class MaterialLimitsView(Wire):
    formats: list[MaterialFormatView]
    max_count: int
    """Materials one generation may use."""
    max_total_bytes: int
    max_document_bytes: int
    max_media_bytes: int


class Capabilities(Success):
    capabilities: MediaCapabilities
    materials: MaterialLimitsView


@api_route(bp, "GET", "/api/generate-classroom/capabilities", response=Capabilities, auth=False)
async def capabilities(call: Call) -> Capabilities:
    """What this server can generate and which materials it reads (formats, counts, sizes). Needs no owner."""
    m = material_limits(call.services.config)
    formats = [MaterialFormatView(id=f.id, mime=f.mime, extensions=list(f.extensions)) for f in m.formats]
    return Capabilities(
        capabilities=media_view(call.services),
        materials=MaterialLimitsView(formats=formats, max_count=m.max_count, max_total_bytes=m.max_total_bytes,
                                     max_document_bytes=m.max_document_bytes, max_media_bytes=m.max_media_bytes),
    )


class GenerateClassroom(Wire):
    """The headless start: a requirement and, optionally, uploaded materials. Other fields are ignored."""

    requirement: str | None = None
    material_ids: list[str] = []
    pdf_content: Any = msgspec.UNSET
    """Refused: upload the PDF with POST /api/materials and pass its id in materialIds."""


def runs_of(call: Call) -> RunService:
    if call.services.runs is None:
        raise errors.OpenMaicError("runs are not served by this process")
    return call.services.runs  # type: ignore[return-value]


@api_route(bp, "POST", "/api/generate-classroom", body=GenerateClassroom, response=JobView, status=202,
           body_limit=MAX_START_BODY_BYTES, errors=(403, 409, 429), idempotent=True)
async def generate_classroom(call: Call) -> tuple[JobView, int]:
    """Start generating a classroom from a requirement (and materials); poll the answer's pollUrl.

    The run confirms its own outline and casts its own agents. 400 MISSING_REQUIRED_FIELD without a requirement,
    INVALID_REQUEST for pdfContent or unavailable materials, MISSING_MODEL or MISSING_API_KEY when the outline
    model cannot run; 409 IDEMPOTENCY_KEY_REUSED; 429 ACTIVE_RUN_LIMIT at the owner's run limits. With an
    Idempotency-Key, a repeat answers the job as the first request did (the same job).
    """
    body: GenerateClassroom = call.body
    if body.pdf_content is not msgspec.UNSET:
        raise errors.InvalidInput("pdfContent is no longer accepted: upload the file with POST /api/materials "
                                  "and pass its id in materialIds", path="pdfContent")
    if body.requirement is None:
        raise errors.MissingField("Missing required field: requirement", path="requirement")
    keyed = idempotency_key(call)
    inp = RunInput(requirement=body.requirement, material_ids=list(body.material_ids), language="",
                   outline_review="auto")
    row, state = await runs_of(call).start(call.user, inp, keyed=keyed)
    return job_view(row.id, state, origin(call.request)), 202


@api_route(bp, "GET", "/api/generate-classroom/{job_id}", response=JobView, errors=(400, 404))
async def classroom_job(call: Call, job_id: str) -> JobView:
    """The job's progress; done is true once it succeeded (result.url) or failed (error)."""
    if not valid_run_id(job_id):
        raise errors.InvalidInput("Invalid classroom generation job id", path="jobId")
    try:
        row, state = await runs_of(call).read(call.user, job_id, catch_up=True)
    except errors.NotFound:
        raise JobNotFound() from None
    return job_view(row.id, state, origin(call.request))
