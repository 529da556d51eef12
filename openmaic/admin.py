"""The admin listener: ``/healthz``, ``/readyz`` and ``/metrics`` on a port of their own, and the operators' API.

A process with the API role serves these on the API's port; a worker or projector process serves no HTTP of its
own, so without this listener it could be neither probed nor scraped. The listener runs the same routes as the
API (:mod:`openmaic.api.health`, through :func:`~openmaic.api.app.create_app` with only that blueprint), so a
worker's ``/readyz`` checks what the API's does and answers in the same shape, and its ``/metrics`` reports the
process's own counters (claims, takeovers, lease losses, steps) beside the gauges read from the database.

Which port: ``--admin-port`` (env ``OPENMAIC_ADMIN_PORT``, else ``server.admin_port``); when none is given,
:data:`DEFAULT_ADMIN_PORT` for a process without the API role and no listener for one with it. A port that was
asked for and cannot be bound stops the process; the default one, taken by another process of the host (a second
worker), only turns the listener off, with a warning. It binds the
same host as the API (``--host``). It is started after the roles (so a ready answer means they run) and stopped
after they have wound down, so probes keep answering through a graceful shutdown.

The operators' API (``/api/admin/…``, :mod:`openmaic.api.operators`) is served here and only here: the public
API's port never offers it.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
from quart_trio import QuartTrio

from openmaic import probes
from openmaic.api import health, operators
from openmaic.api.app import create_app
from openmaic.api.server import Listening, serve_api
from openmaic.api.services import ApiServices
from openmaic.config import Config
from openmaic.services import Services

__all__ = ["DEFAULT_ADMIN_PORT", "admin_app", "admin_port", "is_default_admin_port", "serve_admin"]

DEFAULT_ADMIN_PORT = 8001


def admin_port(roles: Sequence[str], flag: int | None, config: Config) -> int | None:
    """The port the admin listener takes in a process running ``roles``, or None for no listener."""
    if flag is not None:
        return flag
    if config.server.admin_port is not None:
        return config.server.admin_port
    return None if "api" in roles else DEFAULT_ADMIN_PORT


def is_default_admin_port(roles: Sequence[str], flag: int | None, config: Config) -> bool:
    """Whether the admin listener's port is the default one (nobody asked for it): taking it may fail harmlessly
    when another process of this host has it, and the process then serves without it."""
    return flag is None and config.server.admin_port is None and "api" not in roles


def admin_app(services: Services, *, listen_host: str | None = None) -> QuartTrio:
    """The admin listener's app: the API's operational routes only, over this process's services. Requests must
    name one of the server's hosts, as on the API's port (a rebinding page must not reach the operators' routes
    that answer this host's clients)."""
    api = ApiServices(db=services.db, log=services.log, wakeups=services.wakeups, config=services.config,
                      metric_samplers=probes.samplers(services.db, stuck_queued_s=services.config.runtime.stuck_queued_s))  # fmt: skip
    # Not behind ACCESS_CODE: that code admits the public API's users, and the operators' routes answer only an
    # operator (server.admin_token, else this host's clients); probes and scrapes carry no cookie.
    return create_app(api, core=(health.bp,), blueprints=(operators.bp,), access_gate=False, listen_host=listen_host)


async def serve_admin(
    services: Services, host: str, port: int, *, task_status: trio.TaskStatus[Listening] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve the admin listener until cancelled; reports where it listens."""
    await serve_api(admin_app(services, listen_host=host), host, port, name="admin listener",
                    task_status=task_status)
