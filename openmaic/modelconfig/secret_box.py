"""Encryption at rest for the keys owners save on the Models page (AES-256-GCM, OpenMAIC's sealed format).

The instance secret is ``OPENMAIC_SECRET_KEY``, or, when it is unset, a random secret created once in the data
directory (``<server.data_dir>/instance-secret.key``: 32 random bytes in base64, mode 0600) and read from there
afterwards. A deployment running more than one instance must set the variable (each would otherwise create its
own), and keep the secret with the database backups: a key sealed under a lost secret has to be entered again.

* The AES key is ``sha256("openmaic.instance-secret:" + secret)``; its key id (``kid``) is the first 16 hex
  characters of ``sha256(aes key)`` — it names the secret without revealing it.
* Each value gets 12 random bytes of IV; the context (``workspace-provider:<id>``) is the associated data, so a
  value sealed for one provider does not open as another's.
* The stored form is ``{"v": 1, "kid", "iv", "tag", "ct"}`` (base64 fields), the same as OpenMAIC's.

Opening a value sealed under another secret raises :class:`SecretKeyMismatch` (the settings report the key as
``unreadable`` and keep it; they never destroy it), and a damaged value raises :class:`SecretCorrupt`.
"""

from __future__ import annotations

import base64
import functools
import binascii
import hashlib
import logging
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from openmaic.errors import ConfigError, OpenMaicError
from openmaic.secret import Secret

__all__ = ["INSTANCE_SECRET_FILE", "InstanceKey", "SecretCorrupt", "SecretKeyMismatch", "instance_key",
           "is_sealed", "open_secret", "seal_secret"]  # fmt: skip

log = logging.getLogger("openmaic.secrets")

INSTANCE_SECRET_FILE = "instance-secret.key"
MIN_SECRET_CHARS = 16
_GENERATED = re.compile(r"^[A-Za-z0-9+/]{43}=$")


class SecretKeyMismatch(OpenMaicError):
    """Sealed with a different instance secret; the value has to be entered again."""

    code = "secret_key_mismatch"


class SecretCorrupt(OpenMaicError):
    """The sealed value is damaged and cannot be opened."""

    code = "secret_corrupt"


@dataclass(frozen=True)
class InstanceKey:
    """The AES-256 key derived from the instance secret, and its id."""

    key: bytes
    kid: str
    source: str
    """Where the secret came from (``OPENMAIC_SECRET_KEY`` or the file's path), for messages."""

    def __repr__(self) -> str:
        return f"InstanceKey(kid={self.kid!r}, source={self.source!r})"


def derive(secret: str, source: str = "<given>") -> InstanceKey:
    """The instance key for ``secret`` (any string; hashing gives the 32 bytes AES-256 needs)."""
    key = hashlib.sha256(f"openmaic.instance-secret:{secret}".encode()).digest()
    return InstanceKey(key=key, kid=hashlib.sha256(key).hexdigest()[:16], source=source)


def _checked(text: str, file: Path) -> str:
    secret = text.strip()
    if not _GENERATED.match(secret) or len(base64.b64decode(secret)) != 32:
        raise ConfigError(
            f"{file} is not a complete instance secret. Restore it from a backup, or set OPENMAIC_SECRET_KEY; keys "
            "saved under a lost secret have to be entered again.",
            source=str(file),
        )
    return secret


def _read_or_create(data_dir: Path) -> str:
    file = data_dir / INSTANCE_SECRET_FILE
    try:
        return _checked(file.read_text("utf-8"), file)
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the instance secret {file}: {getattr(e, 'strerror', None) or e}",
                          source=str(file)) from None
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = base64.b64encode(secrets.token_bytes(32)).decode()
    # Written and flushed under a private name (mode 0600 from the start), then published with an exclusive
    # link: the file is never seen half written, and of two processes starting together exactly one publishes
    # and the other reads what it published.
    temporary = data_dir / f".{INSTANCE_SECRET_FILE}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, f"{secret}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, file)
    except FileExistsError:
        return _checked(file.read_text("utf-8"), file)
    finally:
        temporary.unlink(missing_ok=True)
    log.warning("OPENMAIC_SECRET_KEY is not set; created %s. Keep it with the database: saved keys cannot be "
                "read without it. Set OPENMAIC_SECRET_KEY when running more than one instance.", file)
    return secret


def instance_key(secret: Secret | None, data_dir: str | os.PathLike[str]) -> InstanceKey:
    """The instance key: from ``secret`` (``OPENMAIC_SECRET_KEY``, as the configuration read it), else from the
    secret file in ``data_dir`` (created once)."""
    configured = secret.reveal().strip() if secret is not None else ""
    if configured:
        if len(configured) < MIN_SECRET_CHARS:
            raise ConfigError(f"OPENMAIC_SECRET_KEY: too short; use at least {MIN_SECRET_CHARS} random characters",
                              key="OPENMAIC_SECRET_KEY")
        return derive(configured, "OPENMAIC_SECRET_KEY")
    directory = Path(data_dir)
    return derive(_read_or_create(directory), str(directory / INSTANCE_SECRET_FILE))


@functools.cache
def process_instance_key(secret: Secret | None, data_dir: str) -> InstanceKey:
    """:func:`instance_key`, read (or created) once per process for each secret and directory."""
    return instance_key(secret, data_dir)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def seal_secret(plaintext: str, context: str, key: InstanceKey) -> dict[str, Any]:
    """``plaintext`` sealed for ``context`` (the associated data) under ``key``."""
    iv = secrets.token_bytes(12)
    sealed = AESGCM(key.key).encrypt(iv, plaintext.encode(), context.encode())
    return {"v": 1, "kid": key.kid, "iv": _b64(iv), "tag": _b64(sealed[-16:]), "ct": _b64(sealed[:-16])}


def is_sealed(value: object) -> bool:
    """Whether ``value`` has the sealed shape."""
    return (isinstance(value, dict) and value.get("v") == 1
            and all(isinstance(value.get(f), str) for f in ("kid", "iv", "tag", "ct")))  # fmt: skip


def open_secret(sealed: Mapping[str, Any], context: str, key: InstanceKey) -> str:
    """The plaintext of a sealed value; :class:`SecretKeyMismatch` or :class:`SecretCorrupt` otherwise."""
    if not is_sealed(sealed):
        raise SecretCorrupt()
    if sealed["kid"] != key.kid:
        raise SecretKeyMismatch()
    try:
        iv, tag, ct = (base64.b64decode(sealed[f], validate=True) for f in ("iv", "tag", "ct"))
        if len(iv) != 12 or len(tag) != 16:
            raise SecretCorrupt()
        return AESGCM(key.key).decrypt(iv, ct + tag, context.encode()).decode()
    except (InvalidTag, binascii.Error, UnicodeDecodeError, ValueError):
        raise SecretCorrupt() from None
