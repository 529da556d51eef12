"""The agent registry: OpenMAIC's built-in classroom agents in code (:mod:`openmaic.steps.roster`), each owner's
own agents in the database.

Agents have OpenMAIC's shape (``{id, name, role, persona, avatar, color, allowedActions, priority,
voiceConfig?, voiceDesign?}``). The built-in ones are ``default-1`` … ``default-6`` (a teacher, an assistant and
four students), read-only: ids starting ``default-`` are reserved. An owner's ids are their own (unique per
owner): another owner's agent is as unknown as a missing one. An owner keeps at most :data:`MAX_AGENTS` agents.

Runs cast agents by id (``agents: {mode: "preset", agentIds}``); ``auto`` leaves the roster to the model (the
run's ``agents`` step asks the ``course.agents`` slot). A run's events store the cast as
:class:`~openmaic.courses.format.AgentConfig`\\ s (OpenMAIC's agent configs; older logs held profiles whose role
for a student was ``classmate``, lifted when read). The built-in ids of earlier releases (``teacher``, ``assistant``, ``classmate_1``, ``classmate_2``) still
resolve, so runs started before keep their cast, but they are no longer listed.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic import errors, quotas
from openmaic.courses.format import AgentConfig
from openmaic.steps.outputs import agent_config
from openmaic.steps.roster import BUILTIN_AGENTS, Agent
from openmaic.store.database import Database
from openmaic.store.queries import Q

__all__ = [
    "AGENT_ID", "Agent", "AgentExists", "AgentLimitReached", "AgentNotFound", "BUILTIN_AGENTS", "BuiltInReadOnly",
    "InvalidAgent", "MAX_AGENTS", "create_agent", "delete_agent", "import_agents", "list_agents", "resolve_agents",
    "unknown_agents", "update_agent",
]  # fmt: skip

AGENT_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""The shape of an agent id (OpenMAIC's)."""

MAX_AGENTS = 100
MAX_NAME_CHARS = 100
MAX_PERSONA_CHARS = 8_000
MAX_FIELD_CHARS = 2_048
AGENTS_LOCK = 0x6F6D6167
"""First key of the owner lock that serializes an owner's agent writes (the limit is a count)."""


class InvalidAgent(errors.InvalidInput):
    """The agent is invalid."""

    code = "invalid_agent"
    error_code = "INVALID_AGENT"


class AgentExists(errors.Conflict):
    """You already have an agent with this id."""

    code = "agent_exists"
    error_code = "AGENT_EXISTS"


class AgentLimitReached(errors.Conflict):
    """You have as many agents as you may keep; delete one first."""

    code = "agent_limit_reached"
    error_code = "AGENT_LIMIT_REACHED"


AGENTS_QUOTA = quotas.Quota(key="agents_per_owner", namespace=AGENTS_LOCK, usage=Q.agents_count, noun="agents",
                            remedy="delete one (DELETE /api/agents/{id}) first", error=AgentLimitReached)


class BuiltInReadOnly(errors.OpenMaicError):
    """Built-in agents cannot be changed, and ids starting default- are reserved for them."""

    code = "built_in_agent_read_only"
    status = 403
    error_code = "BUILT_IN_AGENT_READ_ONLY"


class AgentNotFound(errors.NotFound):
    """No such agent."""

    code = "agent_not_found"
    error_code = "AGENT_NOT_FOUND"


_LEGACY = {
    "teacher": agent_config("teacher", "Ms. Rivera", "teacher", BUILTIN_AGENTS["default-1"].persona, 0),
    "assistant": agent_config("assistant", "Sam", "assistant", BUILTIN_AGENTS["default-2"].persona, 1),
    "classmate_1": agent_config("classmate_1", "Mia", "student",
                                "A classmate: curious and quick to ask for concrete examples.", 2, 0),
    "classmate_2": agent_config("classmate_2", "Leo", "student",
                                "A classmate: a friendly sceptic who likes to test every claim.", 3, 1),
}  # fmt: skip
"""The built-in agents of earlier releases, still cast by runs that name them."""


def check_agent(agent: Agent) -> Agent:
    """``agent`` with its text trimmed; InvalidAgent naming the first field that is wrong."""
    name = " ".join(agent.name.split())
    if not AGENT_ID.fullmatch(agent.id):
        raise InvalidAgent(f"agent.id: {agent.id!r} is not an agent id ([A-Za-z0-9_.:-], at most 128)", path="agent.id")
    if not name or len(name) > MAX_NAME_CHARS:
        raise InvalidAgent(f"agent.name must be 1 to {MAX_NAME_CHARS} characters", path="agent.name")
    if agent.role not in ("teacher", "assistant", "student", "classmate"):
        raise InvalidAgent(f"agent.role: {agent.role!r}; expected teacher, assistant or student", path="agent.role")
    if len(agent.persona) > MAX_PERSONA_CHARS:
        raise InvalidAgent(f"agent.persona is at most {MAX_PERSONA_CHARS:,} characters", path="agent.persona")
    for field in ("avatar", "color"):
        if len(getattr(agent, field)) > MAX_FIELD_CHARS:
            raise InvalidAgent(f"agent.{field} is at most {MAX_FIELD_CHARS:,} characters", path=f"agent.{field}")
    if len(agent.allowed_actions) > 64 or any(not a or len(a) > 64 for a in agent.allowed_actions):
        raise InvalidAgent("agent.allowedActions: at most 64 action names of 1 to 64 characters",
                           path="agent.allowedActions")
    if not 1 <= agent.priority <= 10:
        raise InvalidAgent("agent.priority must be between 1 and 10", path="agent.priority")
    role = "student" if agent.role == "classmate" else agent.role
    return msgspec.structs.replace(agent, name=name, role=role, persona=agent.persona.strip(), read_only=False)


class _AgentRow(msgspec.Struct, frozen=True):
    """An owner's agent as stored: the columns, and the rest of its profile as JSON text."""

    id: str
    name: str
    role: str
    persona: str
    profile: str | None
    created_at: dt.datetime | None = None  # agents_of_owner's keyset; agents_by_ids does not select it

    def agent(self) -> Agent:
        extra = msgspec.json.decode(self.profile) if self.profile else {}
        role = "student" if self.role == "classmate" else self.role
        return msgspec.convert({**extra, "id": self.id, "name": self.name, "role": role, "persona": self.persona},
                               Agent)


def _profile_json(agent: Agent) -> str:
    data = msgspec.to_builtins(agent)
    for key in ("id", "name", "role", "persona", "read_only"):
        data.pop(key, None)
    return msgspec.json.encode(data).decode()


def _reserved(agent_id: str) -> None:
    if agent_id.startswith("default-") or agent_id in _LEGACY:
        raise BuiltInReadOnly(f"{agent_id!r} is a built-in agent's id; built-in agents are read-only",
                              agent_id=agent_id)


async def list_agents(db: Database, owner: str, *, limit: int | None = None, after: Sequence[Any] | None = None,
                      ) -> tuple[list[Agent], tuple[Any, str] | None]:
    """The built-in agents (on the first page: ``after`` is None), then at most ``limit`` of ``owner``'s own in
    the order they were created, after the one whose ``(created_at, id)`` is ``after``; and the key of the last
    one given when more follow."""
    start = (None, None) if after is None else tuple(after)
    rows = await db.fetch_as(_AgentRow, Q.agents_of_owner, owner, *start, None if limit is None else limit + 1)
    more = limit is not None and len(rows) > limit
    rows = rows[:limit] if more else rows
    own = [r.agent() for r in rows]
    nxt = (rows[-1].created_at, rows[-1].id) if more else None
    return [*(BUILTIN_AGENTS.values() if after is None else ()), *own], nxt


async def create_agent(db: Database, owner: str, agent: Agent, *, limit: int = MAX_AGENTS) -> Agent:
    """Add ``owner``'s agent: InvalidAgent, BuiltInReadOnly (a ``default-`` id), AgentExists, AgentLimitReached
    (``owner`` has ``limit`` agents already: ``limits.agents_per_owner``)."""
    agent = check_agent(agent)
    _reserved(agent.id)
    async with quotas.within(db, owner, AGENTS_QUOTA, limit) as conn:
        inserted = await conn.fetchval(Q.agent_insert, agent.id, owner, agent.name, agent.role, agent.persona,
                                       _profile_json(agent))
    if inserted is None:
        raise AgentExists(f"you already have an agent {agent.id!r}; change it with PUT /api/agents/{agent.id}",
                          agent_id=agent.id)
    return agent


async def update_agent(db: Database, owner: str, agent_id: str, agent: Agent) -> Agent:
    """Replace ``owner``'s agent ``agent_id``: BuiltInReadOnly, AgentNotFound, InvalidAgent."""
    if agent_id in BUILTIN_AGENTS or agent_id in _LEGACY:
        raise BuiltInReadOnly(f"{agent_id!r} is a built-in agent; built-in agents are read-only", agent_id=agent_id)
    agent = check_agent(msgspec.structs.replace(agent, id=agent_id))
    updated = await db.fetchval(Q.agent_update, agent_id, owner, agent.name, agent.role, agent.persona,
                                _profile_json(agent))
    if updated is None:
        raise AgentNotFound(f"no agent {agent_id!r}", agent_id=agent_id)
    return agent


async def delete_agent(db: Database, owner: str, agent_id: str) -> None:
    """Delete ``owner``'s agent: BuiltInReadOnly, AgentNotFound. Runs that cast it keep their cast."""
    if agent_id in BUILTIN_AGENTS or agent_id in _LEGACY:
        raise BuiltInReadOnly(f"{agent_id!r} is a built-in agent; built-in agents are read-only", agent_id=agent_id)
    if await db.fetchval(Q.agent_delete, agent_id, owner) is None:
        raise AgentNotFound(f"no agent {agent_id!r}", agent_id=agent_id)


async def import_agents(db: Database, owner: str, agents: Sequence[Any], *, limit: int = MAX_AGENTS,
                        ) -> tuple[int, list[tuple[str, str]]]:
    """Add each of ``agents`` that can be added; ``(imported, [(id, why skipped)])``. An agent the owner already
    has is kept as it is (existing settings win)."""
    imported, skipped = 0, []
    for agent in agents:
        ident = getattr(agent, "id", "") or ""
        try:
            await create_agent(db, owner, agent, limit=limit)
            imported += 1
        except AgentExists:
            skipped.append((ident, "exists"))
        except BuiltInReadOnly:
            skipped.append((ident, "built-in"))
        except AgentLimitReached:
            skipped.append((ident, "limit"))
        except InvalidAgent as exc:
            skipped.append((ident, f"invalid: {exc.message}"))
    return imported, skipped


async def _custom(db: Database, owner: str, ids: Sequence[str]) -> dict[str, AgentConfig]:
    wanted = [i for i in ids if i not in BUILTIN_AGENTS and i not in _LEGACY]
    if not wanted:
        return {}
    return {r.id: r.agent().config() for r in await db.fetch_as(_AgentRow, Q.agents_by_ids, owner, wanted)}


def _known(agent_id: str) -> AgentConfig | None:
    builtin = BUILTIN_AGENTS.get(agent_id)
    return builtin.config() if builtin is not None else _LEGACY.get(agent_id)


async def unknown_agents(db: Database, owner: str, ids: Sequence[str]) -> list[str]:
    """The ids among ``ids`` that are neither built-in nor ``owner``'s own agents."""
    custom = await _custom(db, owner, ids)
    return [i for i in ids if _known(i) is None and i not in custom]


async def resolve_agents(db: Database, owner: str, ids: Sequence[str]) -> list[AgentConfig]:
    """The profiles of ``ids`` in order (duplicates dropped); NotFound naming the first unknown id."""
    unique = list(dict.fromkeys(ids))
    custom = await _custom(db, owner, unique)
    out = []
    for i in unique:
        profile = _known(i) or custom.get(i)
        if profile is None:
            raise errors.NotFound(f"agent {i!r} no longer exists", agent_id=i)
        out.append(profile)
    return out
