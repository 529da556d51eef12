"""The HTTP API: a quart-trio app served by hypercorn's trio worker.

* :func:`create_app` builds the app from :class:`ApiServices` (it only serves; it starts no durable work);
* :func:`api_route` is the one way routes are declared (it feeds the OpenAPI document);
* :func:`serve_api` runs the app as a task of the caller's nursery.
"""

from openmaic.api.app import create_app
from openmaic.api.routing import Call, api_route
from openmaic.api.server import Listening, serve_api
from openmaic.api.services import ApiServices, CommandResult

__all__ = ["ApiServices", "Call", "CommandResult", "Listening", "api_route", "create_app", "serve_api"]
