"""Ed25519 signatures over a canonical JSON of a certificate's facts.

The key is given in `CERT_SIGNING_KEY` (a PKCS#8 PEM, or the 32-byte private seed in base64
or hex), or else kept in `<DATA_DIR>/signing_key.pem` (mode 0600). Reading a key never
creates one: `create_key_file` does, and `quiz.service` calls it only for a database without
certificates (or on the instructor's `python -m quiz new-key`).
The public key is published (verify page, `python -m quiz public-key`), so anyone can check a
certificate offline: rebuild `canonical_payload` from the printed facts and verify the
signature with the public key.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

KEY_FILE = "signing_key.pem"
# The one list of what a signature covers. Optional fields are signed when they have a value
# (certificates issued before a field existed keep verifying).
SIGNED_FIELDS = ("id", "name", "course", "course_version", "date", "score", "key_id")
OPTIONAL_SIGNED_FIELDS = ("attempts",)


class SigningKeyError(RuntimeError):
    """The configured signing key cannot be read."""


def canonical_payload(fields: Mapping[str, Any]) -> bytes:
    """The exact bytes that are signed: the signed fields only (an optional one when it is
    not None), keys sorted, no spaces, UTF-8 (names keep their own letters)."""
    missing = [name for name in SIGNED_FIELDS if name not in fields]
    if missing:
        raise ValueError(f"missing signed field(s): {', '.join(missing)}")
    subset = {name: fields[name] for name in SIGNED_FIELDS}
    subset.update(
        {name: fields[name] for name in OPTIONAL_SIGNED_FIELDS if fields.get(name) is not None}
    )
    return json.dumps(subset, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _raw_public(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id_of(public_key: Ed25519PublicKey) -> str:
    """A short name for a public key: the first 16 hex digits of SHA-256 of its raw bytes."""
    return hashlib.sha256(_raw_public(public_key)).hexdigest()[:16]


def public_key_pem(public_key: Ed25519PublicKey) -> str:
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def load_public_key_pem(pem: str) -> Ed25519PublicKey:
    key = serialization.load_pem_public_key(pem.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


def verify_signature(public_key: Ed25519PublicKey, payload: bytes, signature_b64: str) -> bool:
    """True when `signature_b64` is a valid signature of `payload` under `public_key`."""
    try:
        signature = base64.b64decode(signature_b64, validate=True)
        public_key.verify(signature, payload)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


@dataclass(frozen=True)
class Signer:
    private_key: Ed25519PrivateKey

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def key_id(self) -> str:
        return key_id_of(self.public_key)

    @property
    def public_pem(self) -> str:
        return public_key_pem(self.public_key)

    def sign(self, payload: bytes) -> str:
        return base64.b64encode(self.private_key.sign(payload)).decode()

    def verify(self, payload: bytes, signature_b64: str) -> bool:
        return verify_signature(self.public_key, payload, signature_b64)


def _private_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def parse_private_key(text: str) -> Ed25519PrivateKey:
    """A private key from a PKCS#8 PEM, or from the 32-byte seed in base64 or hex."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_private_key(text.encode(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError("CERT_SIGNING_KEY is a PEM key but not an Ed25519 one")
        return key
    for decode in (bytes.fromhex, base64.b64decode, base64.urlsafe_b64decode):
        try:
            seed = decode(text)
        except (ValueError, binascii.Error):
            continue
        if len(seed) == 32:
            return Ed25519PrivateKey.from_private_bytes(seed)
    raise SigningKeyError(
        "CERT_SIGNING_KEY must be an Ed25519 PKCS#8 PEM or a 32-byte seed in hex or base64"
    )


def _read_file(path: Path) -> Ed25519PrivateKey:
    """The key in `path`; SigningKeyError (one line: what is wrong, what to do) when the
    file cannot be read or holds no Ed25519 private key."""
    advice = ("Restore the key file from a backup, or start a new key on purpose with "
              "`python -m quiz new-key --replace` (earlier certificates keep verifying with "
              "their stored public keys).")
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as error:
        raise SigningKeyError(
            f"The signing key file {path} cannot be read ({error.strerror}). {advice}"
        ) from error
    except (ValueError, TypeError) as error:
        raise SigningKeyError(
            f"The signing key file {path} is damaged (not a readable PEM private key). "
            f"{advice}"
        ) from error
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path} does not hold an Ed25519 key. {advice}")
    return key


def create_key_file(data_dir: Path) -> Signer:
    """Create `<data_dir>/signing_key.pem` atomically with mode 0600 and return its signer
    (two processes creating at once agree on one key: the loser of the link() race reads
    the winner's file)."""
    path = data_dir / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(_private_pem(Ed25519PrivateKey.generate()))
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return Signer(_read_file(path))


def set_aside(path: Path) -> Path:
    """Rename a key file that cannot be read to `signing_key.damaged.<time>.pem` beside it
    (kept for a later look, never deleted); the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = path.with_name(f"{path.stem}.damaged.{stamp}.{os.urandom(2).hex()}{path.suffix}")
    path.rename(target)
    return target


def key_source(data_dir: Path, env_key: str | None = None) -> str | None:
    """Where the signing key is configured (`CERT_SIGNING_KEY` when `env_key` is given,
    else the key file's path when a file is there, readable or not); None when there is
    neither. When read_signer fails or returns None, this tells a damaged key from a
    missing one."""
    if env_key:
        return "CERT_SIGNING_KEY"
    path = data_dir / KEY_FILE
    return str(path) if os.path.lexists(path) else None


def read_signer(data_dir: Path, env_key: str | None = None) -> Signer | None:
    """The configured signer: from `env_key` (CERT_SIGNING_KEY) when given, else the key
    file; None when there is neither (nothing is created)."""
    if env_key:
        try:
            return Signer(parse_private_key(env_key))
        except ValueError as error:  # a PEM that cryptography cannot read
            raise SigningKeyError(
                "CERT_SIGNING_KEY cannot be read as an Ed25519 PKCS#8 PEM or a 32-byte seed: "
                "set it to the key from your backup."
            ) from error
    path = data_dir / KEY_FILE
    return Signer(_read_file(path)) if path.exists() else None
