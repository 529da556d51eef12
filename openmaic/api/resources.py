"""The resource routes of the public API, and the services they are served with.

Every route module declares its routes on its own blueprint (:mod:`openmaic.api.headless`,
:mod:`~openmaic.api.generation_runs`, :mod:`~openmaic.api.classrooms`, :mod:`~openmaic.api.materials`,
:mod:`~openmaic.api.agents`, :mod:`~openmaic.api.agent_sessions`, the workbench page :mod:`~openmaic.api.web`);
:func:`resource_blueprints` lists them for ``create_app``. Every write is a service call the stream WebSocket
makes too; every read is scoped to the caller's owner id, and another owner's resource is the same 404 as a
missing one.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint

from openmaic import probes
from openmaic.actors.commands import Commands as SessionCommands
from openmaic.api import (
    access_routes, agent_sessions, agents, assets, browser_import, claims, classroom_chat, classrooms, generation_runs,
    headless, materials, model_config, persistence, persistence_assets, persistence_documents, persistence_library,
    persistence_runtime, quiz_grade, web,
)
from openmaic.api.services import ApiServices
from openmaic.runs.service import RunService
from openmaic.workbench.service import WorkbenchSessions

__all__ = ["api_services", "resource_blueprints"]


def api_services(services: Any) -> ApiServices:
    """The API's view of a process's shared services (see :mod:`openmaic.services`)."""
    log = services.log
    return ApiServices(
        db=services.db, log=log, wakeups=services.wakeups, config=services.config,
        runs=RunService(log, services.config),
        sessions=WorkbenchSessions(log, SessionCommands(log, message_kinds=["workbench"]), services.config.limits),
        extractor=services.extractor, models=services.models,
        metric_samplers=probes.samplers(services.db, stuck_queued_s=services.config.runtime.stuck_queued_s),
    )


def resource_blueprints() -> list[Blueprint]:
    return [access_routes.bp, browser_import.bp, claims.bp, headless.bp, generation_runs.bp, classrooms.bp,
            materials.bp, model_config.bp, agents.bp, agent_sessions.bp, web.bp, assets.bp, persistence.bp,
            persistence_assets.bp, persistence_documents.bp, persistence_library.bp, persistence_runtime.bp,
            quiz_grade.bp, classroom_chat.bp]
