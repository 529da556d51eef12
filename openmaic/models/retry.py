"""HTTP access to a model provider: timeouts, retries with backoff, and key-free errors.

One ``Transport`` per configured provider (``label`` names what it serves in messages: "model provider",
"image provider" …). Requests are JSON or multipart POSTs, or GETs (a video task's status and content). A request is retried on 408, 409, 429, any 5xx, connect and read
errors, timeouts (a stream that sends nothing for ``timeout_s`` is a read timeout) and streams that end early,
with full-jitter exponential backoff (base 0.5 s, cap 20 s) or the server's ``Retry-After`` (capped at 60 s),
at most ``max_retries`` times. Any other 4xx is final. Every error raised from here is a ``ProviderError``
with a fixed message built only from the provider's name, status codes and our own words: never the key, the
request headers or a response body.

**An owner's endpoint** (``cfg.owner_endpoint``: a provider an owner saved, not one of ``openmaic.yml``) is called
only through a :class:`~openmaic.models.guard.GuardedClient` (every address checked and pinned at connect time;
``cfg.allow_local`` when the operator lets owners reach local addresses), and every failure reaches the owner as
one fixed message, "the model provider 'x' failed": the remote status, its error token, and whether the address
could not be reached or answered with a refusal, would otherwise let an owner probe the server's network through
it. The server's log keeps the full reason.
"""

from __future__ import annotations

import email.utils
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
import msgspec
import trio

from openmaic.models.errors import ProviderError
from openmaic.models.guard import AddressRefused, GuardedClient, owner_client

log = logging.getLogger("openmaic.models")

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

BASE_DELAY_S = 0.5
MAX_DELAY_S = 20.0
MAX_RETRY_AFTER_S = 60.0
RETRY_STATUSES = frozenset({408, 409, 429})
_ERROR_BODY_LIMIT = 16_384
_TOKEN = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


class RetryableFailure(Exception):
    """One attempt failed in a way worth retrying. ``reason`` is our own fixed wording."""

    def __init__(
        self, reason: str, *, status: int | None = None, retry_after: float | None = None, unsent: bool = False
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after
        self.unsent = unsent
        """The request never reached the provider (the connection was refused or not made in time)."""


class MalformedResponse(Exception):
    """The provider answered 2xx with something that is not the expected stream. ``reason`` is ours."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def backoff_delay(retry: int, rng: random.Random) -> float:
    """Full jitter: uniform in ``[0, min(cap, base * 2**retry)]`` for the ``retry``-th retry (0-based)."""
    return rng.uniform(0.0, min(MAX_DELAY_S, BASE_DELAY_S * (2**retry)))


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or an HTTP date), capped; None if absent."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced."""
    if secret:
        text = text.replace(secret, "[redacted]")
    return text


def error_token(body: bytes) -> str | None:
    """The provider's error code or type from an error body (``model_not_found``), when it is a plain token.

    Only a short identifier is ever taken from a body: free text may echo the request or the key.
    """
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict):
        return None
    for field in ("code", "type"):
        value = err.get(field)
        if isinstance(value, str) and _TOKEN.match(value):
            return value
    return None


def _why_unreachable(exc: Exception) -> str:
    """What kept a request from being made, in words (never the exception's class name)."""
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "its URL does not start with http:// or https://"
    if isinstance(exc, httpx.InvalidURL):
        return "its URL is not valid"
    if isinstance(exc, httpx.ProxyError):
        return "the proxy refused the request"
    if isinstance(exc, httpx.TooManyRedirects):
        return "too many redirects"
    return "the request could not be made"


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"


class Transport:
    """Streaming POSTs to one provider with its timeouts and retry policy.

    ``http`` is a shared ``httpx.AsyncClient`` (its owner closes it); without one, each request uses a
    short-lived client of its own. ``sleep`` and ``rng`` are injectable so tests need not wait.
    """

    def __init__(
        self,
        name: str,
        cfg: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
        label: str = "model provider",
    ) -> None:
        self.name = name
        self.label = label
        self._cfg = cfg
        self._owner_endpoint = bool(getattr(cfg, "owner_endpoint", False))
        self._guarded = self._owner_endpoint and not getattr(cfg, "allow_local", False)
        if self._guarded and not isinstance(http, GuardedClient):
            http = None  # an unguarded shared client is never used for an owner's endpoint: one of ours per request
        self._http = http
        self._sleep: Sleep = sleep or trio.sleep
        self._rng = rng or random.Random()
        self._timeout = httpx.Timeout(float(cfg.timeout_s))

    def key(self) -> str | None:
        """The API key, read when needed so a rotated key file takes effect."""
        return self._cfg.key()

    def extra_headers(self) -> dict[str, str]:
        """Headers the operator configured for this provider."""
        return dict(self._cfg.headers or {})

    def bearer_headers(self, **base: str) -> dict[str, str]:
        """``base`` headers, the key as ``Authorization: Bearer`` (when there is one), then the operator's own."""
        headers = dict(base)
        key = self.key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        headers.update(self.extra_headers())
        return headers

    async def stream(
        self,
        url: str,
        headers: dict[str, str],
        body: dict[str, Any],
        consume: Callable[[httpx.Response], Awaitable[T]],
        *,
        on_retry: Callable[[], None] | None = None,
    ) -> T:
        """POST ``body`` as JSON and hand a 2xx response to ``consume``, retrying per the policy.

        ``consume`` reads the stream and may raise ``RetryableFailure`` or ``MalformedResponse``.
        ``on_retry`` is called before each new attempt: output streamed so far should be discarded.
        """
        return await self.send("POST", url, headers, consume, json_body=body, on_retry=on_retry)

    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        consume: Callable[[httpx.Response], Awaitable[T]],
        *,
        json_body: dict[str, Any] | None = None,
        form: dict[str, str] | None = None,
        on_retry: Callable[[], None] | None = None,
        idempotent: bool = True,
    ) -> T:
        """Send one request (a JSON body, a multipart ``form``, or none) under the retry policy; see ``stream``.

        A request that is not ``idempotent`` (submitting a paid task) is retried only when the provider cannot
        have acted on it: a refused connection, or an answer of 408/409/429/5xx. A connection lost or timed out
        after the request went out is final, since the provider may have accepted it.
        """
        if not self._owner_endpoint:
            return await self._send_retrying(method, url, headers, consume, json_body=json_body, form=form,
                                             on_retry=on_retry, idempotent=idempotent)
        try:
            return await self._send_retrying(method, url, headers, consume, json_body=json_body, form=form,
                                             on_retry=on_retry, idempotent=idempotent)
        except ProviderError as exc:
            # The whole reason stays in the server's log; the owner learns only that their provider failed (see
            # the module docstring), and nothing of it is chained to what they see.
            log.warning("%s %r (an owner's endpoint): %s", self.label, self.name, exc.message)
            raise ProviderError(f"the {self.label} {self.name!r} failed; check its settings on the Models page",
                                provider=self.name) from None

    async def _send_retrying(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        consume: Callable[[httpx.Response], Awaitable[T]],
        *,
        json_body: dict[str, Any] | None,
        form: dict[str, str] | None,
        on_retry: Callable[[], None] | None,
        idempotent: bool,
    ) -> T:
        attempts = max(0, int(self._cfg.max_retries)) + 1
        payload: dict[str, Any] = {}
        if json_body is not None:
            payload["content"] = msgspec.json.encode(json_body)
        elif form is not None:
            # Every field as a form part without a file name: multipart/form-data, as the vendors' SDKs send it.
            payload["files"] = {k: (None, v) for k, v in form.items()}
        if method == "GET":
            # Downloads may be redirected to storage; httpx drops the Authorization header on another origin.
            payload["follow_redirects"] = True
        last: RetryableFailure | None = None
        for n in range(1, attempts + 1):
            try:
                return await self._attempt(method, url, headers, payload, consume)
            except RetryableFailure as failure:
                last = failure
                if n == attempts:
                    break
                if not idempotent and failure.status is None and not failure.unsent:
                    raise ProviderError(
                        f"the {self.label} {self.name!r} did not answer a request that is never sent twice "
                        f"({failure.reason})",
                        provider=self.name,
                    ) from failure.__cause__
                delay = failure.retry_after if failure.retry_after is not None else backoff_delay(n - 1, self._rng)
                log.warning(
                    "%s %r: %s; retry %d of %d in %.2f s",
                    self.label,
                    self.name,
                    failure.reason,
                    n,
                    attempts - 1,
                    delay,
                )
                if on_retry is not None:
                    on_retry()
                await self._sleep(delay)
        assert last is not None
        raise ProviderError(
            f"the {self.label} {self.name!r} failed after {_attempts(attempts)} ({last.reason})",
            provider=self.name,
            attempts=attempts,
            status=last.status,
        ) from last.__cause__

    async def _attempt(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        payload: dict[str, Any],
        consume: Callable[[httpx.Response], Awaitable[T]],
    ) -> T:
        try:
            if self._http is None and self._guarded:
                async with owner_client() as client:
                    return await self._send(client, method, url, headers, payload, consume)
            if self._http is None:
                # A provider behind its own proxy gets a client of its own (see ModelRouter).
                async with httpx.AsyncClient(timeout=self._timeout, proxy=getattr(self._cfg, "proxy", None)) as client:
                    return await self._send(client, method, url, headers, payload, consume)
            return await self._send(self._http, method, url, headers, payload, consume)
        except AddressRefused:
            raise  # final: the same name would be refused again
        except httpx.ConnectTimeout as exc:
            raise RetryableFailure("timed out", unsent=True) from exc
        except httpx.TimeoutException as exc:
            raise RetryableFailure("timed out") from exc
        except httpx.ConnectError as exc:
            raise RetryableFailure("could not connect", unsent=True) from exc
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.CloseError) as exc:
            raise RetryableFailure("connection lost") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ProviderError(
                f"the {self.label} {self.name!r} could not be reached ({_why_unreachable(exc)}); check its base_url",
                provider=self.name,
            ) from exc
        except MalformedResponse as exc:
            raise ProviderError(
                f"the {self.label} {self.name!r} sent a malformed response ({exc.reason})",
                provider=self.name,
            ) from None

    async def _send(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        headers: dict[str, str],
        payload: dict[str, Any],
        consume: Callable[[httpx.Response], Awaitable[T]],
    ) -> T:
        async with client.stream(method, url, headers=headers, timeout=self._timeout, **payload) as response:
            status = response.status_code
            if status in RETRY_STATUSES or status >= 500:
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                raise RetryableFailure(f"HTTP {status}", status=status, retry_after=retry_after)
            if status >= 400:
                raise self._rejected(status, await _read_limited(response))
            if status >= 300 or status < 200:
                raise ProviderError(
                    f"the {self.label} {self.name!r} answered HTTP {status}; check its base_url",
                    provider=self.name,
                    status=status,
                )
            return await consume(response)

    def _rejected(self, status: int, body: bytes) -> ProviderError:
        token = error_token(body)
        token = redact(token, self.key()) if token else None
        what = f"HTTP {status}, {token}" if token else f"HTTP {status}"
        hint = ""
        if status in (401, 403):
            hint = "; check its API key"
        elif status == 404:
            hint = "; check its base_url and the model name"
        return ProviderError(
            f"the {self.label} {self.name!r} rejected the request ({what}){hint}",
            provider=self.name,
            status=status,
        )


async def _read_limited(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    body = response.aiter_bytes()
    async for chunk in body:
        chunks.append(chunk)
        size += len(chunk)
        if size >= _ERROR_BODY_LIMIT:
            await unwind(body, cancel_now=True)
            break
    return b"".join(chunks)[:_ERROR_BODY_LIMIT]


async def unwind(iterator: AsyncIterator[Any], *, cancel_now: bool, drain_s: float = 0.5) -> None:
    """Finish an httpx body iterator that was left part-way, without abandoning its inner generators.

    httpx's body iterators are nested async generators; breaking out of one leaves the inner ones to the
    garbage collector (a ResourceWarning under trio, and the connection's fate left to chance). Draining a
    finished body lets the connection go back to the pool; with ``cancel_now`` the iteration resumes in an
    already cancelled scope, so Cancelled is raised at the next network read inside the innermost generator
    and unwinds them all (the connection is closed).
    """
    with trio.move_on_after(drain_s) as scope:
        if cancel_now:
            scope.cancel()
        try:
            async for _ in iterator:
                pass
        except Exception:
            pass  # the chain ended with an error of its own: unwound all the same
