"""The OpenAPI 3.1 document, built from the declared routes (:func:`openmaic.api.routing.api_route`).

Schemas come from the routes' msgspec types through ``msgspec.json.schema_components`` (JSON Schema 2020-12,
which OpenAPI 3.1 uses as is). WebSocket routes have no OpenAPI operation type: they appear as a ``get`` with a
``101`` response and the extensions ``x-websocket-receives`` / ``x-websocket-sends`` pointing at the schemas of
the messages each side sends.
"""

from __future__ import annotations

from typing import Any

import msgspec

from openmaic.api.errors import ApiErrorBody, JsonErrorBody
from openmaic.api.idempotency import DESCRIPTION as IDEMPOTENCY
from openmaic.api.idempotency import HEADER as IDEMPOTENCY_HEADER
from openmaic.api.routing import RouteSpec
from openmaic.capabilities import server_version
from openmaic.config import IdentityConfig

__all__ = ["build_openapi"]

REF = "#/components/schemas/{name}"

_ERROR_TEXT = {
    400: "The body is not valid JSON, or a parameter or field is invalid (details.path names it); a missing "
         "required field is MISSING_REQUIRED_FIELD.",
    401: "Who you are could not be established.",
    404: "No such resource, or it belongs to someone else (the two are indistinguishable).",
    409: "The request conflicts with the current state.",
    413: "The body is larger than this route accepts (details.limit).",
    415: "This route does not accept this content type.",
    429: "Too many requests of this kind for this owner.",
    500: "Unexpected error; details.ref finds it in the server log.",
    503: "A dependency of this route is unavailable.",
}

_SECURITY: dict[str, tuple[str, dict[str, Any]]] = {
    "token": ("bearerAuth", {"type": "http", "scheme": "bearer", "description": "openmaic tokens create"}),
    "anonymous": ("ownerCookie", {"type": "apiKey", "in": "cookie", "name": "",
                                  "description": "the owner's id, as OpenMAIC's anonymous_id cookie"}),
    "trusted_header": ("proxyUser", {"type": "apiKey", "in": "header", "name": "", "description": "set by the proxy"}),
}


def build_openapi(routes: list[RouteSpec], identity: IdentityConfig) -> dict[str, Any]:
    """The OpenAPI document for ``routes``, with the security scheme of the configured identity mode."""
    types: list[Any] = [ApiErrorBody, JsonErrorBody]
    for r in routes:
        types += [t for t in (r.body, r.response, r.query, r.ws_receives, r.ws_sends, r.sse_data) if t is not None]
    unique = list(dict.fromkeys(types))
    schemas, components = msgspec.json.schema_components(unique, ref_template=REF)
    schema_of = dict(zip(unique, schemas, strict=True))

    security: list[dict[str, list[str]]] = []
    schemes: dict[str, Any] = {}
    if identity.mode in _SECURITY:
        name, scheme = _SECURITY[identity.mode]
        scheme = dict(scheme)
        if identity.mode == "anonymous":
            scheme["name"] = identity.cookie_name
        elif identity.mode == "trusted_header":
            scheme["name"] = identity.user_header
        schemes[name] = scheme
        security = [{name: []}]

    paths: dict[str, dict[str, Any]] = {}
    for r in routes:
        op = _operation(r, schema_of, components)
        if r.auth and security:
            op["security"] = security
        elif not r.auth:
            op["security"] = []
        paths.setdefault(r.path, {})["get" if r.websocket else r.method.lower()] = op

    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "openmaic",
            "version": server_version(),
            "description": "Durable, event-sourced course-generation sessions, speaking OpenMAIC 1.2's wire "
            'contract. Errors are {"success": false, "errorCode", "error", "details"?} (jsonErr routes: '
            '{"error": {"code", "message", "details"?}}); owner-scoped routes answer every 404 with the text '
            '"Not found".',
        },
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(components.items()))},
    }
    if schemes:
        doc["components"]["securitySchemes"] = schemes
    return doc


def _operation(r: RouteSpec, schema_of: dict[Any, Any], components: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": f"{r.blueprint}.{r.endpoint}", "tags": [r.blueprint]}
    if r.summary:
        op["summary"] = r.summary
    if r.description:
        op["description"] = r.description
    params: list[dict[str, Any]] = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in r.path_params
    ]
    if r.query is not None:
        params += _query_parameters(schema_of[r.query], components)
    if r.sse:
        params.append({
            "name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"},
            "description": "SSE only: resume after this seq (wins over after).",
        })  # fmt: skip
    params += [{"name": h, "in": "header", "required": False, "schema": {"type": "string"}} for h in r.upload_headers]
    if r.idempotent:
        params.append({"name": IDEMPOTENCY_HEADER, "in": "header", "required": False, "description": IDEMPOTENCY,
                       "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"}})
    if params:
        op["parameters"] = params
    if r.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema_of[r.body]}}}
    elif r.upload is not None:
        content: dict[str, Any] = {}
        if r.upload in ("multipart", "raw_or_multipart"):
            content["multipart/form-data"] = {"schema": {
                "type": "object", "required": [r.upload_field],
                "properties": {r.upload_field: {"type": "string", "contentMediaType": "application/octet-stream",
                                                "description": "The file, with its name and type."}},
            }}  # fmt: skip
        if r.upload in ("raw", "raw_or_multipart"):
            content["*/*"] = {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}
        op["requestBody"] = {"required": True, "content": content,
                             "description": "The file: its raw bytes (Content-Type says what they are), or a "
                                            f"multipart form with the field {r.upload_field}."}  # fmt: skip

    responses: dict[str, Any] = {}
    if r.websocket:
        responses["101"] = {"description": "Switching Protocols: the WebSocket is open."}
        if r.ws_receives is not None:
            op["x-websocket-receives"] = schema_of[r.ws_receives]
        if r.ws_sends is not None:
            op["x-websocket-sends"] = schema_of[r.ws_sends]
    else:
        ok: dict[str, Any] = {"description": "Success."}
        content: dict[str, Any] = {}
        if r.response is not None:
            content[r.media_type] = {"schema": schema_of[r.response]}
        elif r.sse or r.status == 204:
            pass
        elif r.media_type == "application/json":
            # A route that returns JSON without declaring its type still answers JSON: any value, said so.
            content[r.media_type] = {"schema": {"description": "Not declared by the route: any JSON value."}}
        else:
            content[r.media_type] = {"schema": {"type": "string"}}
        if r.sse:
            # OpenAPI 3.1 has no schema for an event stream's frames: the stream is a string, the data of each
            # frame is described by x-sse-data, and the framing in the response's description.
            stream: dict[str, Any] = {"schema": {"type": "string"}}
            if r.sse_data is not None:
                stream["x-sse-data"] = schema_of[r.sse_data]
            content["text/event-stream"] = stream
            ok["description"] = ("Success. With Accept: text/event-stream, a server-sent-event stream: frames "
                                 "'id: <seq>' and 'data: <JSON>', an 'event: caught_up' frame once the backlog is "
                                 "sent, then live frames and ': ping' comments.")  # fmt: skip
        if content:
            ok["content"] = content
        responses[str(r.status)] = ok

    statuses = set(r.errors) | {500}
    if r.body is not None:
        statuses |= {400, 413}
    if r.upload is not None:
        statuses.add(413)
    if r.query is not None:
        statuses.add(400)
    if r.auth:
        statuses.add(401)
    if r.path_params:
        statuses.add(404)
    body = "JsonErrorBody" if r.error_style == "json" else "ApiErrorBody"
    error = {"application/json": {"schema": {"$ref": REF.format(name=body)}}}
    for status in sorted(statuses):
        content = error
        if status == 404 and r.plain_not_found:
            content = {"text/plain": {"schema": {"type": "string", "const": "Not found"}}}
        responses[str(status)] = {"description": _ERROR_TEXT.get(status, "Error."), "content": content}
    op["responses"] = responses
    return op


def _query_parameters(schema: dict[str, Any], components: dict[str, Any]) -> list[dict[str, Any]]:
    """A query Struct's fields as OpenAPI parameters."""
    ref = schema.get("$ref", "")
    obj = components.get(ref.rsplit("/", 1)[-1], schema)
    required = set(obj.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in obj.get("properties", {}).items()
    ]
