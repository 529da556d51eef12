"""Process metrics on ``prometheus_client``, served in the Prometheus text format by every ``openmaic serve``.

Every metric the project exports is defined here, once, and updated at the place where the thing it counts
happens (one call each, no private tallies beside it)::

    from openmaic import metrics
    metrics.APPENDS.inc(len(events))                                  # EventLog: events committed
    metrics.CLAIMS.labels(kind="generation", reason="queued").inc()   # Worker: a stream claimed
    with metrics.timed(metrics.STEP_SECONDS, kind=..., step=...):     # a histogram observation
        ...

Naming follows Prometheus: a ``openmaic_`` prefix, base units in the name (``_seconds``, ``_events``),
counters end in ``_total`` (prometheus_client adds the suffix to a counter's name; it is written here without
it), durations are histograms. Label values are bounded: a step's name loses its scene index
(``scene:3:content`` is counted as ``scene:content``), HTTP methods outside the standard ones are ``OTHER``.

One registry per process, :data:`REGISTRY`, not the library's global one, so that importing openmaic exposes
nothing of a host application's and the test suite can read the same registry the server serves. It carries
the process collector (CPU seconds, resident memory, open file descriptors, start time), the platform
collector (Python version) and the garbage collector's counts. ``_created`` samples are turned off: they
double the series and Prometheus does not use them.

Counters and gauges are per process (sum them over processes); the gauges read from the database (projection
lag, horizon age) are set by samplers run at each scrape (:mod:`openmaic.probes`), so any process reports them.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any

import prometheus_client
from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.gc_collector import GCCollector

__all__ = [
    "ACTIVE_ACTORS", "APPENDS", "APPEND_SECONDS", "CLAIMS", "CLAIM_SECONDS", "CONTENT_TYPE", "HORIZON_AGE",
    "HTTP_REQUESTS", "LEASE_LOSSES", "LIVE_DELIVERY_SECONDS", "LIVE_FEEDS", "MODEL_FALLBACKS",
    "PROJECTION_DEAD_LETTERS", "PROJECTION_LAG", "PROJECTION_LAG_SECONDS", "PROVIDER_SECONDS", "REGISTRY",
    "SESSIONS_STUCK", "SLOW_CONSUMERS", "SSE_CLIENTS", "STEP_SECONDS", "TAKEOVERS", "WEBSOCKET_CLIENTS", "render",
    "sample", "step_family", "timed",
]  # fmt: skip

prometheus_client.disable_created_metrics()

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""The media type of :func:`render`'s output (the text exposition format 0.0.4)."""

REGISTRY = CollectorRegistry(auto_describe=True)
"""The process-wide registry served at ``/metrics``."""

ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

# Buckets, in seconds. A database round trip is milliseconds; a step or a model call is seconds to minutes.
_DATABASE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_WORK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_DELIVERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# -- the event log ------------------------------------------------------------------------------------------------

APPENDS = Counter(
    "openmaic_appends", "Events appended to the log by this process (a replayed command appends none).",
    registry=REGISTRY,
)  # fmt: skip
APPEND_SECONDS = Histogram(
    "openmaic_append_duration_seconds",
    "Time from an append call to its outcome (queueing for a group commit included), committed or refused.",
    ("outcome",), buckets=_DATABASE_BUCKETS, registry=REGISTRY,
)  # fmt: skip

# -- workers and actors -------------------------------------------------------------------------------------------

CLAIMS = Counter(
    "openmaic_claims", "Streams claimed by this process's workers, by session kind and reason (queued, orphaned).",
    ("kind", "reason"), registry=REGISTRY,
)  # fmt: skip
TAKEOVERS = Counter(
    "openmaic_takeovers", "Claims of a stream whose previous lease had expired (orphan takeovers), by kind.",
    ("kind",), registry=REGISTRY,
)  # fmt: skip
CLAIM_SECONDS = Histogram(
    "openmaic_claim_duration_seconds", "Time one claim query took (it claims up to the free capacity).",
    buckets=_DATABASE_BUCKETS, registry=REGISTRY,
)  # fmt: skip
ACTIVE_ACTORS = Gauge(
    "openmaic_active_actors", "Actors currently running in this process, by session kind.", ("kind",),
    registry=REGISTRY,
)  # fmt: skip
LEASE_LOSSES = Counter(
    "openmaic_lease_losses", "Leases this process lost while an actor was running (fenced out), by kind.",
    ("kind",), registry=REGISTRY,
)  # fmt: skip
STEP_SECONDS = Histogram(
    "openmaic_step_duration_seconds",
    "Time a step ran, by session kind, step (scene index dropped) and outcome (completed, failed, aborted).",
    ("kind", "step", "outcome"), buckets=_WORK_BUCKETS, registry=REGISTRY,
)  # fmt: skip
PROVIDER_SECONDS = Histogram(
    "openmaic_provider_call_duration_seconds",
    "Time a model provider call took, retries included, by provider (the deployment's id, or owner:<preset> for "
    "an owner's own), call (turn, complete) and outcome (ok, error). A slot's fallback is observed on its own.",
    ("provider", "call", "outcome"), buckets=_WORK_BUCKETS, registry=REGISTRY,
)  # fmt: skip
MODEL_FALLBACKS = Counter(
    "openmaic_model_fallbacks",
    "Calls whose primary model failed and that went to the slot's fallback, by slot and outcome (answered, failed).",
    ("slot", "outcome"), registry=REGISTRY,
)  # fmt: skip

# -- live clients -------------------------------------------------------------------------------------------------

WEBSOCKET_CLIENTS = Gauge("openmaic_websocket_clients", "Open WebSocket stream connections.", registry=REGISTRY)
SSE_CLIENTS = Gauge("openmaic_sse_clients", "Open server-sent-event stream responses.", registry=REGISTRY)
LIVE_FEEDS = Gauge(
    "openmaic_live_feeds", "Streams this API process is following live (one reader each, however many clients).",
    registry=REGISTRY,
)  # fmt: skip
SLOW_CONSUMERS = Counter(
    "openmaic_slow_consumers",
    "Live WebSocket/SSE clients disconnected because they could not keep up (they resume from their last seq).",
    registry=REGISTRY,
)  # fmt: skip
LIVE_DELIVERY_SECONDS = Histogram(
    "openmaic_live_feed_delivery_seconds",
    "Time from an event's recording (database clock) to its offer to a live feed's clients (this host's clock).",
    buckets=_DELIVERY_BUCKETS, registry=REGISTRY,
)  # fmt: skip
HTTP_REQUESTS = Counter(
    "openmaic_http_requests", "HTTP requests answered, by method and status.", ("method", "status"),
    registry=REGISTRY,
)  # fmt: skip

# -- read from the database at each scrape -----------------------------------------------------------------------

PROJECTION_LAG = Gauge(
    "openmaic_projection_lag_events", "Events in the global log a projection has not applied yet.", ("projection",),
    registry=REGISTRY,
)  # fmt: skip
PROJECTION_LAG_SECONDS = Gauge(
    "openmaic_projection_lag_seconds",
    "Age of the oldest event a projection has not applied yet (0 when it is caught up).",
    ("projection",), registry=REGISTRY,
)  # fmt: skip
PROJECTION_DEAD_LETTERS = Counter(
    "openmaic_projection_dead_letters",
    "Events a projection could not apply, recorded in projection_dead_letters and skipped (live or in a rebuild).",
    ("projection",), registry=REGISTRY,
)  # fmt: skip
HORIZON_AGE = Gauge(
    "openmaic_horizon_age_seconds",
    "How long the oldest open transaction of the cluster (any database) has been holding back the global log's "
    "readable tail; 0 when none does. Projectors and feeds see nothing committed after it started.",
    registry=REGISTRY,
)  # fmt: skip

REPLICA_READS = Counter(
    "openmaic_replica_reads",
    "Catch-up reads of a process with a replica (DATABASE_REPLICA_URL), by where they were served: replica, waited "
    "(the replica, once it had replayed what the reader must see), or the primary because the replica was lagging "
    "(the wait ran out), unreachable, or failed (it refused the read).",
    ("outcome",), registry=REGISTRY,
)  # fmt: skip
REPLICA_LAG_BYTES = Gauge(
    "openmaic_replica_lag_bytes",
    "WAL bytes the replica had still to replay behind the primary's flush position, at the last /readyz.",
    registry=REGISTRY,
)  # fmt: skip

SESSIONS_STUCK = Gauge(
    "openmaic_sessions_stuck",
    "Sessions and runs that are stuck, by reason: lease_expired (running, its lease expired, not claimed again), "
    "queued_too_long (queued and due past runtime.stuck_queued_s), paused (waiting for a retry).",
    ("reason",), registry=REGISTRY,
)  # fmt: skip

_SCENE_INDEX = re.compile(r":\d+(?=:|$)")


def step_family(step: str) -> str:
    """A step's name without its index, as a bounded label value: ``scene:3:content`` → ``scene:content``."""
    return _SCENE_INDEX.sub("", step)


@contextlib.contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[dict[str, Any]]:
    """Observe the block's duration in ``histogram``. The yielded dict holds the labels: the block may set one
    (``outcome``) once it knows it; an exception leaves ``outcome`` as ``error`` unless the block set it."""
    values: dict[str, Any] = dict(labels)
    settles = "outcome" in histogram._labelnames  # the label the block settles last
    start = time.perf_counter()
    try:
        yield values
    except BaseException:
        if settles:
            values.setdefault("outcome", "error")
        raise
    finally:
        elapsed = time.perf_counter() - start
        if settles:
            values.setdefault("outcome", "ok")
        (histogram.labels(**values) if values else histogram).observe(elapsed)


def sample(name: str, **labels: str) -> float:
    """The current value of one sample as served (``openmaic_claims_total``, labels), 0 when it has none yet."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def render() -> bytes:
    """The process-wide registry in the Prometheus text format (:data:`CONTENT_TYPE`)."""
    return prometheus_client.generate_latest(REGISTRY)
