"""Reading ``openmaic.yml`` and the environment into :class:`~openmaic.config.schema.Config`.

Decoding is strict, and every error names the key path and what was expected, in words (msgspec's own messages
are reworded here, see "error rendering"). ``${NAME}`` references are expanded after YAML parsing, per value, so a
variable's value can never inject YAML structure. Secrets a load has seen are scrubbed from every message.
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

import msgspec
import yaml

from openmaic.config.schema import COMPUTED, DEFAULT_SLOTS, ENV_OVERRIDES, Config
from openmaic.errors import ConfigError
from openmaic.modelconfig.layer import parse_model_sections
from openmaic.modelconfig.legacy import has_legacy_configuration, translate_environment
from openmaic.owner_env import read_owner_env
from openmaic.secret import Secret

_MODEL_SECTIONS = ("providers", "slots", "policy")
_ORIGIN = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?/?$")
_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST = re.compile(rf"^{_HOST_LABEL}(?:\.{_HOST_LABEL})*$")
_MIN_SECRET_KEY = 16
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an HTTP token (header or cookie name)


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
    legacy_dir: str | os.PathLike[str] | None = None,
) -> Config:
    """Decode and validate configuration ``text`` (``base_dir``: the file's directory).

    ``env`` (default ``os.environ``) supplies ``${NAME}`` references, the ``OPENMAIC_*`` overrides and, when the
    file has no model sections, the legacy model variables; ``server-providers.yml`` is read from ``legacy_dir``
    (default: the working directory, as OpenMAIC reads it).
    """
    env = os.environ if env is None else env
    return _Loader(source, env, Path.cwd() if base_dir is None else Path(base_dir),
                   Path.cwd() if legacy_dir is None else Path(legacy_dir)).load(text)


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
    return ", ".join(f for f in struct.__struct_fields__ if f not in COMPUTED)  # set by the loader


def _raw_at(raw: Any, parts: list[Any]) -> Any:
    for p in parts:
        try:
            raw = raw[p]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


class _Loader:
    """One load: carries the source name, where overridden keys came from, and the secrets to scrub."""

    def __init__(self, source: str, env: Mapping[str, str], base_dir: Path, legacy_dir: Path) -> None:
        self.source, self.env, self.base_dir, self.legacy_dir = source, env, base_dir, legacy_dir
        self.origins: dict[str, str] = {}  # key path -> environment variable that set it
        self.secrets: set[str] = set()
        self.env_values: set[str] = set()  # what ${NAME} references expanded to

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
        bad = next((k for k in raw if not isinstance(k, str) or k in COMPUTED), None)
        if bad is not None:
            raise self.error(str(bad), f"unknown key; valid keys: {_fields(Config)}")
        rest = {k: v for k, v in raw.items() if k not in _MODEL_SECTIONS}
        identity = rest.get("identity")
        if isinstance(identity, dict) and "secret_key" in identity:
            raise self.error("identity.secret_key", "no longer used: anonymous owners carry OpenMAIC's unsigned "
                                                    "anonymous_id cookie, and OPENMAIC_SECRET_KEY seals saved keys; "
                                                    "remove it")
        config = self._convert(rest, Config, [])
        config = self._owners(config)
        secret = (self.env.get("OPENMAIC_SECRET_KEY") or "").strip()
        if secret:
            self.secrets.add(secret)
        models = self._models(raw)
        models["notices"] = (*config.notices, *models.get("notices", ()))
        config = msgspec.structs.replace(config, **models, secret_key=Secret(secret) if secret else None,
                                         source=self.source)
        self._check_finite(config, [])
        self._check_semantics(config)
        return config

    def _owners(self, config: Config) -> Config:
        """OpenMAIC's owner modes from the environment (:mod:`openmaic.owner_env`), unless the file names a host
        method (token, trusted_header), which OpenMAIC consults first."""
        found = read_owner_env(self.env)
        if found.access_code is not None:
            self.secrets.add(found.access_code.reveal())
        identity = config.identity
        if found.claim_trigger is not None:
            identity = msgspec.structs.replace(identity, claim_trigger=found.claim_trigger)
        if found.mode is not None and identity.mode not in ("token", "trusted_header"):
            identity = msgspec.structs.replace(identity, mode=found.mode, single_user_owner=found.owner)
        elif identity.mode == "shared" and found.access_code is None:
            raise self.error("identity.mode", "shared needs ACCESS_CODE: without it anyone who reaches the server "
                                              "writes as the team")
        return msgspec.structs.replace(config, identity=identity, access_code=found.access_code,
                                       notices=(*config.notices, *found.notices))

    def _models(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The model fields of the config: from the file's model sections, else from a legacy environment, else
        the built-in demo (see the module docstring)."""
        if any(k in raw for k in _MODEL_SECTIONS):
            layer, policy = parse_model_sections(raw, self.error, shown=self.shown)
            notices = ()
            if has_legacy_configuration(self.env, self.legacy_dir):
                notices = ("openmaic.yml declares the models, so the legacy provider variables, server-providers.yml, "
                           "DEFAULT_MODEL, MODEL_ROUTES and MODEL_FALLBACK are not used",)
            return {"providers": layer.providers, "slots": layer.slots, "policy": policy, "default_slots": {},
                    "model_source": "openmaic.yml", "notices": notices}
        legacy = translate_environment(self.env, self.legacy_dir)
        if legacy is None:
            return {"default_slots": dict(DEFAULT_SLOTS)}
        return {"providers": legacy.deployment.providers, "default_slots": legacy.defaults.slots,
                "model_source": "environment", "notices": legacy.notices}

    def shown(self, value: str) -> str:
        """``value`` quoted for a message, unless it came from the environment (it may be a key)."""
        if any(v and v in value for v in self.env_values):
            return "(a value from an environment variable)"
        return f'"{value}"'

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
        value = self.env.get(m.group(1))
        if not value:
            raise self.error(_path_str(path), f"environment variable {m.group(1)} is not set (or is empty)")
        self.env_values.add(value)
        return value

    def _apply_env(self, raw: dict[Any, Any]) -> None:
        for var, (section, key) in ENV_OVERRIDES.items():
            value: Any = self.env.get(var)
            if not value:  # unset or empty: an empty pass-through from a compose file means "not given"
                continue
            path = f"{section}.{key}"
            self.origins[path] = var
            if var in ("OPENMAIC_SECRET_KEY", "OPENMAIC_ADMIN_TOKEN"):
                self.secrets.add(value)
            if section == "server" and key in ("port", "admin_port"):
                try:
                    value = int(value)
                except ValueError:
                    expected = _describe(_type_at(Config, [section, key]))
                    raise self.error(path, f"expected {expected}, got {value!r}") from None
            target = raw.setdefault(section, {})
            if isinstance(target, dict):  # otherwise decoding reports the malformed section
                target[key] = value

    def _collect_secrets(self, raw: dict[Any, Any]) -> None:
        # identity.secret_key is refused, but its value must not be quoted on the way.
        providers = raw.get("providers")
        for p in providers.values() if isinstance(providers, dict) else ():
            if isinstance(p, dict):
                for key in ("apiKey", "api_key"):
                    if isinstance(p.get(key), str):
                        self.secrets.add(p[key])
                credentials = p.get("credentials") if isinstance(p.get("credentials"), dict) else {}
                self.secrets.update(v for v in credentials.values() if isinstance(v, str))
        identity = raw.get("identity")
        if isinstance(identity, dict) and isinstance(identity.get("secret_key"), str):
            self.secrets.add(identity["secret_key"])
        server = raw.get("server")
        if isinstance(server, dict) and isinstance(server.get("admin_token"), str):
            self.secrets.add(server["admin_token"])

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
        for i, entry in enumerate(c.server.allowed_origins):
            if not _ORIGIN.match(entry):
                what = f"expected an origin such as https://app.example.org (scheme, host, optional port), got {entry!r}"
                raise self.error(f"server.allowed_origins[{i}]", what)
        for i, entry in enumerate(c.server.allowed_hosts):
            if entry != "*" and not _HOST.match(entry.removeprefix("*.")):
                what = f"expected a host name such as openmaic.example.org, *.example.org or *, got {entry!r}"
                raise self.error(f"server.allowed_hosts[{i}]", what)
        if ident.mode == "trusted_header" and not ident.trusted_proxies:
            what = "required when identity.mode is trusted_header (the header is trusted only from these)"
            raise self.error("identity.trusted_proxies", what)
        if c.secret_key is not None and len(c.secret_key.reveal()) < _MIN_SECRET_KEY:
            raise ConfigError(f"OPENMAIC_SECRET_KEY: too short; use at least {_MIN_SECRET_KEY} random characters",
                              key="OPENMAIC_SECRET_KEY")
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
        if ident.single_user_owner[:5].lower() == "anon:":
            # The account would be taken for an anonymous owner: claimable by whoever sends its cookie.
            raise self.error("identity.single_user_owner", "must not start with 'anon:', which names anonymous "
                                                           "owners")


def _dec_hook(typ: type, obj: Any) -> Any:
    if typ is Secret:
        if not isinstance(obj, str):  # phrased like msgspec's own errors so they translate alike
            raise TypeError(f"Expected `str`, got `{_PY_KINDS.get(type(obj), 'object')}`")
        return Secret(obj)
    raise NotImplementedError
