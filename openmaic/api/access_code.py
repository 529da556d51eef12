"""The ``ACCESS_CODE`` gate, as OpenMAIC's middleware keeps it.

With ``ACCESS_CODE`` set, every ``/api/*`` request but ``/api/health`` and ``/api/access-code/*`` needs the
``openmaic_access`` cookie that ``POST /api/access-code/verify {code}`` sets; without it the answer is 401
``{success: false, errorCode: "INVALID_REQUEST", error: "Access code required"}``. A request carrying a valid
bearer token of this server (``openmaic tokens create``) passes too: scripts authenticate with their token.

The cookie holds an HMAC of a fixed label under a key derived from the code, so it proves the code was given
without containing it, and changing ``ACCESS_CODE`` invalidates every cookie at once. Verification attempts are
rate-limited per client address (:class:`AttemptLimiter`: a sliding window kept in each API process).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import deque
from collections.abc import Callable

from openmaic.errors import OpenMaicError
from openmaic.secret import Secret

__all__ = ["ACCESS_COOKIE", "ACCESS_COOKIE_MAX_AGE_S", "AccessCodeRequired", "AccessGate", "AttemptLimiter",
           "RateLimited", "is_open_path"]  # fmt: skip

ACCESS_COOKIE = "openmaic_access"
ACCESS_COOKIE_MAX_AGE_S = 30 * 24 * 3600
_LABEL = b"openmaic-access.v1"


class AccessCodeRequired(OpenMaicError):
    """Access code required"""

    code = "access_code_required"
    error_code = "INVALID_REQUEST"
    status = 401


class RateLimited(OpenMaicError):
    """Too many access code attempts; wait a minute and try again."""

    code = "rate_limited"
    error_code = "RATE_LIMITED"
    status = 429

    def __init__(self, retry_after: int) -> None:
        super().__init__()
        self.headers = {"Retry-After": str(retry_after)}


def is_open_path(path: str) -> bool:
    """Whether ``path`` is outside the gate: everything but ``/api/*``, and ``/api/health``,
    ``/api/access-code/*`` within it."""
    if path != "/api" and not path.startswith("/api/"):
        return True
    return path == "/api/health" or path.startswith("/api/access-code/")


class AccessGate:
    """Checks and issues the access cookie for one access code."""

    def __init__(self, code: Secret) -> None:
        self._code = code
        key = hashlib.sha256(b"openmaic.access-code:" + code.reveal().encode()).digest()
        self._cookie = hmac.new(key, _LABEL, hashlib.sha256).hexdigest()

    def check_code(self, given: object) -> bool:
        """Whether ``given`` is the access code (compared in constant time, digests so the length does not show)."""
        if not isinstance(given, str):
            return False
        digest = hashlib.sha256
        return hmac.compare_digest(digest(given.encode()).digest(), digest(self._code.reveal().encode()).digest())

    def cookie_value(self) -> str:
        """The value of the cookie a correct code earns."""
        return self._cookie

    def admits(self, cookie: str | None) -> bool:
        """Whether a request carrying ``cookie`` passes the gate."""
        return cookie is not None and hmac.compare_digest(cookie.encode(), self._cookie.encode())


class AttemptLimiter:
    """At most ``limit`` attempts per key within ``window_s`` (a sliding window)."""

    def __init__(self, limit: int = 10, window_s: float = 60.0, *, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 10_000) -> None:
        self.limit, self.window_s, self._clock, self._max_keys = limit, window_s, clock, max_keys
        self._attempts: dict[str, deque[float]] = {}

    def attempt(self, key: str) -> None:
        """Count an attempt by ``key``; :class:`RateLimited` when it is one too many."""
        now = self._clock()
        if len(self._attempts) >= self._max_keys:  # bounded memory: forget the quiet ones
            self._attempts = {k: q for k, q in self._attempts.items() if q and q[-1] > now - self.window_s}
        seen = self._attempts.setdefault(key, deque())
        while seen and seen[0] <= now - self.window_s:
            seen.popleft()
        if len(seen) >= self.limit:
            raise RateLimited(max(1, int(seen[0] + self.window_s - now) + 1))
        seen.append(now)
