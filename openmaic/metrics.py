"""Process metrics: a tiny registry of counters and gauges, rendered in the Prometheus text format.

Everything runs on one trio thread, so there are no locks: an increment is a dict update. Each metric has a fixed
set of label names; a sample is identified by its label values. ``render()`` produces the text exposition format
(version 0.0.4) served at ``GET /metrics``.

The metrics every part of openmaic shares are defined here, so that any module can import and update them::

    from openmaic import metrics
    metrics.APPENDS.inc(len(events))
    metrics.PROJECTION_LAG.set(lag, projection="library_cards")
"""

from __future__ import annotations

import math
from collections.abc import Iterator

__all__ = [
    "ACTIVE_ACTORS", "APPENDS", "CLAIMS", "HTTP_REQUESTS", "LEASE_LOSSES", "PROJECTION_LAG", "PROJECTION_LAG_SECONDS",
    "REGISTRY",
    "SSE_CLIENTS", "TAKEOVERS", "WEBSOCKET_CLIENTS", "Counter", "Gauge", "Registry", "render",
]  # fmt: skip

LabelValues = tuple[str, ...]


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help: str, labels: tuple[str, ...] = ()) -> None:
        self.name = name
        self.help = help
        self.label_names = labels
        self._values: dict[LabelValues, float] = {}
        if not labels:
            self._values[()] = 0.0  # an unlabelled metric is always shown, starting at zero

    def _key(self, labels: dict[str, str]) -> LabelValues:
        if set(labels) != set(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {tuple(labels)}")
        return tuple(str(labels[n]) for n in self.label_names)

    def value(self, **labels: str) -> float:
        """The current value of one sample (0 if it was never touched)."""
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> Iterator[tuple[LabelValues, float]]:
        return iter(sorted(self._values.items()))

    def render(self) -> Iterator[str]:
        yield f"# HELP {self.name} {_escape_help(self.help)}"
        yield f"# TYPE {self.name} {self.kind}"
        for key, value in self.samples():
            if key:
                pairs = ",".join(f'{n}="{_escape_label(v)}"' for n, v in zip(self.label_names, key, strict=True))
                yield f"{self.name}{{{pairs}}} {_number(value)}"
            else:
                yield f"{self.name} {_number(value)}"


class Counter(_Metric):
    """A value that only goes up (a restart resets it; Prometheus handles that)."""

    kind = "counter"

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter cannot decrease (got {amount})")
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount


class Gauge(_Metric):
    """A value that goes up and down."""

    kind = "gauge"

    def set(self, value: float, **labels: str) -> None:
        self._values[self._key(labels)] = float(value)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        self.inc(-amount, **labels)


class Registry:
    """A named set of metrics; ``render()`` is the text served to Prometheus."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}

    def _add(self, metric: _Metric) -> _Metric:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name!r} is already registered")
        self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help: str, labels: tuple[str, ...] = ()) -> Counter:
        c = Counter(name, help, labels)
        self._add(c)
        return c

    def gauge(self, name: str, help: str, labels: tuple[str, ...] = ()) -> Gauge:
        g = Gauge(name, help, labels)
        self._add(g)
        return g

    def get(self, name: str) -> _Metric | None:
        return self._metrics.get(name)

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of every metric, ending with a newline."""
        lines = [line for m in self._metrics.values() for line in m.render()]
        return "\n".join(lines) + "\n"


REGISTRY = Registry()
"""The process-wide registry served at ``/metrics``."""

APPENDS = REGISTRY.counter("openmaic_appends_total", "Events appended to the log by this process.")
CLAIMS = REGISTRY.counter("openmaic_claims_total", "Streams claimed by this process's workers.")
TAKEOVERS = REGISTRY.counter(
    "openmaic_takeovers_total", "Claims of a stream whose previous lease had expired (orphan takeovers)."
)
ACTIVE_ACTORS = REGISTRY.gauge("openmaic_active_actors", "Actors currently running in this process.")
LEASE_LOSSES = REGISTRY.counter(
    "openmaic_lease_losses_total", "Leases this process lost while an actor was running (fenced out)."
)
WEBSOCKET_CLIENTS = REGISTRY.gauge("openmaic_websocket_clients", "Open WebSocket stream connections.")
SSE_CLIENTS = REGISTRY.gauge("openmaic_sse_clients", "Open server-sent-event stream responses.")
LIVE_FEEDS = REGISTRY.gauge(
    "openmaic_live_feeds", "Streams this API process is following live (one reader each, however many clients)."
)
SLOW_CONSUMERS = REGISTRY.counter(
    "openmaic_slow_consumers_total",
    "Live WebSocket/SSE clients disconnected because they could not keep up (they resume from their last seq).",
)
PROJECTION_LAG = REGISTRY.gauge(
    "openmaic_projection_lag_events", "Events in the global log a projection has not applied yet.", ("projection",)
)
PROJECTION_LAG_SECONDS = REGISTRY.gauge(
    "openmaic_projection_lag_seconds",
    "Age of the oldest event a projection has not applied yet (0 when it is caught up).",
    ("projection",),
)
HTTP_REQUESTS = REGISTRY.counter(
    "openmaic_http_requests_total", "HTTP requests answered, by method and status.", ("method", "status")
)


def render() -> str:
    """The process-wide registry in the Prometheus text format."""
    return REGISTRY.render()
