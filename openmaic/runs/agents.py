"""The agent registry: built-in classroom agents in code, custom agents per owner in the database.

Runs reference agents by id. Built-in ids are short words (``teacher``); custom ids start with ``agent_`` and
belong to one owner (another owner's custom agent is as unknown as a missing one). ``agents: "auto"`` leaves the
roster to the model (the run's ``agents`` step asks the ``course.agents`` slot for one).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence

from openmaic import errors
from openmaic.courses.schema import AgentProfile
from openmaic.store.database import Database
from openmaic.store.queries import Q

__all__ = ["AGENT_ID", "BUILTIN_AGENTS", "MAX_PERSONA_CHARS", "create_agent", "list_agents", "resolve_agents", "unknown_agents"]

AGENT_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""The shape of an agent id (OpenMAIC's)."""

MAX_PERSONA_CHARS = 2_000
MAX_NAME_CHARS = 80

BUILTIN_AGENTS: dict[str, AgentProfile] = {
    a.id: a
    for a in (
        AgentProfile(id="teacher", name="Ms. Rivera", role="teacher",
                     persona="A patient teacher who explains with clear steps and concrete examples, checks "
                             "understanding often and welcomes questions."),
        AgentProfile(id="assistant", name="Sam", role="assistant",
                     persona="A teaching assistant who recaps each scene in a few words and answers follow-up "
                             "questions."),
        AgentProfile(id="classmate_1", name="Mia", role="classmate",
                     persona="A classmate: curious and quick to ask for concrete examples."),
        AgentProfile(id="classmate_2", name="Leo", role="classmate",
                     persona="A classmate: a friendly sceptic who likes to test every claim."),
    )
}
"""The built-in agents, by id. Read-only; updated with releases."""


async def create_agent(
    db: Database, owner: str, name: str, role: str, persona: str = "", *, command_id: str | None = None
) -> AgentProfile:
    """Add a custom agent for ``owner``; InvalidInput for an empty or too long name, an unknown role.

    With a ``command_id`` the call is idempotent: the agent's id is derived from the owner and the command id, so
    repeating the call returns the agent it created and writes nothing; the same command id with other fields is
    a CommandConflict.
    """
    name = " ".join(name.split())
    if not name:
        raise errors.InvalidInput("an agent needs a name", path="name")
    if len(name) > MAX_NAME_CHARS:
        raise errors.InvalidInput(f"an agent's name is at most {MAX_NAME_CHARS} characters", path="name")
    if role not in ("teacher", "assistant", "classmate"):
        raise errors.InvalidInput(f"unknown role {role!r}; expected teacher, assistant or classmate", path="role")
    if len(persona) > MAX_PERSONA_CHARS:
        raise errors.InvalidInput(f"an agent's persona is at most {MAX_PERSONA_CHARS} characters", path="persona")
    if command_id is None:
        ident = "agent_" + uuid.uuid4().hex[:16]
    else:
        ident = "agent_" + hashlib.sha256(f"{owner}\n{command_id}".encode()).hexdigest()[:16]
    agent = AgentProfile(id=ident, name=name, role=role, persona=persona.strip())  # type: ignore[arg-type]
    if await db.fetchval(Q.agent_insert, agent.id, owner, agent.name, agent.role, agent.persona) is not None:
        return agent
    existing = (await _custom(db, owner, [agent.id])).get(agent.id)
    if existing != agent:
        raise errors.CommandConflict(
            f"command_id {command_id!r} was already used to create another agent", command_id=command_id
        )
    return agent


async def list_agents(db: Database, owner: str) -> list[AgentProfile]:
    """The built-in agents, then ``owner``'s custom agents in creation order."""
    rows = await db.fetch(Q.agents_of_owner, owner)
    return [*BUILTIN_AGENTS.values(), *(AgentProfile(id=r["id"], name=r["name"], role=r["role"],
                                                      persona=r["persona"]) for r in rows)]


async def _custom(db: Database, owner: str, ids: Sequence[str]) -> dict[str, AgentProfile]:
    wanted = [i for i in ids if i not in BUILTIN_AGENTS]
    if not wanted:
        return {}
    rows = await db.fetch(Q.agents_by_ids, owner, wanted)
    return {r["id"]: AgentProfile(id=r["id"], name=r["name"], role=r["role"], persona=r["persona"]) for r in rows}


async def unknown_agents(db: Database, owner: str, ids: Sequence[str]) -> list[str]:
    """The ids among ``ids`` that are neither built-in nor ``owner``'s custom agents."""
    custom = await _custom(db, owner, ids)
    return [i for i in ids if i not in BUILTIN_AGENTS and i not in custom]


async def resolve_agents(db: Database, owner: str, ids: Sequence[str]) -> list[AgentProfile]:
    """The profiles of ``ids`` in order (duplicates dropped); NotFound naming the first unknown id."""
    unique = list(dict.fromkeys(ids))
    custom = await _custom(db, owner, unique)
    out = []
    for i in unique:
        profile = BUILTIN_AGENTS.get(i) or custom.get(i)
        if profile is None:
            raise errors.NotFound(f"agent {i!r} no longer exists", agent_id=i)
        out.append(profile)
    return out
