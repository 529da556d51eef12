"""OpenMAIC's owner modes, read from the environment as OpenMAIC 1.2 reads them.

* ``PERSISTENCE_SHARED_OWNER_ID`` (``[A-Za-z0-9._-]{1,128}``): one shared team owner. It requires
  ``ACCESS_CODE``: without it anyone who can reach the server would write as the team, so the boot fails.
* ``OWNER_SINGLE_USER=true`` (or ``1``): one owner, ``OWNER_SINGLE_USER_ID`` (default ``local``). Without
  ``ACCESS_CODE`` it only warns. Setting both variables fails the boot.
* ``ACCESS_CODE``: turns on the access-code gate (:mod:`openmaic.api.access_code`) in any mode.
* ``OWNER_CLAIM_TRIGGER``: ``explicit`` (the default: anonymous work moves to an account by ``POST
  /api/identity/claim``) or ``auto`` (on the first request of the signed-in owner that presents an anonymous
  cookie, :mod:`openmaic.owners.claims`).

These apply unless ``identity.mode`` names a host method (``token``: this server's bearer tokens;
``trusted_header``: a reverse proxy's user header), which OpenMAIC consults first.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from openmaic.errors import ConfigError
from openmaic.secret import Secret

__all__ = ["OWNER_ID", "OwnerEnv", "read_owner_env"]

OWNER_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class OwnerEnv:
    """What the environment says about owners: a mode (or ``None``), its owner, the access code, warnings."""

    mode: str | None
    owner: str | None
    access_code: Secret | None
    notices: tuple[str, ...]
    claim_trigger: str | None = None
    """``explicit`` or ``auto`` when ``OWNER_CLAIM_TRIGGER`` is set."""


def read_owner_env(env: Mapping[str, str]) -> OwnerEnv:
    """The owner settings of ``env`` (:class:`ConfigError` for a combination OpenMAIC refuses)."""
    trigger = (env.get("OWNER_CLAIM_TRIGGER") or "").strip().lower() or None
    if trigger not in (None, "explicit", "auto"):
        raise ConfigError(f"OWNER_CLAIM_TRIGGER: expected explicit or auto, got {trigger!r}", key="OWNER_CLAIM_TRIGGER")
    return dataclasses.replace(_modes(env), claim_trigger=trigger)


def _modes(env: Mapping[str, str]) -> OwnerEnv:
    code = (env.get("ACCESS_CODE") or "").strip()
    access = Secret(code) if code else None
    shared = (env.get("PERSISTENCE_SHARED_OWNER_ID") or "").strip()
    flag = (env.get("OWNER_SINGLE_USER") or "").strip().lower()
    if flag and flag not in _TRUE + _FALSE:
        raise ConfigError(f"OWNER_SINGLE_USER: expected true or false, got {flag!r}", key="OWNER_SINGLE_USER")
    single = flag in _TRUE
    if shared and single:
        raise ConfigError("PERSISTENCE_SHARED_OWNER_ID and OWNER_SINGLE_USER are both set; a deployment is either one "
                          "shared team or one single user: unset one of them", key="PERSISTENCE_SHARED_OWNER_ID")
    if shared:
        if not OWNER_ID.match(shared):
            raise ConfigError("PERSISTENCE_SHARED_OWNER_ID: expected 1 to 128 letters, digits, '.', '_' or '-'",
                              key="PERSISTENCE_SHARED_OWNER_ID")
        if access is None:
            raise ConfigError("PERSISTENCE_SHARED_OWNER_ID needs ACCESS_CODE: a shared team owner without an access "
                              "code lets anyone who reaches the server write as the team; set ACCESS_CODE",
                              key="ACCESS_CODE")
        return OwnerEnv("shared", shared, access, ())
    if single:
        owner = (env.get("OWNER_SINGLE_USER_ID") or "").strip() or "local"
        if not OWNER_ID.match(owner):
            raise ConfigError("OWNER_SINGLE_USER_ID: expected 1 to 128 letters, digits, '.', '_' or '-'",
                              key="OWNER_SINGLE_USER_ID")
        notices = () if access else ("OWNER_SINGLE_USER is set without ACCESS_CODE: anyone who can reach this server "
                                     "acts as its single user",)
        return OwnerEnv("single_user", owner, access, notices)
    return OwnerEnv(None, None, access, ())
