"""The metrics registry and its Prometheus text rendering."""

from __future__ import annotations

import pytest

from openmaic.metrics import Registry


def test_counters_and_gauges_render_in_the_text_format():
    reg = Registry()
    requests = reg.counter("demo_requests_total", "Requests.\nBy method.", ("method", "status"))
    clients = reg.gauge("demo_clients", "Open clients.")
    lag = reg.gauge("demo_lag", "Lag.", ("projection",))
    requests.inc(method="GET", status="200")
    requests.inc(2, method="GET", status="200")
    requests.inc(method="POST", status="422")
    clients.inc()
    clients.inc()
    clients.dec()
    lag.set(1.5, projection='we"ird\\name\n')
    assert reg.render() == (
        "# HELP demo_requests_total Requests.\\nBy method.\n"
        "# TYPE demo_requests_total counter\n"
        'demo_requests_total{method="GET",status="200"} 3\n'
        'demo_requests_total{method="POST",status="422"} 1\n'
        "# HELP demo_clients Open clients.\n"
        "# TYPE demo_clients gauge\n"
        "demo_clients 1\n"
        "# HELP demo_lag Lag.\n"
        "# TYPE demo_lag gauge\n"
        'demo_lag{projection="we\\"ird\\\\name\\n"} 1.5\n'
    )
    assert requests.value(method="GET", status="200") == 3
    assert lag.value(projection="other") == 0


def test_misuse_is_refused():
    reg = Registry()
    c = reg.counter("demo_total", "Demo.", ("kind",))
    with pytest.raises(ValueError, match="takes labels"):
        c.inc(other="x")
    with pytest.raises(ValueError, match="cannot decrease"):
        c.inc(-1, kind="a")
    with pytest.raises(ValueError, match="already registered"):
        reg.gauge("demo_total", "Again.")
