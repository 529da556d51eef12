"""GET /api/openapi.json is a valid OpenAPI 3.1 document (openapi-spec-validator) describing every declared route:
its parameters, its request body (JSON or upload), its success response (JSON, text, SSE) and its errors.

The checks are generic over the routes the app declares, so a route added later is held to them too."""

from __future__ import annotations

import msgspec
import pytest
from openapi_spec_validator import validate

from openmaic.api import health, operators
from openmaic.api.openapi import build_openapi
from openmaic.api.wire import encode
from openmaic.config import parse_config

from openmaic.api.app import CORE_BLUEPRINTS
from openmaic.api.resources import resource_blueprints
from openmaic.api.routing import routes_of
from tests.integration.api_harness import make_config, running_api

MODES = {
    "single_user": "",
    "token": "identity: {mode: token}",
    "anonymous": "identity: {mode: anonymous}",
    "trusted_header": "identity: {mode: trusted_header, trusted_proxies: [127.0.0.1]}",
}


@pytest.mark.parametrize("mode", MODES)
async def test_the_served_document_is_valid_openapi_31_and_covers_every_route(db, mode):
    blueprints = resource_blueprints()
    async with running_api(db, make_config(MODES[mode]), blueprints=blueprints) as api, api.client() as client:
        r = await client.get("/api/openapi.json")
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        doc = r.json()
    routes = [spec for bp in (*CORE_BLUEPRINTS, *blueprints) for spec in routes_of(bp)]
    validate(doc)  # raises, naming the first violation, when the document is not valid OpenAPI 3.1
    assert doc["openapi"].startswith("3.1")
    assert len(routes) >= 20
    declared = {(spec.path, "get" if spec.websocket else spec.method.lower()) for spec in routes}
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert documented == declared
    for spec in routes:
        op = doc["paths"][spec.path]["get" if spec.websocket else spec.method.lower()]
        where = f"{spec.method} {spec.path}"
        assert {p["name"] for p in op.get("parameters", []) if p["in"] == "path"} == set(spec.path_params), where
        if spec.websocket:
            assert "101" in op["responses"], where
            continue
        if spec.body is not None:
            assert "application/json" in op["requestBody"]["content"], where
        elif spec.upload is not None:
            content = op["requestBody"]["content"]
            if spec.upload != "raw":
                assert spec.upload_field in content["multipart/form-data"]["schema"]["required"], where
            if spec.upload != "multipart":
                assert "*/*" in content, where
        else:
            assert "requestBody" not in op, where
        ok = op["responses"][str(spec.status)]
        if spec.status != 204:
            assert ok.get("content"), f"{where}: the success response has no content"
        if spec.sse:
            assert "text/event-stream" in ok["content"], where
        body = {"$ref": "#/components/schemas/" + ("JsonErrorBody" if spec.error_style in ("json", "storage", "asset")
                                                      else "ApiErrorBody")}
        for status, response in op["responses"].items():
            if status == "404" and spec.plain_not_found:
                assert set(response["content"]) == {"text/plain"}, where
            elif status.startswith(("4", "5")):
                assert response["content"]["application/json"]["schema"] == body, (where, status)
    upload = doc["paths"]["/api/materials"]["post"]
    assert set(upload["requestBody"]["content"]) == {"multipart/form-data", "*/*"}
    assert "X-Material-Filename" in {p["name"] for p in upload["parameters"] if p["in"] == "header"}
    assert set(upload["responses"]["201"]["content"]) == {"application/json"}


def test_the_admin_listeners_document_is_valid_too():
    """The admin listener serves the operational routes and the operators' API; its document is checked alike."""
    routes = [spec for bp in (health.bp, operators.bp) for spec in routes_of(bp)]
    doc = msgspec.json.decode(encode(build_openapi(routes, parse_config("", source="<test>", env={}).identity)))
    validate(doc)
    assert {"/api/admin/sessions", "/api/admin/sessions/{id}", "/api/admin/sessions/{id}/cancel",
            "/api/admin/runs/{id}/retry"} <= set(doc["paths"])  # fmt: skip
    cancel = doc["paths"]["/api/admin/sessions/{id}/cancel"]["post"]
    assert "403" in cancel["responses"] and "application/json" in cancel["requestBody"]["content"]
