"""Configuration: ``openmaic.yml`` decoded strictly into one frozen tree, plus ``OPENMAIC_*`` overrides.

The file is found through ``OPENMAIC_CONFIG``, else ``./openmaic.yml``, else the built-in defaults (an offline
``demo`` provider, so everything runs with no key and no network). String values may reference environment
variables as ``${NAME}``; ``$${`` is a literal ``${``. A few keys can be overridden from the environment after
the file is read (see ``ENV_OVERRIDES``).

Anything invalid raises :class:`~openmaic.errors.ConfigError` naming the key path and what was expected, e.g.
``runtime.lease_ttl_s: expected a number > 0, got -1``. API keys are held in :class:`Secret` and never appear
in a repr, a str, or an error message.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec
import yaml

from openmaic.errors import ConfigError

__all__ = [
    "DEFAULT_SLOTS", "ENV_OVERRIDES", "KNOWN_SLOTS", "SLOT_PARENTS", "Config", "IdentityConfig", "LimitsConfig",
    "ProviderConfig", "Route", "RuntimeConfig", "Secret", "ServerConfig", "StepDeadlines", "default_config",
    "load_config", "parse_config",
]  # fmt: skip

PosInt = Annotated[int, msgspec.Meta(gt=0)]
NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
PosFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegFloat = Annotated[float, msgspec.Meta(ge=0)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]

#: Every model slot and the slot it inherits from when unassigned (``llm`` is the root).
SLOT_PARENTS: dict[str, str | None] = {
    "llm": None,
    "course.outline": "llm",
    "course.agents": "llm",
    "course.content": "llm",
    "course.actions": "llm",
    "course.content.slide": "course.content",
    "course.content.quiz": "course.content",
    "course.content.interactive": "course.content",
    "agent": "llm",
}
KNOWN_SLOTS: tuple[str, ...] = tuple(SLOT_PARENTS)
DEFAULT_SLOTS: dict[str, str] = {"llm": "demo:course", "agent": "demo:agent"}
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}

#: Environment variables applied after the file: variable -> (section, key).
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "OPENMAIC_HOST": ("server", "host"),
    "OPENMAIC_PORT": ("server", "port"),
    "OPENMAIC_DATA_DIR": ("server", "data_dir"),
    "OPENMAIC_IDENTITY_MODE": ("identity", "mode"),
    "OPENMAIC_SECRET_KEY": ("identity", "secret_key"),
}

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an HTTP token (header or cookie name)
_MIN_SECRET_KEY = 16


class Secret:
    """A string that must never be shown: its repr and str are ``Secret('***')``; ``reveal()`` returns it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself — pass it straight to the HTTP client, never to a log."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class _Section(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Base of every section: strict (unknown keys are errors) and immutable."""


class ProviderConfig(_Section):
    """One model endpoint. ``base_url`` defaults by kind; ``api_key_file`` is read at load into ``api_key``."""

    kind: Literal["openai", "anthropic", "demo"]
    base_url: str | None = None
    api_key: Secret | None = None
    api_key_file: str | None = None
    latency_ms: NonNegInt = 0
    timeout_s: PosFloat = 60.0
    max_retries: NonNegInt = 4
    headers: dict[str, str] = {}

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


class Route(msgspec.Struct, frozen=True):
    """Where a slot's calls go: a configured provider and a model name (which may contain colons)."""

    provider: str
    model: str

    @classmethod
    def parse(cls, text: str) -> Route:
        """Parse ``"provider:model"``, splitting at the first colon; ``ValueError`` if either part is empty."""
        provider, sep, model = text.partition(":")
        if not sep or not provider or not model or provider.strip() != provider or model.strip() != model:
            raise ValueError(f"expected 'provider:model', got {text!r}")
        return cls(provider, model)

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


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


class IdentityConfig(_Section):
    """How requests are attributed to an owner (see the identity modes in the design)."""

    mode: Literal["single_user", "token", "trusted_header", "anonymous"] = "single_user"
    single_user_owner: str = "local"
    user_header: str = "X-Forwarded-User"
    trusted_proxies: list[str] = []
    secret_key: Secret | None = None
    cookie_name: str = "openmaic_owner"

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
    delta_coalesce_ms: PosInt = 150
    step_retries: PosInt = 2
    step_deadlines: StepDeadlines = StepDeadlines()


class ServerConfig(_Section):
    """The HTTP listener and where local state lives."""

    host: str = "127.0.0.1"
    port: Port = 8000
    sse_ping_s: PosFloat = 25.0
    ws_send_queue: PosInt = 1000
    data_dir: str = ".openmaic"


def _default_providers() -> dict[str, ProviderConfig]:
    return {"demo": ProviderConfig(kind="demo")}


class Config(_Section):
    """The whole configuration. ``source`` is the file it came from, or ``"<defaults>"``."""

    providers: dict[str, ProviderConfig] = msgspec.field(default_factory=_default_providers)
    slots: dict[str, str] = msgspec.field(default_factory=lambda: dict(DEFAULT_SLOTS))
    limits: LimitsConfig = LimitsConfig()
    identity: IdentityConfig = IdentityConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    server: ServerConfig = ServerConfig()
    source: str = "<defaults>"

    def route(self, slot: str) -> Route:
        """The route for ``slot``, inherited from the nearest assigned ancestor (``ValueError`` if unknown)."""
        if slot not in SLOT_PARENTS:
            raise ValueError(f"unknown slot {slot!r}; valid slots: {', '.join(KNOWN_SLOTS)}")
        current: str | None = slot
        while current is not None and current not in self.slots:
            current = SLOT_PARENTS[current]
        if current is None:
            raise ConfigError("slots.llm: not set; every other slot inherits from it", key="slots.llm")
        return Route.parse(self.slots[current])


def default_config() -> Config:
    """The built-in configuration: the offline demo provider for every slot, every other setting at default."""
    return Config()


def load_config(path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None) -> Config:
    """Load the configuration from ``path``, else ``$OPENMAIC_CONFIG``, else ``./openmaic.yml``, else defaults.

    ``env`` (default ``os.environ``) supplies ``${NAME}`` references and the ``OPENMAIC_*`` overrides.
    """
    env = os.environ if env is None else env
    named_by = None
    if path is None and env.get("OPENMAIC_CONFIG"):
        path, named_by = env["OPENMAIC_CONFIG"], "OPENMAIC_CONFIG"
    if path is None:
        if not Path("openmaic.yml").is_file():
            return parse_config("", source="<defaults>", env=env, base_dir=Path.cwd())
        path = "openmaic.yml"
    file = Path(path)
    try:
        text = file.read_bytes().decode("utf-8")
    except OSError as e:
        where = f"{named_by}: " if named_by else ""
        raise ConfigError(f"{where}cannot read config file {str(file)!r}: {e.strerror}", source=str(file)) from e
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not UTF-8 text", source=str(file)) from None
    return parse_config(text, source=str(file), env=env, base_dir=file.parent)


def parse_config(
    text: str,
    *,
    source: str,
    env: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> Config:
    """Decode and validate configuration ``text``; relative ``api_key_file`` paths are under ``base_dir``.

    ``env`` (default ``os.environ``) supplies ``${NAME}`` references and the ``OPENMAIC_*`` overrides.
    """
    env = os.environ if env is None else env
    return _Loader(source, env, Path.cwd() if base_dir is None else Path(base_dir)).load(text)


# --- ${NAME} references -----------------------------------------------------------------------------------
# References are swapped for private-use characters before YAML parsing and expanded afterwards, per value:
# in a flow mapping ({api_key: ${KEY}}) a raw "{" would end the scalar, and expanding after parsing means a
# variable's value can never inject YAML structure.
_OPEN, _CLOSE, _ESC = "\ue000", "\ue001", "\ue002"
_REF = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MARKED = re.compile(f"{_ESC}|{_OPEN}([A-Za-z0-9_]+){_CLOSE}")


def _mark(text: str) -> str:
    return _REF.sub(lambda m: _ESC if m.group(1) is None else f"{_OPEN}{m.group(1)}{_CLOSE}", text)


def _unmark(text: str) -> str:
    return _MARKED.sub(lambda m: "$${" if m.group(1) is None else "${" + m.group(1) + "}", text)


# --- error rendering --------------------------------------------------------------------------------------
# msgspec's names for what it was given, and the same for Python values, in words.
_KINDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false", "null": "null",
          "object": "a mapping", "array": "a list"}  # fmt: skip
_PY_KINDS = {type(None): "null", bool: "bool", int: "int", float: "float", str: "str", list: "array",
             dict: "object"}  # fmt: skip


def _kind(value: Any) -> str:
    return _KINDS.get(_PY_KINDS.get(type(value), ""), "a " + type(value).__name__)


def _path_str(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _unwrap(t: Any) -> tuple[Any, msgspec.Meta | None]:
    """Strip ``Annotated`` and ``| None``; return the bare type and its constraints."""
    meta = None
    if typing.get_origin(t) is Annotated:
        t, *extras = typing.get_args(t)
        meta = next((x for x in extras if isinstance(x, msgspec.Meta)), None)
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if typing.get_origin(t) in (typing.Union, types.UnionType) and len(args) == 1:
        return _unwrap(args[0])
    return t, meta


def _type_at(root: Any, parts: list[Any]) -> Any:
    t: Any = root
    for p in parts:
        t, _ = _unwrap(t)
        if isinstance(t, type) and issubclass(t, msgspec.Struct):
            t = typing.get_type_hints(t, include_extras=True).get(p)
        elif typing.get_origin(t) in (list, dict):
            t = typing.get_args(t)[-1]
        else:
            return None
    return t


def _describe(t: Any) -> str:
    base, meta = _unwrap(t)
    if typing.get_origin(base) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(base)))
    if isinstance(base, type) and issubclass(base, msgspec.Struct):
        return "a mapping with keys " + _fields(base)
    name = {int: "an integer", float: "a number", str: "a string", bool: "true or false", Secret: "a string",
            list: "a list", dict: "a mapping"}.get(typing.get_origin(base) or base, "a valid value")  # fmt: skip
    if meta is not None and meta.ge is not None and meta.le is not None:
        return f"{name} between {meta.ge} and {meta.le}"
    for op, bound in ((">", meta and meta.gt), (">=", meta and meta.ge), ("<=", meta and meta.le)):
        if bound is not None and bound is not False and meta is not None:
            return f"{name} {op} {bound:g}"
    return name


def _fields(struct: Any) -> str:
    return ", ".join(f for f in struct.__struct_fields__ if f != "source")  # source is set by the loader


def _raw_at(raw: Any, parts: list[Any]) -> Any:
    for p in parts:
        try:
            raw = raw[p]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


class _Loader:
    """One load: carries the source name, where overridden keys came from, and the secrets to scrub."""

    def __init__(self, source: str, env: Mapping[str, str], base_dir: Path) -> None:
        self.source, self.env, self.base_dir = source, env, base_dir
        self.origins: dict[str, str] = {}  # key path -> environment variable that set it
        self.secrets: set[str] = set()

    def error(self, path: str, what: str) -> ConfigError:
        var = self.origins.get(path)
        message = f"{var} ({path}): {what}" if var else (f"{path}: {what}" if path else what)
        if not var and not self.source.startswith("<"):
            message += f" (in {self.source})"
        # Belt and braces: a message may quote a value the user typed in the wrong place.
        for s in sorted(self.secrets, key=len, reverse=True):
            if len(s) >= 8:  # shorter strings would garble ordinary words in the message
                message = message.replace(s, "***")
        return ConfigError(message, key=path, source=self.source)

    def load(self, text: str) -> Config:
        if any(c in text for c in (_OPEN, _CLOSE, _ESC)):
            raise self.error("", "contains reserved characters U+E000..U+E002")
        try:
            raw = yaml.safe_load(_mark(text))
        except yaml.YAMLError as e:
            # Only the problem and its line: PyYAML's own message quotes file text, which may hold a key.
            mark = getattr(e, "problem_mark", None)
            line = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or "cannot parse"
            raise ConfigError(f"{self.source}: invalid YAML{line}: {problem}", source=self.source) from None
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise self.error("", f"the top level must be {_describe(Config)}, got {_kind(raw)}")
        raw = {k: v for k, v in self._expand(raw, []).items() if v is not None}  # an empty section is absent
        self._apply_env(raw)
        self._collect_secrets(raw)
        if "source" in raw or any(not isinstance(k, str) for k in raw):
            bad = "source" if "source" in raw else next(k for k in raw if not isinstance(k, str))
            raise self.error(str(bad), f"unknown key; valid keys: {_fields(Config)}")
        rest = {k: v for k, v in raw.items() if k not in ("providers", "slots")}
        config = self._convert(rest, Config, [])
        providers = self._providers(raw["providers"]) if "providers" in raw else _default_providers()
        slots = self._slots(raw.get("slots"), providers)
        config = msgspec.structs.replace(config, providers=providers, slots=slots, source=self.source)
        self._check_finite(config, [])
        self._check_semantics(config)
        return config

    def _expand(self, node: Any, path: list[Any]) -> Any:
        if isinstance(node, str):
            if "${" in node:
                what = "'${' must start a reference like ${NAME}; write $${ for a literal ${"
                raise self.error(_path_str(path), what)
            return _MARKED.sub(lambda m: self._lookup(m, path), node)
        if isinstance(node, dict):
            # Keys are names, not values: references in them are left as written.
            return {_unmark(k) if isinstance(k, str) else k: self._expand(v, [*path, k]) for k, v in node.items()}
        if isinstance(node, list):
            return [self._expand(v, [*path, i]) for i, v in enumerate(node)]
        return node

    def _lookup(self, m: re.Match[str], path: list[Any]) -> str:
        if m.group(1) is None:
            return "${"
        if m.group(1) not in self.env:
            raise self.error(_path_str(path), f"environment variable {m.group(1)} is not set")
        return self.env[m.group(1)]

    def _apply_env(self, raw: dict[Any, Any]) -> None:
        for var, (section, key) in ENV_OVERRIDES.items():
            value: Any = self.env.get(var)
            if not value:  # unset or empty: an empty pass-through from a compose file means "not given"
                continue
            path = f"{section}.{key}"
            self.origins[path] = var
            if var == "OPENMAIC_SECRET_KEY":
                self.secrets.add(value)
            if section == "server" and key == "port":
                try:
                    value = int(value)
                except ValueError:
                    expected = _describe(_type_at(Config, [section, key]))
                    raise self.error(path, f"expected {expected}, got {value!r}") from None
            target = raw.setdefault(section, {})
            if isinstance(target, dict):  # otherwise decoding reports the malformed section
                target[key] = value

    def _collect_secrets(self, raw: dict[Any, Any]) -> None:
        providers = raw.get("providers")
        for p in providers.values() if isinstance(providers, dict) else ():
            if isinstance(p, dict):
                self.secrets.add(p.get("api_key") if isinstance(p.get("api_key"), str) else "")
                headers = p.get("headers") if isinstance(p.get("headers"), dict) else {}
                self.secrets.update(v for v in headers.values() if isinstance(v, str))
        identity = raw.get("identity")
        if isinstance(identity, dict) and isinstance(identity.get("secret_key"), str):
            self.secrets.add(identity["secret_key"])

    def _convert(self, obj: Any, typ: Any, prefix: list[Any]) -> Any:
        try:
            return msgspec.convert(obj, typ, dec_hook=_dec_hook)
        except msgspec.ValidationError as e:
            raise self._translate(str(e), typ, prefix, obj) from None

    def _translate(self, message: str, typ: Any, prefix: list[Any], obj: Any) -> ConfigError:
        m = re.fullmatch(r"(?s)(.*?)(?: - at `([^`]*)`(?: in `([^`]*)`)?)?", message)
        assert m is not None  # every group is optional
        text, at, parent = m.group(1), m.group(2) or "$", m.group(3)
        if parent is not None:  # "at `key` in `$.x`": a mapping key of the wrong type
            parts = [p or int(i) for p, i in re.findall(r"\.(\w+)|\[(\d+)\]", parent)]
            return self.error(_path_str([*prefix, *parts]), "keys must be strings")
        parts = [p or int(i) for p, i in re.findall(r"\.(\w+)|\[(\d+)\]", at)]
        if u := re.match(r"Object contains unknown field `(.*)`", text):
            valid = _fields(_unwrap(_type_at(typ, parts))[0])
            return self.error(_path_str([*prefix, *parts, u.group(1)]), f"unknown key; valid keys: {valid}")
        if u := re.match(r"Object missing required field `(.*)`", text):
            field = [*parts, u.group(1)]
            expected = _describe(_type_at(typ, field))
            return self.error(_path_str([*prefix, *field]), f"required; expected {expected}")
        expected = _describe(_type_at(typ, parts))
        if u := re.search(r", got `(\w+)`", text):
            got = _KINDS.get(u.group(1), u.group(1))
        else:  # an out-of-range number or an invalid enum value: show what was given
            got = repr(_raw_at(obj, parts))
        return self.error(_path_str([*prefix, *parts]), f"expected {expected}, got {got}")

    def _providers(self, raw: Any) -> dict[str, ProviderConfig]:
        if not isinstance(raw, dict):
            raise self.error("providers", "expected a mapping of provider name to settings")
        out = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not name or ":" in name:
                raise self.error(f"providers.{name}", "a provider name must be a non-empty string without ':'")
            out[name] = self._provider(name, self._convert(value, ProviderConfig, ["providers", name]))
        return out

    def _provider(self, name: str, p: ProviderConfig) -> ProviderConfig:
        base = f"providers.{name}"
        if p.api_key is not None and p.api_key_file is not None:
            raise self.error(f"{base}.api_key_file", "give either api_key or api_key_file, not both")
        if p.api_key_file is not None:
            file = self.base_dir / Path(p.api_key_file).expanduser()
            try:
                key = file.read_text("utf-8").strip()
            except (OSError, UnicodeDecodeError) as e:
                reason = getattr(e, "strerror", None) or "not UTF-8 text"
                raise self.error(f"{base}.api_key_file", f"cannot read {str(file)!r}: {reason}") from None
            self.secrets.add(key)
            if not key:
                raise self.error(f"{base}.api_key_file", f"{str(file)!r} is empty")
            p = msgspec.structs.replace(p, api_key=Secret(key))
        elif p.api_key is not None and not p.api_key.reveal():
            raise self.error(f"{base}.api_key", "is empty (is the environment variable it references empty?)")
        if p.kind != "demo":
            url = (p.base_url or DEFAULT_BASE_URLS[p.kind]).rstrip("/")
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise self.error(f"{base}.base_url", f"expected an http(s) URL, got {url!r}")
            if parts.username or parts.password:
                raise self.error(f"{base}.base_url", "must not contain credentials; use api_key or headers")
            p = msgspec.structs.replace(p, base_url=url)
        for header, value in p.headers.items():
            if not _TOKEN.match(header) or "\r" in value or "\n" in value:
                raise self.error(f"{base}.headers.{header}", "expected a valid header name and a one-line value")
        return p

    def _slots(self, raw: Any, providers: dict[str, ProviderConfig]) -> dict[str, str]:
        defaulted = raw is None
        slots = dict(DEFAULT_SLOTS) if defaulted else raw
        if not isinstance(slots, dict):
            raise self.error("slots", "expected a mapping of slot name to 'provider:model'")
        configured = ", ".join(providers) or "none"
        for slot, value in slots.items():
            path = f"slots.{slot}"
            if slot not in SLOT_PARENTS:
                raise self.error(path, f"unknown slot; valid slots: {', '.join(KNOWN_SLOTS)}")
            if not isinstance(value, str):
                raise self.error(path, f"expected a route 'provider:model', got {_kind(value)}")
            try:
                route = Route.parse(value)
            except ValueError as e:
                raise self.error(path, str(e)) from None
            if route.provider not in providers:
                hint = f"; slots is not set, so the default {value!r} applies" if defaulted else ""
                raise self.error(path, f"unknown provider {route.provider!r} (configured: {configured}){hint}")
        if "llm" not in slots:
            raise self.error("slots.llm", "required: every other slot inherits from it; set 'provider:model'")
        return slots

    def _check_finite(self, node: Any, path: list[Any]) -> None:
        # msgspec's bounds let .inf and .nan through; neither makes sense as a duration or size.
        if isinstance(node, float) and not math.isfinite(node):
            raise self.error(_path_str(path), f"expected a finite number, got {node}")
        if isinstance(node, msgspec.Struct):
            for f in node.__struct_fields__:
                self._check_finite(getattr(node, f), [*path, f])
        elif isinstance(node, dict):
            for k, v in node.items():
                self._check_finite(v, [*path, k])

    def _check_semantics(self, c: Config) -> None:
        rt, ident = c.runtime, c.identity
        if rt.heartbeat_s >= rt.lease_ttl_s:
            raise self.error(
                "runtime.heartbeat_s",
                f"must be less than runtime.lease_ttl_s ({rt.lease_ttl_s:g}), or a lease would expire between "
                f"heartbeats (got {rt.heartbeat_s:g})",
            )
        for i, entry in enumerate(ident.trusted_proxies):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                what = f"expected an IP address or CIDR network, got {entry!r}"
                raise self.error(f"identity.trusted_proxies[{i}]", what) from None
        if ident.mode == "trusted_header" and not ident.trusted_proxies:
            what = "required when identity.mode is trusted_header (the header is trusted only from these)"
            raise self.error("identity.trusted_proxies", what)
        if ident.mode == "anonymous" and ident.secret_key is None:
            what = "required when identity.mode is anonymous: it signs the owner cookie (or OPENMAIC_SECRET_KEY)"
            raise self.error("identity.secret_key", what)
        if ident.secret_key is not None and len(ident.secret_key.reveal()) < _MIN_SECRET_KEY:
            raise self.error("identity.secret_key", f"too short; use at least {_MIN_SECRET_KEY} random characters")
        for key in ("user_header", "cookie_name"):
            if not _TOKEN.match(value := getattr(ident, key)):
                raise self.error(
                    f"identity.{key}", f"expected an HTTP token (letters, digits, -_.), got {value!r}"
                )
        for path, value in (
            ("identity.single_user_owner", ident.single_user_owner),
            ("server.host", c.server.host),
            ("server.data_dir", c.server.data_dir),
        ):
            if not value.strip():
                raise self.error(path, "must not be empty")


def _dec_hook(typ: type, obj: Any) -> Any:
    if typ is Secret:
        if not isinstance(obj, str):  # phrased like msgspec's own errors so they translate alike
            raise TypeError(f"Expected `str`, got `{_PY_KINDS.get(type(obj), 'object')}`")
        return Secret(obj)
    raise NotImplementedError
