"""OpenMAIC's agent registry over HTTP: ``/api/agents``. Errors are OpenMAIC's ``jsonErr``
(``{"error": {"code", "message"}}``) with its codes: ``INVALID_AGENT`` (400), ``BODY_TOO_LARGE`` (413),
``BUILT_IN_AGENT_READ_ONLY`` (403), ``AGENT_EXISTS`` / ``AGENT_LIMIT_REACHED`` (409), ``AGENT_NOT_FOUND`` (404).
A 1.1.x browser's importer sends ``POST /api/agents/import`` with ``X-OpenMAIC-Legacy-Import``
(:mod:`openmaic.browser_import.service`): the binding is checked first (409 ``LEGACY_IMPORT_NOT_BOUND``) and the
agents it added are recorded on the binding's stream.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
from quart import Blueprint

from openmaic.api.pages import PageQuery, cursor_of, read_cursor
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Wire
from openmaic.browser_import.service import HEADER, browser_of, record_agents_import
from openmaic.runs import agents as registry

__all__ = ["bp"]

bp = Blueprint("agents", __name__)

MAX_BODY_BYTES = 256 * 1024
_AGENTS = {"error_style": "json", "error_codes": {400: "INVALID_AGENT", 413: "BODY_TOO_LARGE"}}


class VoiceConfigView(Wire, omit_defaults=True):
    provider_id: str
    voice_id: str
    model_id: str | None = None


class AgentBody(Wire):
    """An agent as OpenMAIC's registry holds it."""

    id: str = ""
    name: str
    role: str
    """teacher, assistant or student."""
    persona: str = ""
    avatar: str = ""
    color: str = ""
    allowed_actions: list[str] = []
    priority: int = 5
    voice_config: VoiceConfigView | None = None
    voice_design: Any = None


class AgentView(AgentBody, omit_defaults=True):
    read_only: bool = False


class AgentPayload(Wire):
    agent: AgentBody


class AgentAnswer(Wire):
    agent: AgentView


class AgentList(Wire):
    agents: list[AgentView]
    """The built-in agents first (readOnly), then yours in the order you created them."""
    next_cursor: str | None = None
    """The ``cursor`` of the next page; null on the last (:mod:`openmaic.api.pages`)."""


class ImportBody(Wire):
    agents: list[AgentBody]


class Skipped(Wire):
    id: str
    reason: str


class ImportAnswer(Wire):
    imported: int
    skipped: list[Skipped]


def _agent(body: AgentBody) -> registry.Agent:
    return msgspec.convert(body, registry.Agent, from_attributes=True)


def _view(agent: registry.Agent) -> AgentView:
    return msgspec.convert(agent, AgentView, from_attributes=True)


@api_route(bp, "GET", "/api/agents", query=PageQuery, response=AgentList, **_AGENTS)
async def list_agents(call: Call) -> AgentList:
    """The agents a run can cast: the built-in ones (default-1 … default-6, read-only), then yours, a page of
    ?limit= at a time (?cursor=nextCursor for the next)."""
    q: PageQuery = call.query
    after = read_cursor(q.cursor, (dt.datetime, str))
    agents, nxt = await registry.list_agents(call.services.db, call.user, limit=q.limit, after=after)
    return AgentList(agents=[_view(a) for a in agents], next_cursor=None if nxt is None else cursor_of(*nxt))


@api_route(bp, "POST", "/api/agents", body=AgentPayload, response=AgentAnswer, status=201, body_limit=MAX_BODY_BYTES,
           errors=(403, 409), **_AGENTS)
async def create_agent(call: Call) -> tuple[AgentAnswer, int]:
    """Add an agent of your own; a run casts it by id (agents: {mode: "preset", agentIds: [...]})."""
    agent = await registry.create_agent(call.services.db, call.user, _agent(call.body.agent),
                                        limit=call.services.config.limits.agents_per_owner)
    return AgentAnswer(agent=_view(agent)), 201


@api_route(bp, "PUT", "/api/agents/{id}", body=AgentPayload, response=AgentAnswer, body_limit=MAX_BODY_BYTES,
           errors=(403, 404), **_AGENTS)
async def update_agent(call: Call, id: str) -> AgentAnswer:
    """Change one of your agents (runs already cast keep the agent as it was)."""
    agent = await registry.update_agent(call.services.db, call.user, id, _agent(call.body.agent))
    return AgentAnswer(agent=_view(agent))


@api_route(bp, "DELETE", "/api/agents/{id}", status=204, errors=(403, 404), **_AGENTS)
async def delete_agent(call: Call, id: str) -> None:
    """Delete one of your agents."""
    await registry.delete_agent(call.services.db, call.user, id)


@api_route(bp, "POST", "/api/agents/import", body=ImportBody, response=ImportAnswer, body_limit=4 * 1024 * 1024,
           **_AGENTS)
async def import_agents(call: Call) -> ImportAnswer:
    """Add several agents at once (a browser's registry); ones you already have are left as they are."""
    # A 1.1.x browser's importer sends its binding: checked before anything is added, recorded after.
    header = call.request.headers.get(HEADER)
    browser = await browser_of(call.services.log, call.user, header) if header is not None else None
    agents = [_agent(a) for a in call.body.agents]
    imported, skipped = await registry.import_agents(call.services.db, call.user, agents,
                                                       limit=call.services.config.limits.agents_per_owner)
    if browser is not None:
        refused = {i for i, _ in skipped}
        await record_agents_import(call.services.log, browser,
                                   list(dict.fromkeys(a.id for a in agents if a.id not in refused)))
    return ImportAnswer(imported=imported, skipped=[Skipped(id=i, reason=r) for i, r in skipped])
