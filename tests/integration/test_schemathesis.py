"""Every HTTP operation in the server's own OpenAPI document, fuzzed by schemathesis against a real
`openmaic serve`: valid and invalid bodies, queries and path parameters. No answer may be a 5xx.

WebSocket routes and SSE-only routes are skipped (schemathesis cannot speak them, and an SSE response never ends).
"""

from __future__ import annotations

import pytest
import trio

from tests.serving import running_server

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")

EXAMPLES = 12  # per operation and generation mode: keeps the whole test well under a minute
SKIP_PATHS = {"/api/generation-runs/events", "/api/agent/owner-events", "/api/classrooms/events"}  # SSE feeds


@pytest.fixture
async def server(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, port):
        yield client, f"http://127.0.0.1:{port}", tmp_path / "0-all.stderr"


def _skipped(path: str) -> bool:
    # A stream's SSE on an existing id never ends; on a made-up one it is a 404 like any read (tested elsewhere).
    return path in SKIP_PATHS or path.endswith(("/ws", "/events"))


def _fuzz(document: dict, base: str) -> tuple[int, list[str]]:
    from hypothesis import HealthCheck, Phase, given, settings

    schema = schemathesis.openapi.from_dict(document)
    failures: list[str] = []
    calls = 0
    operations = [r.ok() for r in schema.get_all_operations()]
    assert operations, "the OpenAPI document lists no operations"
    for op in operations:
        if _skipped(op.path):
            continue
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode))
            def check(case) -> None:
                nonlocal calls
                calls += 1
                response = case.call(base_url=base, timeout=15)
                if response.status_code >= 500:
                    failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}\n"
                                    f"  curl: {case.as_curl_command()}\n  body: {response.text[:500]}")

            try:
                check()
            except hypothesis.errors.Unsatisfiable:
                # Nothing to make invalid: the operation takes no parameters and no body.
                assert mode is schemathesis.GenerationMode.NEGATIVE, op.label
    return calls, failures


async def test_no_operation_answers_with_a_server_error(server):
    client, base, log = server
    document = (await client.get("/api/openapi.json")).json()
    with trio.fail_after(120):
        calls, failures = await trio.to_thread.run_sync(_fuzz, document, base)
    assert calls > 50
    assert not failures, "\n".join(failures) + "\n--- server stderr ---\n" + log.read_text()[-8000:]
