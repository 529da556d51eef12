"""The configuration's tree: one frozen Struct per section, strict (unknown keys are errors), and the defaults.

:mod:`openmaic.config.loader` reads a file and the environment into it; :mod:`openmaic.config` is the one name the
rest of the project imports these from.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

import msgspec

from openmaic.errors import ConfigError
from openmaic.modelconfig.layer import DEMO_SLOTS, ModelLayer, Policy, ProviderSpec, SlotValue
from openmaic.modelconfig.resolve import SlotResolutionError, resolve
from openmaic.modelconfig.slots import SLOTS
from openmaic.secret import Secret

PosInt = Annotated[int, msgspec.Meta(gt=0)]
NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
PosFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegFloat = Annotated[float, msgspec.Meta(ge=0)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]

#: Every model slot and the slot it inherits from when unassigned (each capability root has none).
SLOT_PARENTS: dict[str, str | None] = {d.id: d.parent for d in SLOTS}
KNOWN_SLOTS: tuple[str, ...] = tuple(SLOT_PARENTS)
DEFAULT_SLOTS: dict[str, SlotValue] = dict(DEMO_SLOTS)

#: Environment variables applied after the file: variable -> (section, key).
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "OPENMAIC_HOST": ("server", "host"),
    "OPENMAIC_PORT": ("server", "port"),
    "OPENMAIC_DATA_DIR": ("server", "data_dir"),
    "OPENMAIC_ADMIN_PORT": ("server", "admin_port"),
    "OPENMAIC_LOG_FORMAT": ("server", "log_format"),
    "OPENMAIC_ADMIN_TOKEN": ("server", "admin_token"),
    "OPENMAIC_IDENTITY_MODE": ("identity", "mode"),
    "DATABASE_REPLICA_URL": ("database", "replica_url"),
}



class _Section(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Base of every section: strict (unknown keys are errors) and immutable."""


class ProviderConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What a model driver is given: one provider's endpoint, resolved from its preset and ``options`` (see
    :func:`openmaic.models.provider.endpoint`). ``kind`` is the wire protocol (``openai``, ``anthropic``,
    ``demo``). Never decoded from a file: ``openmaic.yml`` declares providers in OpenMAIC's shape."""

    kind: str
    base_url: str | None = None
    api_key: Secret | None = None
    latency_ms: NonNegInt = 0
    timeout_s: PosFloat = 60.0
    max_retries: NonNegInt = 4
    headers: dict[str, str] = {}
    proxy: str | None = None
    owner_endpoint: bool = False
    """An endpoint an owner chose (a provider saved on the Models page): called only through the guarded client,
    and its failures reach the owner as one fixed message (:mod:`openmaic.models.retry`)."""
    allow_local: bool = False
    """``server.allow_local_endpoints``: an owner's endpoint may reach local and private addresses."""

    def key(self) -> str | None:
        """The API key, or ``None`` when the endpoint needs none."""
        return None if self.api_key is None else self.api_key.reveal()

    def _shown(self) -> list[tuple[str, Any]]:
        # Header values can carry credentials (Authorization, x-api-key), so only their names are shown.
        return [
            (f, {k: "***" for k in self.headers} if f == "headers" else getattr(self, f))
            for f in self.__struct_fields__
        ]

    def __repr__(self) -> str:
        return "ProviderConfig(" + ", ".join(f"{k}={v!r}" for k, v in self._shown()) + ")"

    def __rich_repr__(self) -> Any:  # msgspec's default would show header values
        yield from self._shown()


class ExtractionLimits(_Section):
    """The budget of reading one document (a PDF's text), in the child process that reads it."""

    cpu_s: PosInt = 20
    """CPU seconds; past them the child is killed."""
    memory_bytes: PosInt = 768 * 1024 * 1024
    """Address space of the child (Python and pypdf included); an allocation past it fails and the child ends."""
    wall_s: PosFloat = 60.0
    """Seconds from start to result, whatever the child is doing; past them it is killed."""
    max_pages: PosInt = 500
    """Pages read; later ones are left out (the text is marked truncated)."""
    max_decompressed_bytes: PosInt = 128 * 1024 * 1024
    """Bytes of decompressed streams over the whole document; reading stops there (the text is truncated)."""
    max_chars: PosInt = 1_000_000
    """Characters of text kept; the rest is dropped (truncated)."""
    concurrent: PosInt = 2
    """Documents read at once by this process; more wait for a turn."""
    concurrent_per_owner: PosInt = 1
    """Documents one owner may have read at once (an upload past it is a 429)."""
    queue: NonNegInt = 16
    """Documents that may wait for a turn; past them an upload is a 503 with Retry-After."""


class LimitsConfig(_Section):
    """Per-owner admission limits and request body sizes."""

    active_runs_per_owner: PosInt = 2
    waiting_runs_per_owner: PosInt = 10
    json_body_bytes: PosInt = 1_048_576
    upload_bytes: PosInt = 52_428_800
    materials_per_owner: PosInt = 100
    """Materials one owner may keep (OpenMAIC's ``MATERIALS_MAX_COUNT_PER_OWNER``)."""
    material_bytes_per_owner: PosInt = 2 * 1024**3
    """Their total size (OpenMAIC's ``MATERIALS_MAX_TOTAL_BYTES_PER_OWNER``)."""
    asset_bytes_per_owner: PosInt = 2_147_483_648
    """All of an owner's stored assets (materials' images and generated media) together."""
    agents_per_owner: PosInt = 100
    """Agents of one owner's own, beside the built-in ones (OpenMAIC's 100: 409 ``AGENT_LIMIT_REACHED``)."""
    sessions_per_owner: PosInt = 1000
    """Pro agent sessions one owner may have (each holds a course and its history)."""
    messages_per_session: PosInt = 1000
    """Messages one Pro session may be sent, its first prompt included (each at most 20,000 characters)."""
    runtime_sessions_per_owner: PosInt = 5_000
    """Learner runtime sessions one owner may keep (``/api/persistence/runtime``)."""
    runtime_records_per_session: PosInt = 100_000
    """Records one runtime session may hold."""
    runtime_records_per_owner: PosInt = 1_000_000
    """Records all of one owner's runtime sessions may hold together."""
    runtime_record_bytes_per_owner: PosInt = 1_073_741_824
    """Their total size (each record as its JSON)."""
    runtime_list_bytes: PosInt = 8_388_608
    """The most record bytes one answer of ``GET …/runtime/sessions/{id}/records`` holds; past them it is a page
    and ``X-Next-Cursor`` names the next (``?cursor=``)."""
    classroom_calls_per_owner: PosInt = 4
    """Classroom model calls (questions, discussions, short-answer grading) one owner may have running at once in
    one API process; one more is a 429 naming this key."""
    classroom_reply_s: PosFloat = 120.0
    """The longest a classroom reply may take; past it the reply is an error. A reply a crashed process was writing
    is answered again once this long has passed since it started (its claim, on the database's clock)."""
    document_bytes_per_owner: PosInt = 1_073_741_824
    """What one owner's saved documents (``/api/persistence/documents``) may take together, each as its JSON."""
    anonymous_owners_per_minute: PosInt = 60
    claims_over_quota: Literal["refuse", "allow"] = "refuse"
    """A claim (``POST /api/identity/claim``) whose anonymous work would take the account past one of the limits
    above on agents, materials or asset bytes: ``refuse`` it (409 ``CLAIM_OVER_QUOTA`` naming the limit; nothing
    moves), or ``allow`` it to move everything regardless."""
    """New anonymous owners one client address may be given per minute (``anonymous`` mode; behind a trusted
    proxy, the address the proxy forwards)."""
    extraction: ExtractionLimits = ExtractionLimits()


class IdentityConfig(_Section):
    """How requests are attributed to an owner (see the identity modes in the design)."""

    mode: Literal["single_user", "token", "trusted_header", "anonymous", "shared"] = "single_user"
    single_user_owner: str = "local"
    """The owner of ``single_user`` (``OWNER_SINGLE_USER_ID``) and ``shared`` (``PERSISTENCE_SHARED_OWNER_ID``)."""
    user_header: str = "X-Forwarded-User"
    trusted_proxies: list[str] = []
    cookie_name: str = "anonymous_id"
    claim_trigger: Literal["explicit", "auto"] = "explicit"
    """When a signed-in owner's anonymous work moves to them (``OWNER_CLAIM_TRIGGER``): on ``POST
    /api/identity/claim``, or ``auto``matically on their first request presenting the anonymous cookie."""

    def proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """``trusted_proxies`` as networks (a bare address is a /32 or /128)."""
        return tuple(ipaddress.ip_network(p, strict=False) for p in self.trusted_proxies)


class StepDeadlines(_Section):
    """Seconds each generation step may run before it fails."""

    outline: PosFloat = 300.0
    content: PosFloat = 60.0
    actions: PosFloat = 120.0
    agents: PosFloat = 120.0
    materials: PosFloat = 120.0
    turn: PosFloat = 300.0


class RuntimeConfig(_Section):
    """Leases, polling and worker capacity."""

    lease_ttl_s: PosFloat = 10.0
    heartbeat_s: PosFloat = 2.0
    claim_poll_s: PosFloat = 1.0
    wake_poll_s: PosFloat = 5.0
    max_unattended_attempts: PosInt = 5
    shutdown_grace_s: NonNegFloat = 15.0
    max_actors: PosInt = 32
    max_actors_per_owner: PosInt = 8
    """Streams of one kind a worker runs at once for one owner (for anonymous owners: for the client address they
    were last seen from, shared by every cookie from it); every owner with work gets a slot before any gets a
    second. A step calling an endpoint that never answers holds its slot until its timeouts run out: this keeps a
    few owners from holding them all. A deployment with a single owner may set it to ``max_actors``."""
    delta_coalesce_ms: PosInt = 150
    step_retries: PosInt = 2
    step_deadlines: StepDeadlines = StepDeadlines()
    horizon_age_threshold_s: PosFloat = 60.0
    """Older than this, the transaction holding back the global log's tail is reported (``/readyz``)."""
    stuck_queued_s: PosFloat = 300.0
    """``openmaic sessions list --stuck``: a session queued longer than this is stuck."""


class ServerConfig(_Section):
    """The HTTP listener and where local state lives."""

    host: str = "127.0.0.1"
    port: Port = 8000
    sse_ping_s: PosFloat = 25.0
    ws_send_queue: PosInt = 1000
    """Frames a WebSocket or SSE client's send queue holds at most; a live client whose queue is full is dropped
    (WebSocket 1013, the SSE response ends) and resumes from its last seq."""
    ws_send_queue_bytes: PosInt = 8 * 1024 * 1024
    """Bytes that queue holds at most (an event counted by its data), beyond which it is full as well; one event
    larger than this still passes alone."""
    data_dir: str = ".openmaic"
    allow_local_endpoints: bool = False
    """Whether a provider an owner adds on the Models page may point at a local or private address (a deployment
    whose users run their own model servers on the same network)."""
    keep_alive_s: PosFloat = 5.0
    """An HTTP connection idle this long after a response is closed by the server."""
    allowed_origins: list[str] = []
    """Origins (``https://app.example.org``) besides this server's own whose pages may open its WebSockets and,
    in the cookie and proxy identity modes, send it writes."""
    allowed_hosts: list[str] = []
    """Names besides loopback ones (and IP addresses) a request's ``Host`` may give: the public names users reach
    this server by (``openmaic.example.org``), ``*.example.org`` for every subdomain, ``"*"`` for any (a proxy in
    front checks it). Any other name is refused (421), which is what stops a DNS-rebinding page."""
    admin_port: Port | None = None
    """/healthz, /readyz and /metrics on a listener of their own; unset: 8001 in processes without the API role
    (which serves them itself), none in the others."""
    log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per line, with the stream, attempt, worker and step of the actor that wrote it."""
    admin_token: Secret | None = None
    """The admin listener's /api/admin routes accept ``Authorization: Bearer <it>``; unset: loopback clients only."""


class DatabaseConfig(_Section):
    """PostgreSQL besides ``DATABASE_URL`` (which is the environment's or the embedded server's, never the file's)."""

    replica_url: str | None = None
    """``DATABASE_REPLICA_URL``: a hot standby of the database (streaming replication) that serves the catch-up
    reads (SSE and WebSocket backlogs, classroom and stream reads) in a pool of its own; unset, everything reads the
    primary. Live tails, the horizon, claims and every write stay on the primary. A read never gets less from it
    than the primary had when the request read the stream's row (see :mod:`openmaic.store.replica`)."""
    replica_wait_ms: NonNegInt = 200
    """How long a catch-up read waits for the replica to replay what the reader must see before it reads the
    primary instead."""
    replica_pool_size: PosInt = 5
    """Connections the replica's pool holds at most (the primary's holds 20)."""


class Route(msgspec.Struct, frozen=True):
    """Where a slot's calls go: a declared provider and a model name (which may contain colons; ``None`` for a
    provider's default model)."""

    provider: str
    model: str | None

    def __str__(self) -> str:
        return self.provider if self.model is None else f"{self.provider}:{self.model}"


COMPUTED = ("source", "default_slots", "model_source", "notices", "secret_key", "access_code")
"""Fields of :class:`Config` the loader fills in; they are not keys of the file."""


class Config(_Section):
    """The whole configuration. ``source`` is the file it came from, or ``"<defaults>"``.

    ``providers`` and ``slots`` are the deployment layer (what ``openmaic.yml`` declares, or the providers of a
    legacy environment); ``default_slots`` rank below an owner's own settings (a legacy ``DEFAULT_MODEL``, or the
    built-in demo). ``secret_key`` is ``OPENMAIC_SECRET_KEY`` (it seals the keys owners save).
    """

    providers: dict[str, ProviderSpec] = {}
    slots: dict[str, SlotValue] = {}
    policy: Policy = Policy()
    limits: LimitsConfig = LimitsConfig()
    identity: IdentityConfig = IdentityConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    server: ServerConfig = ServerConfig()
    database: DatabaseConfig = DatabaseConfig()
    default_slots: dict[str, SlotValue] = {}
    model_source: Literal["openmaic.yml", "environment", "built-in"] = "built-in"
    notices: tuple[str, ...] = ()
    secret_key: Secret | None = None
    access_code: Secret | None = None
    """``ACCESS_CODE``: when set, every ``/api/*`` route but health needs the access cookie."""
    source: str = "<defaults>"

    def layers(self, workspace: ModelLayer | None = None) -> list[ModelLayer]:
        """The layers slots resolve through, in precedence order, with an owner's ``workspace`` when given."""
        out = [ModelLayer(source="deployment", providers=self.providers, slots=self.slots)]
        if workspace is not None:
            out.append(workspace)
        out.append(ModelLayer(source="default", slots=self.default_slots))
        return out

    def route(self, slot: str) -> Route:
        """The deployment's route for ``slot`` (``ValueError`` if unknown; ``ConfigError`` when it is off,
        unassigned or does not resolve)."""
        if slot not in SLOT_PARENTS:
            raise ValueError(f"unknown slot {slot!r}; valid slots: {', '.join(KNOWN_SLOTS)}")
        try:
            resolution = resolve(slot, self.layers())
        except SlotResolutionError as e:
            raise ConfigError(str(e), key=f"slots.{slot}") from None
        if resolution.target is None:
            raise ConfigError(f"slots.{slot}: {resolution.status}", key=f"slots.{slot}")
        return Route(resolution.target.provider_id, resolution.target.model)


def default_config() -> Config:
    """The built-in configuration: the offline demo provider for every slot, every other setting at default.

    (A bare ``Config()`` configures no model at all; the loader gives a file without model sections, in an
    environment without legacy model variables, these built-in defaults.)"""
    return Config(default_slots=dict(DEFAULT_SLOTS))


