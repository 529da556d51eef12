"""The command line's argument handling, run as a real subprocess (no database needed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ENV_VARS = ("DATABASE_URL", "OPENMAIC_CONFIG", "OPENMAIC_DATA_DIR", "OPENMAIC_HOST", "OPENMAIC_PORT",
            "OPENMAIC_ADMIN_PORT", "OPENMAIC_LOG_FORMAT")


def openmaic(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ENV_VARS and not k.startswith("OPENMAIC_")}
    return subprocess.run(
        [sys.executable, "-m", "openmaic", *args], env=clean | env, capture_output=True, text=True, timeout=30
    )


def test_help_names_every_environment_variable() -> None:
    r = openmaic("serve", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())  # argparse wraps help text at any space
    for var in ENV_VARS:
        assert var in text


def test_version() -> None:
    r = openmaic("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("openmaic ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "required: COMMAND"),
        (["db"], "required: ACTION"),
        (["serve", "--port", "eighty"], "not a port number: 'eighty'"),
        (["serve", "--port", "65536"], "port must be between 0 and 65535"),
        (["serve", "--port=-1"], "port must be between 0 and 65535"),
        (["serve", "--role", "janitor"], "invalid choice: 'janitor'"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    r = openmaic(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_port_in_environment_names_the_variable() -> None:
    r = openmaic("serve", OPENMAIC_PORT="eighty")
    assert r.returncode == 2
    assert r.stderr == "openmaic: error: OPENMAIC_PORT: not a port number: 'eighty'\n"


def test_missing_config_file(tmp_path) -> None:
    r = openmaic("serve", "--config", str(tmp_path / "nope.yml"))
    assert r.returncode == 2
    assert r.stderr.startswith("openmaic: error: configuration file not found: ")
