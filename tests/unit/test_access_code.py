"""The ACCESS_CODE gate's pieces: which paths it guards, the cookie a code earns, and the attempt limit."""

from __future__ import annotations

import pytest

from openmaic.api.access_code import AccessGate, AttemptLimiter, RateLimited, is_open_path
from openmaic.secret import Secret


@pytest.mark.parametrize(("path", "open_"), [
    ("/api/health", True), ("/api/access-code/verify", True), ("/api/access-code/status", True),
    ("/", True), ("/healthz", True), ("/metrics", True), ("/classroom/x", True), ("/apix", True),
    ("/api", False), ("/api/model-config", False), ("/api/generate-classroom/capabilities", False),
    ("/api/healthz", False), ("/api/access-code", False), ("/api/runs", False),
])  # fmt: skip
def test_the_gate_guards_every_api_route_but_health_and_its_own(path, open_):
    assert is_open_path(path) is open_


def test_the_cookie_proves_the_code_without_holding_it():
    gate = AccessGate(Secret("correct horse battery"))
    assert gate.check_code("correct horse battery") and not gate.check_code("correct horse") \
        and not gate.check_code(None) and not gate.check_code(7)
    cookie = gate.cookie_value()
    assert "correct" not in cookie and gate.admits(cookie)
    assert not gate.admits(None) and not gate.admits("") and not gate.admits(cookie[:-1] + ("1" if cookie[-1] == "0" else "0"))
    assert not AccessGate(Secret("another code")).admits(cookie)  # a changed code invalidates every cookie


def test_attempts_are_limited_per_client_in_a_sliding_window():
    now = [0.0]
    limiter = AttemptLimiter(limit=3, window_s=60, clock=lambda: now[0])
    for _ in range(3):
        limiter.attempt("10.0.0.1")
    with pytest.raises(RateLimited) as info:
        limiter.attempt("10.0.0.1")
    assert info.value.status == 429 and info.value.error_code == "RATE_LIMITED"
    assert info.value.headers == {"Retry-After": "61"}
    limiter.attempt("10.0.0.2")  # another client has its own window
    now[0] = 60.5
    limiter.attempt("10.0.0.1")  # the window slid past the first attempts


def test_the_limiter_forgets_quiet_clients_to_stay_bounded():
    now = [0.0]
    limiter = AttemptLimiter(limit=1, window_s=1, clock=lambda: now[0], max_keys=10)
    for i in range(10):
        limiter.attempt(f"c{i}")
    now[0] = 5
    limiter.attempt("new")
    assert len(limiter._attempts) == 1
