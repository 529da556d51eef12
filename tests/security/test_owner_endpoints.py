"""An owner's endpoint cannot reach the server's own network: not by an IP address written in a form parsers read
differently, not by a name that resolves (or is rebound) to an internal address. And what an owner learns when
their endpoint fails is that it failed: no remote status, no error token, no "could not connect" against
"rejected" that would tell open ports from closed ones.

Before, ``http://127.1:PORT/v1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``0``, ``localhost.`` and any
name resolving to 127.0.0.1 were saved and called, and the run's error carried the internal service's status.
Every test here has a real listener on 127.0.0.1 that must receive nothing.
"""

from __future__ import annotations

import datetime
import functools
import json
import ssl
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from openmaic.config import parse_config
from openmaic.modelconfig.layer import ModelLayer, ProviderSpec
from openmaic.models.errors import ProviderError
from openmaic.models.guard import owner_client
from openmaic.models.provider import ModelRouter
from openmaic.models.types import UserMessage
from openmaic.secret import Secret
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from tests.serving import FAST_CONFIG, running_server

KEY = "sk-owner-endpoint-SECRET-0123456789"
FORMS = ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0", "localhost.", "localhost"]
"""Hosts that name this machine; the first six were accepted and called before."""


@dataclass
class Listener:
    """A TCP listener on 127.0.0.1 that records every connection and answers any request 401 with an error token."""

    port: int
    connections: list[bytes] = field(default_factory=list)

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.serve_tcp(self._handle, self.port, host="127.0.0.1", task_status=task_status)

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections.append(b"")
        data = b""
        with trio.move_on_after(5):
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                data += chunk
        self.connections[-1] = data
        body = json.dumps({"error": {"code": "internal_admin_token_required", "message": "no"}}).encode()
        head = f"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n" \
               "connection: close\r\n\r\n"
        try:
            await stream.send_all(head.encode() + body)
        except trio.BrokenResourceError:
            pass
        await stream.aclose()


@asynccontextmanager
async def listening() -> AsyncIterator[Listener]:
    listener = Listener(free_port())
    async with trio.open_nursery() as nursery:
        await nursery.start(listener.serve)
        try:
            yield listener
        finally:
            nursery.cancel_scope.cancel()


async def test_the_forms_and_local_names_are_refused_when_saved(db_url, tmp_path):
    async with listening() as target, running_server(db_url, tmp_path) as (client, _):
        for host in [*FORMS, "127.0.0.1.", "[::ffff:127.0.0.1]", "[::1]", "10.0.0.1", "100.64.0.1", "169.254.169.254",
                     "0.0.0.0", "user@example.com"]:
            r = await client.put("/api/model-config", json={"revision": None, "change": {
                "kind": "provider", "id": "mine", "preset": "openai-compatible", "apiKey": KEY,
                "baseUrl": f"http://{host}:{target.port}/v1", "models": ["m"]}})
            assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_PROVIDER", (host, r.text)
        assert (await client.get("/api/model-config")).json()["revision"] is None
    assert target.connections == []


async def _paused(client: httpx.AsyncClient, run_id: str) -> dict:
    with trio.fail_after(60):
        while (run := (await client.get(f"/api/generation-runs/{run_id}")).json()["run"])["state"] != "paused":
            assert run["state"] not in ("completed", "ended"), run
            await trio.sleep(0.1)
    return run


async def test_a_stored_endpoint_that_resolves_to_this_machine_is_never_called(db_url, tmp_path):
    """The endpoint is checked again when the server connects: a provider stored with a name that resolves to an
    internal address (saved before this check, or a name rebound since) is refused there, with nothing sent."""
    async with listening() as target, running_server(db_url, tmp_path, FAST_CONFIG) as (client, _):
        public = "https://api.example.com/v1"
        r = await client.put("/api/model-config", json={"revision": None, "change": {
            "kind": "provider", "id": "mine", "preset": "openai-compatible", "apiKey": KEY, "baseUrl": public,
            "models": ["m"]}})
        assert r.status_code == 200, r.text
        r = await client.put("/api/model-config", json={"revision": 1, "change": {
            "kind": "slots", "set": {"llm": "mine:m", "course.outline": "mine:m"}}})
        assert r.status_code == 200, r.text
        messages = set()
        async with open_database(db_url, max_size=1) as db:
            for host in FORMS:
                url = f"http://{host}:{target.port}/v1"
                await db.execute("UPDATE model_settings SET config = jsonb_set(config, '{providers,mine,baseUrl}', "
                                 "to_jsonb($1::text))", url)
                started = await client.post("/api/generation-runs", json={"requirement": f"Volcanoes {host}",
                                                                           "outlineReview": "auto"})
                assert started.status_code == 202, started.text
                run = await _paused(client, started.json()["run"]["id"])
                messages.add(run["error"]["message"])
        assert target.connections == []
        assert messages == {"the model provider 'mine' failed; check its settings on the Models page"}, messages


def _workspace(url: str) -> ModelLayer:
    return ModelLayer(source="workspace", providers={"mine": ProviderSpec(
        preset="openai-compatible", base_url=url, api_key=Secret(KEY), models=("m",))}, slots={"llm": "mine:m"})


async def _call(router: ModelRouter, url: str) -> str:
    provider, model = router.for_slot("llm", workspace=_workspace(url))
    with pytest.raises(ProviderError) as failed:
        await provider.stream_turn(model, [UserMessage(text="the system prompt")], [], on_delta=lambda _: None)
    return failed.value.message


async def _no_sleep(seconds: float) -> None:
    pass


async def test_a_name_resolving_to_an_internal_address_is_refused_at_connect_time():
    """A resolver hook plays the name: every address it gives is checked, the internal one anywhere in the list."""
    config = parse_config("", source="<test>", env={})
    async with listening() as target:
        answers = {"internal.example": ["127.0.0.1"], "mixed.example": ["93.184.215.14", "127.0.0.1"]}

        async def resolve(host: str, port: int) -> list[str]:
            return answers[host]

        async with owner_client(resolve=resolve) as guarded:
            router = ModelRouter(config, owner_http=guarded, sleep=_no_sleep)
            for name in answers:
                message = await _call(router, f"http://{name}:{target.port}/v1")
                assert message == "the model provider 'mine' failed; check its settings on the Models page"
        assert target.connections == []


async def test_the_checked_address_is_the_one_connected_to():
    """The connection goes to the address the check saw, with the URL's name as Host: nothing resolves the name a
    second time (the system resolver does not know it at all)."""
    async with listening() as target:
        async def resolve(host: str, port: int) -> list[str]:
            assert host == "rebound.invalid"
            return ["127.0.0.1"]

        async with owner_client(resolve=resolve, refuse=lambda address: False) as client:
            r = await client.get(f"http://rebound.invalid:{target.port}/v1/models")
        assert r.status_code == 401
        assert len(target.connections) == 1
        assert f"host: rebound.invalid:{target.port}".encode() in target.connections[0].lower()


def _certificate(name: str) -> tuple[bytes, bytes]:
    """A self-signed certificate for ``name`` and its key, PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


async def test_https_to_a_pinned_address_still_sends_and_checks_the_name(tmp_path):
    """Over TLS the pinned connection offers the URL's name (SNI), the certificate is checked against that name,
    and ``Host`` is the name: pinning changes where the socket goes, nothing else."""
    cert, key = _certificate("models.example")
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    names: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc]
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    port = free_port()
    requests: list[bytes] = []

    async def handle(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, server_ctx, server_side=True)
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await tls.receive_some(65536)
            requests.append(data)
            await tls.send_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
            await tls.aclose()
        except (trio.BrokenResourceError, ssl.SSLError):
            pass  # the client refused the certificate

    async def resolve(host: str, p: int) -> list[str]:
        return ["127.0.0.1"]

    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(trio.serve_tcp, handle, port, host="127.0.0.1"))
        async with owner_client(resolve=resolve, refuse=lambda address: False, ssl_context=client_ctx) as client:
            r = await client.get(f"https://models.example:{port}/v1/models")
            assert r.status_code == 204
            with pytest.raises(httpx.ConnectError) as refused:
                await client.get(f"https://other.example:{port}/v1/models")  # same address, another name
            causes = []
            cause: BaseException | None = refused.value
            while cause is not None:
                causes.append(cause)
                cause = cause.__cause__ or cause.__context__
            assert any(isinstance(c, ssl.SSLCertVerificationError) and "Hostname mismatch" in str(c) for c in causes)
        nursery.cancel_scope.cancel()
    assert names[:2] == ["models.example", "other.example"]
    assert f"host: models.example:{port}".encode() in requests[0].lower()


async def test_an_owners_endpoint_fails_alike_on_open_and_closed_ports():
    """With local endpoints allowed (so both are reached), a closed port and one answering 401 with an error token
    give the owner the same words, and neither the status nor the token."""
    config = parse_config("server: {allow_local_endpoints: true}", source="<test>", env={})
    closed = free_port()
    async with listening() as target, owner_client() as guarded:
        router = ModelRouter(config, owner_http=guarded, sleep=_no_sleep, rng=random.Random(1))
        refused = await _call(router, f"http://127.0.0.1:{closed}/v1")
        answered = await _call(router, f"http://127.0.0.1:{target.port}/v1")
        assert len(target.connections) == 1  # the open port was reached and answered 401
    assert refused == answered == "the model provider 'mine' failed; check its settings on the Models page"
    assert "401" not in answered and "internal_admin_token_required" not in answered
