"""deploy/: every command line the manifests run is a valid ``openmaic`` invocation, every role is probed and
scraped on the port that serves its /healthz, /readyz and /metrics (the API's, or the admin listener's), the stop
timeouts fit the server, and the example configuration loads.

Each ``check_*`` function takes parsed text and fails (``pytest.fail``) naming the file and what is wrong, so the
same checks run on the real files and, at the end, on small synthetic manifests: a sound one must pass and each
broken variant of it must be rejected.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from openmaic.admin import DEFAULT_ADMIN_PORT
from openmaic.cli import DEFAULT_PORT, build_parser
from openmaic.config import Config, RuntimeConfig, parse_config
from openmaic.errors import ConfigError
from openmaic.serve import ROLES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "kubernetes"
SYSTEMD = DEPLOY / "systemd"

SECRET_KEY = "test-secret-key-0123456789abcdef"
PROVIDER_KEYS = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "LOCAL_API_KEY": "local-test"}
EXPECTED_PROCESSES = {"api": 1, "worker": 2, "projector": 1}  # per role, in docker-compose.yml


def fail(where: str, what: str) -> None:
    pytest.fail(f"{where}: {what}", pytrace=False)


# --- command lines -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    where: str
    argv: list[str]
    args: argparse.Namespace

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles this command serves (``serve`` without ``--role`` runs them all); () for other commands."""
        if self.args.command != "serve":
            return ()
        return tuple(dict.fromkeys(self.args.roles or ROLES))

    def api_port(self, env: dict[str, str]) -> int:
        """The port the API role listens on: ``--port``, else ``OPENMAIC_PORT``, else the CLI default."""
        if self.args.port is not None:
            return int(self.args.port)
        return int(env.get("OPENMAIC_PORT") or DEFAULT_PORT)

    def probe_port(self, env: dict[str, str]) -> int:
        """Where this process serves /healthz, /readyz and /metrics: the API's port in a process with the API role,
        else its admin listener's (``--admin-port``, ``OPENMAIC_ADMIN_PORT``, or the default)."""
        if "api" in self.roles:
            return self.api_port(env)
        if self.args.admin_port is not None:
            return int(self.args.admin_port)
        return int(env.get("OPENMAIC_ADMIN_PORT") or DEFAULT_ADMIN_PORT)

    def host(self, env: dict[str, str]) -> str | None:
        return self.args.host or env.get("OPENMAIC_HOST")


def check_command(argv: list[str], where: str) -> Command:
    """``argv`` runs the openmaic executable with arguments the real parser accepts."""
    if not argv or posixpath.basename(argv[0]) != "openmaic":
        fail(where, f"{shlex.join(argv)!r} does not run the openmaic executable")
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = build_parser().parse_args(argv[1:])
    except SystemExit:
        message = err.getvalue().strip().splitlines()[-1:] or ["--help or --version"]
        fail(where, f"{shlex.join(argv)!r} is not a valid openmaic command: {message[0]}")
    return Command(where, list(argv), args)


def as_argv(value: Any) -> list[str]:
    """A command as YAML gives it: a list, or a string split like a shell would."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


# --- durations and the grace period ----------------------------------------------------------------------------------

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60,
          "minutes": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600}  # fmt: skip
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")


def seconds(value: Any, where: str) -> float:
    """A compose (``1m30s``) or systemd (``30``, ``1min 30s``) duration, in seconds."""
    text = str(value).strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    parts = _PART.findall(text)
    if not parts or _PART.sub("", text).strip() or any(u not in _UNITS for _, u in parts):
        fail(where, f"cannot read the duration {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def example_config(env: dict[str, str] | None = None) -> Config:
    text = (DEPLOY / "openmaic.yml").read_text("utf-8")
    return parse_config(text, source="deploy/openmaic.yml", env={"OPENMAIC_SECRET_KEY": SECRET_KEY, **(env or {})})


def grace_s() -> float:
    """The shutdown grace every stop timeout must exceed: the default, or the example config's if longer."""
    return max(RuntimeConfig().shutdown_grace_s, example_config().runtime.shutdown_grace_s)


def check_longer_than_grace(value: Any, name: str, where: str) -> None:
    if value is None:
        fail(where, f"{name} is not set; it must be longer than the shutdown grace ({grace_s():g} s)")
    if seconds(value, where) <= grace_s():
        fail(where, f"{name} {value} is not longer than the shutdown grace ({grace_s():g} s)")


# --- Dockerfile ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    entrypoint: list[str]
    cmd: list[str]
    healthcheck: list[str]


def exec_form(value: str, what: str, where: str) -> list[str]:
    try:
        argv = json.loads(value)
    except ValueError:
        argv = None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        fail(where, f"{what} must be in exec form (a JSON list), or openmaic would not receive SIGTERM; got {value}")
    return argv


def check_dockerfile(text: str, where: str = "deploy/Dockerfile") -> Image:
    lines = [ln.strip() for ln in re.sub(r"\\\n", " ", text).splitlines()]
    parts = (ln.partition(" ") for ln in lines if ln and ln[0] != "#")
    instructions = [(i.upper(), rest.strip()) for i, _, rest in parts]
    stages = [n for n, (i, _) in enumerate(instructions) if i == "FROM"]
    if not stages:
        fail(where, "no FROM")
    final = instructions[stages[-1]:]
    last = {i: rest for i, rest in final}  # the last of each instruction in the final stage wins
    if not re.match(r"python:3\.12-slim\b", last["FROM"]):
        fail(where, f"the image must be based on python:3.12-slim, got {last['FROM']}")
    # The package, at the lock's versions: `pip install -c requirements.lock '.[embedded]'` (or plain `.`).
    installs = [rest for i, rest in instructions if i == "RUN" and re.search(r"\bpip install\b", rest)]
    if not any(re.search(r"(\s|^)'?\.(\[[a-z,]+\])?'?(\s|$)", r) for r in installs):
        fail(where, "the package is not installed with `pip install .`")
    if not any("-c requirements.lock" in r for r in installs):
        fail(where, "the install does not use requirements.lock (-c requirements.lock): the image's versions drift")
    if "requirements.lock" not in " ".join(rest for i, rest in instructions if i == "COPY"):
        fail(where, "requirements.lock is not copied into the build stage")
    user = last.get("USER", "root").split(":")[0]
    if user in ("root", "0"):
        fail(where, f"the image must run as a non-root user, got USER {user}")
    if str(DEFAULT_PORT) not in last.get("EXPOSE", "").split():
        fail(where, f"EXPOSE {DEFAULT_PORT} is missing")
    for name in ("ENTRYPOINT", "CMD", "HEALTHCHECK"):
        if name not in last:
            fail(where, f"no {name}")
    entrypoint = exec_form(last["ENTRYPOINT"], "ENTRYPOINT", where)
    cmd = exec_form(last["CMD"], "CMD", where)
    options, sep, probe = last["HEALTHCHECK"].partition("CMD ")
    healthcheck = exec_form(probe, "HEALTHCHECK", where) if sep else []
    code = healthcheck[2] if healthcheck[:2] == ["python", "-c"] else ""
    if not code:
        fail(where, f"HEALTHCHECK must run `python -c ...` (no curl in slim images), got {healthcheck}")
    compile(code, "<HEALTHCHECK>", "exec")
    if "/healthz" not in code or f"'{DEFAULT_PORT}'" not in code:
        fail(where, f"HEALTHCHECK must poll /healthz on port {DEFAULT_PORT}: {code}")
    return Image(entrypoint, cmd, healthcheck)


def image() -> Image:
    return check_dockerfile((DEPLOY / "Dockerfile").read_text("utf-8"))


# --- docker-compose.yml --------------------------------------------------------------------------------------------


def compose_env(service: dict[str, Any]) -> dict[str, str]:
    """The service's environment, with compose's ``${VAR}`` / ``${VAR:?message}`` references as placeholders."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): "" if v is None else re.sub(r"\$\{[^}]*\}", "placeholder", str(v)) for k, v in env.items()}


def is_openmaic(service: dict[str, Any]) -> bool:
    return "build" in service or str(service.get("image", "")).split(":")[0].rsplit("/", 1)[-1] == "openmaic"


def check_compose_service(name: str, s: dict[str, Any], img: Image, base: Path = DEPLOY) -> Command:
    where = f"docker-compose.yml services.{name}"
    entrypoint = as_argv(s["entrypoint"]) if "entrypoint" in s else img.entrypoint
    # A service entrypoint resets the image's CMD, as docker does.
    command = as_argv(s["command"]) if "command" in s else ([] if "entrypoint" in s else img.cmd)
    cmd = check_command(entrypoint + command, where)
    env = compose_env(s)
    if s.get("stop_signal", "SIGTERM") != "SIGTERM":
        fail(where, f"stop_signal must be SIGTERM, got {s['stop_signal']}")
    if ".env" not in as_argv(s.get("env_file")):
        fail(where, "env_file must include .env (OPENMAIC_SECRET_KEY and provider keys)")
    if not env.get("DATABASE_URL"):
        fail(where, "DATABASE_URL is not set")
    config = env.get("OPENMAIC_CONFIG")
    mounts = {}
    for volume in s.get("volumes", []):
        source, target, *mode = str(volume).split(":")
        mounts[target] = (source, mode)
    if not config or config not in mounts:
        fail(where, f"OPENMAIC_CONFIG must name a mounted file, got {config!r}")
    source, mode = mounts[config]
    if "ro" not in ",".join(mode).split(","):
        fail(where, f"{config} must be mounted read-only")
    if not (base / source).is_file():
        fail(where, f"the mounted config {source} does not exist")
    healthcheck_off = (s.get("healthcheck") or {}).get("disable") is True
    if cmd.args.command == "migrate":
        if str(s.get("restart", "no")) != "no":
            fail(where, "the one-shot migration must not restart")
        if healthcheck_off is False:
            fail(where, "the image's HEALTHCHECK polls the API; disable it for the migration")
        return cmd
    if cmd.args.command != "serve":
        fail(where, f"expected `serve` or `migrate`, got {shlex.join(cmd.argv)!r}")
    check_longer_than_grace(s.get("stop_grace_period"), "stop_grace_period", where)
    depends = s.get("depends_on") or {}
    if not isinstance(depends, dict) or (depends.get("migrate") or {}).get("condition") != (
        "service_completed_successfully"
    ):
        fail(where, "must depend on migrate with condition service_completed_successfully")
    port = cmd.probe_port(env)
    if healthcheck_off:
        fail(where, f"every role is probed: keep a /healthz health check (port {port})")
    if cmd.host(env) != "0.0.0.0":
        fail(where, f"--host 0.0.0.0: port {port} must be reachable from other containers (Prometheus)")
    test = " ".join(as_argv((s.get("healthcheck") or {}).get("test")))
    if test:
        if f"127.0.0.1:{port}/healthz" not in test:
            fail(where, f"the health check must poll http://127.0.0.1:{port}/healthz, got {test!r}")
    elif port != DEFAULT_PORT and env.get("OPENMAIC_PORT") != str(port):
        # the image's HEALTHCHECK polls OPENMAIC_PORT, else the default port
        fail(where, f"roles {', '.join(cmd.roles)} serve /healthz on {port} but the image's HEALTHCHECK polls "
                    f"{env.get('OPENMAIC_PORT') or DEFAULT_PORT}")  # fmt: skip
    if "api" in cmd.roles:
        published = [str(p).rsplit(":", 1)[-1].split("/")[0] for p in s.get("ports", [])]
        if str(port) not in published:
            fail(where, f"the API port {port} is not published (ports: {s.get('ports')})")
    return cmd


def check_compose(doc: dict[str, Any], img: Image) -> dict[str, Command]:
    where = "docker-compose.yml"
    services = doc["services"]
    databases = [n for n, s in services.items() if str(s.get("image", "")).startswith("postgres:")]
    if len(databases) != 1:
        fail(where, f"expected one postgres service, got {databases}")
    db = services[databases[0]]
    if not str(db["image"]).startswith("postgres:16"):
        fail(where, f"expected PostgreSQL 16, got {db['image']}")
    if "pg_isready" not in " ".join(as_argv(db.get("healthcheck", {}).get("test"))):
        fail(where, "the postgres service needs a pg_isready health check")
    named = set(doc.get("volumes") or {})
    if not any(str(v).split(":")[0] in named for v in db.get("volumes", [])):
        fail(where, "the postgres data must live on a named volume")
    commands = {n: check_compose_service(n, s, img) for n, s in services.items() if is_openmaic(s)}
    for name, cmd in commands.items():
        s = services[name]
        host = urlsplit(compose_env(s)["DATABASE_URL"]).hostname
        if host not in databases:
            fail(f"{where} services.{name}", f"DATABASE_URL points at {host!r}, not the postgres service")
        if cmd.args.command == "migrate":
            condition = (s.get("depends_on") or {}).get(databases[0], {}).get("condition")
            if condition != "service_healthy":
                fail(f"{where} services.{name}", "the migration must wait for a healthy database")
    migrations = [n for n, c in commands.items() if c.args.command == "migrate"]
    if migrations != ["migrate"]:
        fail(where, f"expected one one-shot service `migrate`, got {migrations}")
    processes = {role: 0 for role in ROLES}
    for name, cmd in commands.items():
        for role in cmd.roles:
            processes[role] += int((services[name].get("deploy") or {}).get("replicas", 1))
    if processes != EXPECTED_PROCESSES:
        fail(where, f"processes per role: expected {EXPECTED_PROCESSES}, got {processes}")
    check_compose_scrape(services, commands)
    return commands


def compose_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path of the service's bind mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = str(volume).split(":")
        mounts[target] = source
    return mounts


def scrape_targets(config: dict[str, Any]) -> set[str]:
    """Every ``host:port`` a Prometheus configuration scrapes (static targets and DNS names with their port)."""
    targets: set[str] = set()
    for job in config.get("scrape_configs") or []:
        for static in job.get("static_configs") or []:
            targets |= {str(t) for t in static.get("targets") or []}
        for dns in job.get("dns_sd_configs") or []:
            targets |= {f"{n}:{dns['port']}" for n in dns.get("names") or []}
    return targets


def check_compose_scrape(services: dict[str, Any], commands: dict[str, Command]) -> None:
    """A Prometheus service scrapes every openmaic process on the port that serves its /metrics, with the rules."""
    where = "docker-compose.yml"
    proms = [n for n, s in services.items() if str(s.get("image", "")).split(":")[0].endswith("prometheus")]
    if len(proms) != 1:
        fail(where, f"expected one Prometheus service scraping every role, got {proms}")
    prom = services[proms[0]]
    mounts = compose_mounts(prom)
    flags = [a for a in as_argv(prom.get("command")) if a.startswith("--config.file=")]
    config_path = flags[-1].split("=", 1)[1] if flags else "/etc/prometheus/prometheus.yml"
    if config_path not in mounts:
        fail(f"{where} services.{proms[0]}", f"its configuration {config_path} is not mounted")
    config = yaml.safe_load((DEPLOY / mounts[config_path]).read_text("utf-8"))
    for rules in config.get("rule_files") or []:
        if rules not in mounts or not (DEPLOY / mounts[rules]).is_file():
            fail(f"{where} services.{proms[0]}", f"rule file {rules} is not mounted from deploy/")
    if not config.get("rule_files"):
        fail(f"{where} services.{proms[0]}", "no rule_files: the alerts are not evaluated")
    targets = scrape_targets(config)
    for name, cmd in commands.items():
        if cmd.args.command == "serve":
            target = f"{name}:{cmd.probe_port(compose_env(services[name]))}"
            if target not in targets:
                fail(f"{where} services.{name}", f"Prometheus does not scrape {target} (it scrapes {sorted(targets)})")


# --- Kubernetes ----------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    kind: str
    name: str
    where: str
    labels: dict[str, str]
    commands: list[Command] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)  # API container ports by name and number
    api_port: int | None = None
    config_refs: list[tuple[str, str]] = field(default_factory=list)  # (ConfigMap, key) read as OPENMAIC_CONFIG
    secret_refs: list[tuple[str, str]] = field(default_factory=list)  # (Secret, key) required


def secret_ref(env: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    for item in env:
        if item.get("name") == name:
            return ((item.get("valueFrom") or {}).get("secretKeyRef")) or None
    return None


def resolve_port(port: Any, ports: dict[str, int]) -> int | None:
    return ports.get(port) if isinstance(port, str) else int(port)


def check_probe(container: dict[str, Any], probe: str, path: str, port: int, ports: dict[str, int], where: str) -> None:
    get = (container.get(probe) or {}).get("httpGet")
    if not get:
        fail(where, f"every role is probed: the container needs a {probe} (httpGet {path} on port {port})")
    if get.get("path") != path:
        fail(where, f"{probe} must request {path}, got {get.get('path')}")
    if resolve_port(get.get("port"), ports) != port:
        fail(where, f"{probe} port {get.get('port')!r} is not port {port}, which serves {path} for this role")


def check_workload(doc: dict[str, Any], img: Image, file: str) -> Workload:
    kind, name = doc["kind"], doc["metadata"]["name"]
    where = f"kubernetes/{file} {kind} {name}"
    template = doc["spec"]["template"]
    pod = template["spec"]
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    if kind == "Deployment":
        selector = doc["spec"]["selector"]["matchLabels"]
        if not selector.items() <= labels.items():
            fail(where, f"selector {selector} does not match the pod labels {labels}")
    check_longer_than_grace(pod.get("terminationGracePeriodSeconds"), "terminationGracePeriodSeconds", where)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    w = Workload(kind, name, where, labels)
    for c in pod["containers"]:
        cwhere = f"{where} container {c['name']}"
        if "command" in c:  # a command replaces the image's ENTRYPOINT and drops its CMD
            argv = as_argv(c["command"]) + as_argv(c.get("args"))
        else:
            argv = img.entrypoint + (as_argv(c["args"]) if "args" in c else img.cmd)
        cmd = check_command(argv, cwhere)
        w.commands.append(cmd)
        if (c.get("lifecycle") or {}).get("preStop"):
            fail(cwhere, "no preStop hook: the server shuts down gracefully on SIGTERM")
        requests = (c.get("resources") or {}).get("requests") or {}
        if not {"cpu", "memory"} <= set(requests):
            fail(cwhere, f"resources.requests needs cpu and memory, got {requests}")
        env_list = c.get("env") or []
        env = {e["name"]: str(e["value"]) for e in env_list if "value" in e}
        required = ["DATABASE_URL"] + (["OPENMAIC_SECRET_KEY"] if cmd.args.command == "serve" else [])
        for var in required:
            ref = secret_ref(env_list, var)
            if ref is None or ref.get("optional"):
                fail(cwhere, f"{var} must come from a Secret (a required secretKeyRef)")
            w.secret_refs.append((ref["name"], ref["key"]))
        ports = {}
        for p in c.get("ports", []):
            ports[str(p["containerPort"])] = int(p["containerPort"])
            if "name" in p:
                ports[p["name"]] = int(p["containerPort"])
        if cmd.args.command == "serve":
            path = env.get("OPENMAIC_CONFIG")
            mount = next((m for m in c.get("volumeMounts", []) if path and posixpath.dirname(path) == m["mountPath"]),
                         None)  # fmt: skip
            source = (volumes.get(mount["name"]) or {}).get("configMap") if mount else None
            if not source:
                fail(cwhere, f"OPENMAIC_CONFIG must name a file in a mounted ConfigMap, got {path!r}")
            w.config_refs.append((source["name"], posixpath.basename(path)))
        if cmd.args.command == "serve":
            port = cmd.probe_port(env)
            if port not in ports.values():
                declared = sorted(set(ports.values()))
                listener = "the API" if "api" in cmd.roles else "the admin listener"
                fail(cwhere, f"{listener} listens on {port} but the container declares ports {declared}")
            if cmd.host(env) != "0.0.0.0":
                fail(cwhere, f"--host 0.0.0.0: the kubelet and Prometheus reach port {port} from outside the pod")
            check_probe(c, "readinessProbe", "/readyz", port, ports, cwhere)
            check_probe(c, "livenessProbe", "/healthz", port, ports, cwhere)
            if "startupProbe" in c:
                check_probe(c, "startupProbe", "/healthz", port, ports, cwhere)
            annotations = (template.get("metadata") or {}).get("annotations") or {}
            scrape = {k: annotations.get(f"prometheus.io/{k}") for k in ("scrape", "port", "path")}
            if scrape != {"scrape": "true", "port": str(port), "path": "/metrics"}:
                fail(where, f"the pod must be annotated for scraping on port {port} (prometheus.io/scrape: \"true\", "
                            f"prometheus.io/port: \"{port}\", prometheus.io/path: /metrics), got {scrape}")  # fmt: skip
            if "api" in cmd.roles:
                w.ports, w.api_port = ports, port
    if kind == "Job" and [c.args.command for c in w.commands] != ["migrate"]:
        fail(where, "the Job must run `openmaic migrate`")
    return w


def k8s_docs(names: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in names:
        for doc in yaml.safe_load_all((K8S / name).read_text("utf-8")):
            if doc:
                out.append((name, doc))
    return out


def selects(selector: dict[str, str], w: Workload) -> bool:
    return bool(selector) and selector.items() <= w.labels.items()


def check_kubernetes(docs: list[tuple[str, dict[str, Any]]], img: Image) -> list[Workload]:
    workloads = [check_workload(d, img, f) for f, d in docs if d.get("kind") in ("Deployment", "Job")]
    deployments = {role: [w for w in workloads if w.kind == "Deployment" and any(role in c.roles for c in w.commands)]
                   for role in ROLES}  # fmt: skip
    for role, found in deployments.items():
        if not found:
            fail("kubernetes", f"no Deployment runs the {role} role")
    if not any(w.kind == "Job" for w in workloads):
        fail("kubernetes", "no Job runs the migration")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for _, d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    for service in by_kind.get("Service", []):
        where = f"kubernetes Service {service['metadata']['name']}"
        targets = [w for w in workloads if selects(service["spec"].get("selector") or {}, w)]
        if not targets or any(w.api_port is None for w in targets):
            fail(where, f"must select the API pods only, selects {[w.name for w in targets]}")
        for p in service["spec"]["ports"]:
            for w in targets:
                if resolve_port(p.get("targetPort", p["port"]), w.ports) != w.api_port:
                    fail(where, f"targetPort {p.get('targetPort')!r} is not the API port {w.api_port}")
    if not by_kind.get("Service"):
        fail("kubernetes", "no Service for the API")
    budgets = by_kind.get("PodDisruptionBudget", [])
    for role in ("api", "worker"):
        if not any(selects(b["spec"]["selector"]["matchLabels"], w) for b in budgets for w in deployments[role]):
            fail("kubernetes", f"no PodDisruptionBudget selects the {role} pods")
    maps = {d["metadata"]["name"]: d.get("data") or {} for d in by_kind.get("ConfigMap", [])}
    for w in workloads:
        for name, key in w.config_refs:
            if key not in maps.get(name, {}):
                fail(w.where, f"OPENMAIC_CONFIG reads {key} from ConfigMap {name}, which does not hold it")
    return workloads


# --- systemd -------------------------------------------------------------------------------------------------------


def parse_unit(text: str, where: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in (ln.strip() for ln in re.sub(r"\\\n", " ", text).splitlines()):
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        if current is None or not sep:
            fail(where, f"not a unit file line: {line!r}")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def words(values: list[str]) -> list[str]:
    return [w for v in values for w in shlex.split(v)]


def check_unit(name: str, unit: dict[str, dict[str, list[str]]], instance: str | None = None) -> Command:
    """A unit (a template unit as its ``instance``, %i replaced) runs a valid command the way systemd should."""
    where = f"systemd/{name}" + (f" (instance {instance})" if instance is not None else "")
    service = unit.get("Service") or {}
    one = {k: v[-1] for k, v in service.items()}
    starts = service.get("ExecStart", [])
    if len(starts) != 1:
        fail(where, f"expected one ExecStart, got {starts}")
    argv = shlex.split(starts[0].lstrip("-@+!:").replace("%i", instance or "%i"))
    if not argv[0].startswith("/"):
        fail(where, f"ExecStart must use an absolute path, got {argv[0]}")
    cmd = check_command(argv, where)
    if one.get("User", "root") in ("root", "0"):
        fail(where, "must run as a dedicated user (User=)")
    if "/etc/openmaic/env" not in service.get("EnvironmentFile", []):
        fail(where, "EnvironmentFile=/etc/openmaic/env is missing (a leading '-' would make it optional)")
    if cmd.args.command == "migrate":
        if one.get("Type") != "oneshot":
            fail(where, "the migration must be Type=oneshot")
        return cmd
    if cmd.args.command != "serve":
        fail(where, f"expected `serve` or `migrate`, got {shlex.join(argv)!r}")
    if one.get("KillSignal") != "SIGTERM":
        fail(where, "KillSignal=SIGTERM starts the graceful shutdown")
    check_longer_than_grace(one.get("TimeoutStopSec"), "TimeoutStopSec", where)
    if one.get("Restart") != "on-failure":
        fail(where, f"Restart=on-failure expected, got {one.get('Restart')}")
    if not any(w.startswith("OPENMAIC_CONFIG=") for w in words(service.get("Environment", []))):
        fail(where, "Environment=OPENMAIC_CONFIG=... is missing")
    deps = unit.get("Unit") or {}
    for key in ("Requires", "After"):
        if "openmaic-migrate.service" not in words(deps.get(key, [])):
            fail(where, f"{key}=openmaic-migrate.service is missing")
    return cmd


def instances(units: dict[str, str], template: str) -> list[str]:
    """The instances of ``template`` (``openmaic-worker@.service``) that openmaic.target wants."""
    wanted = words((parse_unit(units["openmaic.target"], "systemd/openmaic.target").get("Unit") or {}).get("Wants", []))
    prefix, suffix = template.split("@")
    return [u[len(prefix) + 1: -len(suffix)] for u in wanted if u.startswith(prefix + "@") and u.endswith(suffix)]


def check_systemd(units: dict[str, str]) -> dict[str, Command]:
    commands = {}
    listening: dict[int, str] = {}  # one host: no two processes may take the same port
    for name, text in units.items():
        if not name.endswith(".service"):
            continue
        unit = parse_unit(text, f"systemd/{name}")
        for instance in instances(units, name) if name.endswith("@.service") else [None]:
            cmd = check_unit(name, unit, instance)
            commands[name] = cmd
            if cmd.args.command != "serve":
                continue
            env = dict(w.partition("=")[::2] for w in words((unit.get("Service") or {}).get("Environment", [])))
            port = cmd.probe_port(env)
            unit_name = name.replace("@.", f"@{instance}.")
            if port in listening:
                fail(f"systemd/{unit_name}", f"serves its probes on port {port}, as {listening[port]} does")
            listening[port] = unit_name
    roles = {r for c in commands.values() for r in c.roles}
    if roles != set(ROLES):
        fail("systemd", f"the units serve roles {sorted(roles)}, expected {sorted(ROLES)}")
    migrations = [n for n, c in commands.items() if c.args.command == "migrate"]
    if migrations != ["openmaic-migrate.service"]:
        fail("systemd", f"expected openmaic-migrate.service to run the migration, got {migrations}")
    workers = [n for n, c in commands.items() if "worker" in c.roles]
    if workers != ["openmaic-worker@.service"]:
        fail("systemd", f"the worker must be one templated unit openmaic-worker@.service, got {workers}")
    return commands


# --- the real files --------------------------------------------------------------------------------------------------


def test_every_yaml_file_parses() -> None:
    files = sorted([*DEPLOY.rglob("*.yml"), *DEPLOY.rglob("*.yaml")])
    assert {f.name for f in files} >= {"docker-compose.yml", "openmaic.yml", "kustomization.yaml"}
    for f in files:
        docs = [d for d in yaml.safe_load_all(f.read_text("utf-8")) if d is not None]
        assert docs and all(isinstance(d, dict) for d in docs), f


def test_dockerfile() -> None:
    img = image()
    assert img.entrypoint == ["openmaic"]
    cmd = check_command(img.entrypoint + img.cmd, "Dockerfile ENTRYPOINT + CMD")
    assert cmd.roles == ROLES and cmd.args.host == "0.0.0.0"
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text("utf-8")  # the build context is the repository root
    assert {"!pyproject.toml", "!requirements.lock", "!openmaic"} <= set(ignore.split())


def test_compose() -> None:
    doc = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text("utf-8"))
    commands = check_compose(doc, image())
    assert {n: c.roles for n, c in commands.items()} == {
        "migrate": (), "api": ("api",), "worker": ("worker",), "projector": ("projector",),
    }  # fmt: skip
    assert (DEPLOY / ".env.example").is_file()
    example = dict(ln.partition("=")[::2] for ln in (DEPLOY / ".env.example").read_text("utf-8").splitlines()
                   if ln and not ln.startswith("#"))  # fmt: skip
    assert {"OPENMAIC_SECRET_KEY", "POSTGRES_PASSWORD"} <= set(example)


def test_kubernetes() -> None:
    manifests = sorted(p.name for p in K8S.glob("*.yaml"))
    docs = k8s_docs([m for m in manifests if m != "kustomization.yaml"])
    workloads = check_kubernetes(docs, image())
    assert {w.name for w in workloads} == {"openmaic-api", "openmaic-worker", "openmaic-projector", "openmaic-migrate"}
    # The ConfigMap holds the same configuration as deploy/openmaic.yml.
    (config_map,) = [d for _, d in docs if d["kind"] == "ConfigMap"]
    env = {"OPENMAIC_SECRET_KEY": SECRET_KEY}
    in_cluster = parse_config(config_map["data"]["openmaic.yml"], source="deploy/openmaic.yml", env=env)
    assert in_cluster == example_config()
    # Every required secretKeyRef is in the example Secret, which is marked as an example and never applied.
    (secret_file,) = sorted({f for f, d in docs if d["kind"] == "Secret"})
    assert "example" in secret_file and "EXAMPLE" in (K8S / secret_file).read_text("utf-8")
    secrets = {d["metadata"]["name"]: d for f, d in docs if d["kind"] == "Secret"}
    for w in workloads:
        for name, key in w.secret_refs:
            assert key in secrets[name]["stringData"], (w.where, name, key)
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text("utf-8"))
    assert sorted(kustomization["resources"]) == sorted(m for m in manifests if m not in (secret_file,
                                                                                         "kustomization.yaml"))


def test_systemd() -> None:
    units = {p.name: p.read_text("utf-8") for p in sorted(SYSTEMD.glob("openmaic*"))}
    commands = check_systemd(units)
    assert set(commands) == {"openmaic-api.service", "openmaic-worker@.service", "openmaic-projector.service",
                             "openmaic-migrate.service"}  # fmt: skip
    target = parse_unit(units["openmaic.target"], "systemd/openmaic.target")
    wanted = words(target["Unit"]["Wants"])
    assert len([u for u in wanted if re.fullmatch(r"openmaic-worker@\w+\.service", u)]) >= 2
    assert {"openmaic-api.service", "openmaic-projector.service", "openmaic-migrate.service"} <= set(wanted)


def test_example_config() -> None:
    config = example_config()
    assert config.route("llm").provider == "demo" and config.identity.mode == "anonymous"
    assert config.route("image").provider == "demo" and config.model_source == "openmaic.yml"
    text = (DEPLOY / "openmaic.yml").read_text("utf-8")
    with pytest.raises(ConfigError, match="OPENMAIC_SECRET_KEY: too short"):
        parse_config(text, source="deploy/openmaic.yml", env={"OPENMAIC_SECRET_KEY": "short"})
    # The commented examples are valid too: uncomment every provider and route line and load the result.
    uncommented = re.sub(r"(?m)^(\s*)# ([\w.]+: (?:\{preset: .*|\w+:\S+))$", r"\1\2", text)
    assert uncommented.count("preset: openai") == 2 and "preset: anthropic" in uncommented
    full = parse_config(uncommented, source="uncommented", env={"OPENMAIC_SECRET_KEY": SECRET_KEY, **PROVIDER_KEYS})
    assert set(full.providers) == {"demo", "openai", "claude", "local"}
    assert {full.route(s).provider for s in ("llm", "course.outline", "course.content")} == {"openai", "claude",
                                                                                             "local"}


# --- the checks reject broken manifests ------------------------------------------------------------------------------

SYNTHETIC_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: synthetic}
spec:
  selector: {matchLabels: {app: synthetic}}
  template:
    metadata:
      labels: {app: synthetic}
      annotations: {prometheus.io/scrape: "true", prometheus.io/port: "8000", prometheus.io/path: /metrics}
    spec:
      terminationGracePeriodSeconds: 45
      containers:
        - name: app
          image: openmaic:test
          args: ["serve", "--role", "api", "--host", "0.0.0.0"]
          ports: [{name: http, containerPort: 8000}]
          env:
            - {name: OPENMAIC_CONFIG, value: /etc/openmaic/openmaic.yml}
            - {name: DATABASE_URL, valueFrom: {secretKeyRef: {name: s, key: DATABASE_URL}}}
            - {name: OPENMAIC_SECRET_KEY, valueFrom: {secretKeyRef: {name: s, key: OPENMAIC_SECRET_KEY}}}
          readinessProbe: {httpGet: {path: /readyz, port: http}}
          livenessProbe: {httpGet: {path: /healthz, port: 8000}}
          resources: {requests: {cpu: 100m, memory: 128Mi}}
          volumeMounts: [{name: config, mountPath: /etc/openmaic}]
      volumes: [{name: config, configMap: {name: c}}]
"""

SYNTHETIC_UNIT = """
[Unit]
Requires=openmaic-migrate.service
After=openmaic-migrate.service

[Service]
User=openmaic
Environment=OPENMAIC_CONFIG=/etc/openmaic/openmaic.yml
EnvironmentFile=/etc/openmaic/env
ExecStart=/opt/openmaic/bin/openmaic serve --role worker
KillSignal=SIGTERM
TimeoutStopSec=30
Restart=on-failure
"""

SYNTHETIC_COMPOSE_SERVICE = """
image: openmaic:test
env_file: .env
environment: {DATABASE_URL: "postgresql://u:p@postgres/openmaic", OPENMAIC_CONFIG: /etc/openmaic/openmaic.yml}
volumes: ["./openmaic.yml:/etc/openmaic/openmaic.yml:ro"]
depends_on: {migrate: {condition: service_completed_successfully}}
stop_grace_period: 30s
command: ["serve", "--role", "api", "--host", "0.0.0.0"]
ports: ["8000:8000"]
"""


def test_synthetic_manifests_pass() -> None:
    """The baselines the broken variants below start from are sound, so each rejection is the edit's doing."""
    img = image()
    w = check_workload(yaml.safe_load(SYNTHETIC_DEPLOYMENT), img, "synthetic.yaml")
    assert w.api_port == 8000 and w.commands[0].roles == ("api",)
    # A worker serving its probes and metrics on its admin listener, on the same port, is sound too.
    worker = SYNTHETIC_DEPLOYMENT.replace('"--role", "api"', '"--role", "worker", "--admin-port", "8000"')
    assert check_workload(yaml.safe_load(worker), img, "synthetic.yaml").commands[0].probe_port({}) == 8000
    assert check_unit("synthetic.service", parse_unit(SYNTHETIC_UNIT, "synthetic")).roles == ("worker",)
    assert check_compose_service("synthetic", yaml.safe_load(SYNTHETIC_COMPOSE_SERVICE), img).roles == ("api",)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"--role", "api"', '"--role", "wroker"', "invalid choice: 'wroker'"),
        ('args: ["serve"', 'args: ["server"', "invalid choice: 'server'"),
        ('args: ["serve"', 'command: ["python", "-m", "openmaic"]\n          args: ["serve"',
         "does not run the openmaic"),
        ('"0.0.0.0"]', '"0.0.0.0", "--port", "9000"]', "the API listens on 9000"),
        ("path: /readyz", "path: /healthz", "readinessProbe must request /readyz"),
        ("port: 8000}", "port: 8080}", "livenessProbe port 8080 is not port 8000"),
        ("terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 10", "not longer than the shutdown"),
        ("secretKeyRef: {name: s, key: DATABASE_URL}", "secretKeyRef: {name: s, key: DATABASE_URL, optional: true}",
         "DATABASE_URL must come from a Secret"),
        ("{cpu: 100m, memory: 128Mi}", "{cpu: 100m}", "resources.requests"),
        ('"--role", "api"', '"--role", "worker"', "the admin listener listens on 8001 but the container declares"),
        ('"0.0.0.0"]', '"127.0.0.1"]', "--host 0.0.0.0"),
        ('prometheus.io/port: "8000"', 'prometheus.io/port: "9000"', "annotated for scraping on port 8000"),
        ("readinessProbe: {httpGet: {path: /readyz, port: http}}", "", "needs a readinessProbe"),
    ],
)
def test_kubernetes_rejects(old: str, new: str, message: str) -> None:
    assert old in SYNTHETIC_DEPLOYMENT
    doc = yaml.safe_load(SYNTHETIC_DEPLOYMENT.replace(old, new, 1))
    with pytest.raises(pytest.fail.Exception, match=re.escape(message)):
        check_workload(doc, image(), "synthetic.yaml")


def test_kubernetes_rejects_a_prestop_hook() -> None:
    doc = yaml.safe_load(SYNTHETIC_DEPLOYMENT)
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", "5"]}}}
    with pytest.raises(pytest.fail.Exception, match="no preStop hook"):
        check_workload(doc, image(), "synthetic.yaml")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("--role worker", "--role wroker", "invalid choice: 'wroker'"),
        ("--role worker", "--roles worker", "unrecognized arguments"),
        ("ExecStart=/opt/openmaic/bin/openmaic", "ExecStart=openmaic", "absolute path"),
        ("TimeoutStopSec=30", "TimeoutStopSec=10s", "not longer than the shutdown"),
        ("Restart=on-failure", "Restart=always", "Restart=on-failure"),
        ("KillSignal=SIGTERM", "KillSignal=SIGKILL", "KillSignal=SIGTERM"),
        ("EnvironmentFile=/etc/openmaic/env", "EnvironmentFile=-/etc/openmaic/env", "EnvironmentFile"),
        ("Requires=openmaic-migrate.service", "Wants=openmaic-migrate.service", "Requires="),
        ("User=openmaic", "User=root", "dedicated user"),
    ],
)
def test_systemd_rejects(old: str, new: str, message: str) -> None:
    assert old in SYNTHETIC_UNIT
    unit = parse_unit(SYNTHETIC_UNIT.replace(old, new, 1), "synthetic")
    with pytest.raises(pytest.fail.Exception, match=re.escape(message)):
        check_unit("synthetic.service", unit)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"--role", "api"', '"--role", "apis"', "invalid choice: 'apis'"),
        ('"0.0.0.0"]', '"0.0.0.0", "--port", "80800"]', "port must be between"),
        ("stop_grace_period: 30s", "stop_grace_period: 10s", "not longer than the shutdown"),
        ("condition: service_completed_successfully", "condition: service_started", "service_completed_successfully"),
        ("openmaic.yml:ro", "openmaic.yml:rw", "read-only"),
        ('["8000:8000"]', '["8000:9000"]', "API port 8000 is not published"),
        ('"--role", "api"', '"--role", "projector"', "serve /healthz on 8001 but the image's HEALTHCHECK polls 8000"),
        ('"0.0.0.0"]', '"127.0.0.1"]', "--host 0.0.0.0"),
        ("stop_grace_period: 30s", "stop_grace_period: 30s\nhealthcheck: {disable: true}", "keep a /healthz health"),
        ("stop_grace_period: 30s", "stop_grace_period: 30s\nhealthcheck: {test: [CMD, x, 'http://127.0.0.1:8001/healthz']}",
         "must poll http://127.0.0.1:8000/healthz"),
    ],
)
def test_compose_rejects(old: str, new: str, message: str) -> None:
    assert old in SYNTHETIC_COMPOSE_SERVICE
    service = yaml.safe_load(SYNTHETIC_COMPOSE_SERVICE.replace(old, new, 1))
    with pytest.raises(pytest.fail.Exception, match=re.escape(message)):
        check_compose_service("synthetic", service, image())


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('ENTRYPOINT ["openmaic"]', "ENTRYPOINT openmaic", "exec form"),
        ('CMD ["serve", "--host", "0.0.0.0"]', 'CMD ["serve", "--role", "all"]', "invalid choice: 'all'"),
        ("USER 10001:10001", "USER root", "non-root"),
        ("/healthz", "/readyz", "HEALTHCHECK must poll /healthz"),
        ("-c requirements.lock ", "", "does not use requirements.lock"),
    ],
)
def test_dockerfile_rejects(old: str, new: str, message: str) -> None:
    text = (DEPLOY / "Dockerfile").read_text("utf-8")
    assert old in text
    with pytest.raises(pytest.fail.Exception, match=re.escape(message)):
        img = check_dockerfile(text.replace(old, new), "synthetic Dockerfile")
        check_command(img.entrypoint + img.cmd, "synthetic Dockerfile ENTRYPOINT + CMD")


def test_systemd_rejects_two_processes_on_one_port() -> None:
    units = {p.name: p.read_text("utf-8") for p in sorted(SYSTEMD.glob("openmaic*"))}
    broken = dict(units)
    broken["openmaic-worker@.service"] = units["openmaic-worker@.service"].replace("--admin-port %i", "--admin-port 8001")
    with pytest.raises(pytest.fail.Exception, match="serves its probes on port 8001, as"):
        check_systemd(broken)


def test_compose_rejects_a_role_prometheus_does_not_scrape() -> None:
    doc = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text("utf-8"))
    doc["services"]["projector"]["command"] += ["--admin-port", "8002"]
    doc["services"]["projector"]["healthcheck"]["test"][-1] = doc["services"]["projector"]["healthcheck"]["test"][
        -1].replace("8001", "8002")  # fmt: skip
    with pytest.raises(pytest.fail.Exception, match="Prometheus does not scrape projector:8002"):
        check_compose(doc, image())


def test_durations() -> None:
    assert [seconds(v, "t") for v in ("30", "30s", "1m30s", "1min 30s", "2min", 45)] == [30, 30, 90, 90, 120, 45]
    with pytest.raises(pytest.fail.Exception, match="cannot read the duration"):
        seconds("30 parsecs", "t")
