"""Signatures: they verify, tampering breaks them, and the key is kept safely."""

from __future__ import annotations

import base64
import json
import stat
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from quiz.signing import (
    KEY_FILE,
    Signer,
    SigningKeyError,
    canonical_payload,
    create_key_file,
    load_public_key_pem,
    read_signer,
    verify_signature,
)


def load_signer(data_dir: Path, env_key: str | None = None) -> Signer:
    """The configured key, or a new key file when there is none."""
    return read_signer(data_dir, env_key) or create_key_file(data_dir)

FIELDS = {
    "id": "ABCDE-FGHJK-MNPQR-STVWX-5",
    "name": "Nguyễn Thị Minh Khai",
    "course": "Gradient Checkpointing Lab",
    "course_version": "1.0",
    "date": "2025-11-29",
    "score": 92,
    "key_id": "0123456789abcdef",
}


def test_canonical_payload_is_sorted_compact_utf8_and_only_the_signed_fields() -> None:
    payload = canonical_payload({**FIELDS, "show_score": True, "attempt_id": "x"})
    assert (
        payload
        == json.dumps(FIELDS, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    assert "Nguyễn".encode() in payload
    assert b"show_score" not in payload
    with pytest.raises(ValueError, match="score"):
        canonical_payload({k: v for k, v in FIELDS.items() if k != "score"})


def test_signature_verifies_and_tampering_fails(tmp_path: Path) -> None:
    signer = load_signer(tmp_path)
    signature = signer.sign(canonical_payload(FIELDS))
    assert signer.verify(canonical_payload(FIELDS), signature)
    for field, value in [
        ("name", "Nguyễn Thị Minh Khaj"),
        ("score", 100),
        ("date", "2025-11-30"),
        ("id", "ABCDE-FGHJK-MNPQR-STVWX-6"),
        ("course_version", "2.0"),
    ]:
        assert not signer.verify(canonical_payload({**FIELDS, field: value}), signature), field
    flipped = bytearray(base64.b64decode(signature))
    flipped[0] ^= 1
    assert not signer.verify(canonical_payload(FIELDS), base64.b64encode(flipped).decode())
    assert not signer.verify(canonical_payload(FIELDS), "not base64 at all!")


def test_anyone_can_verify_with_the_published_pem(tmp_path: Path) -> None:
    signer = load_signer(tmp_path)
    signature = signer.sign(canonical_payload(FIELDS))
    public = load_public_key_pem(signer.public_pem)
    assert verify_signature(public, canonical_payload(FIELDS), signature)
    other = load_signer(tmp_path / "elsewhere")
    assert not verify_signature(other.public_key, canonical_payload(FIELDS), signature)
    assert signer.key_id != other.key_id and len(signer.key_id) == 16


def test_the_generated_key_is_private_and_stable(tmp_path: Path) -> None:
    first = load_signer(tmp_path)
    mode = stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode)
    assert mode == 0o600
    assert load_signer(tmp_path).key_id == first.key_id
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # no temporary left behind


def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def load() -> None:
        barrier.wait()
        ids.append(create_key_file(tmp_path).key_id)

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 8 and len(set(ids)) == 1


def test_a_key_from_the_environment_wins(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    expected = load_signer(tmp_path, pem).key_id
    assert load_signer(tmp_path, seed.hex()).key_id == expected
    assert load_signer(tmp_path, base64.b64encode(seed).decode()).key_id == expected
    assert not (tmp_path / KEY_FILE).exists()  # nothing written when the key is given
    with pytest.raises(SigningKeyError):
        load_signer(tmp_path, "too short")


def test_reading_the_key_never_creates_one(tmp_path: Path) -> None:
    assert read_signer(tmp_path) is None
    assert not (tmp_path / KEY_FILE).exists()


def test_the_attempts_count_is_signed_when_present() -> None:
    assert b"attempts" not in canonical_payload(FIELDS)  # certificates from before it
    counted = canonical_payload({**FIELDS, "attempts": 3})
    assert b'"attempts":3' in counted and counted != canonical_payload({**FIELDS, "attempts": 4})
