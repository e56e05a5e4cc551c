"""An Ed25519 public key as a `did:key` (W3C CCG did:key method, Multikey encoding).

The DID carries the public key itself: `did:key:z6Mk...` is `z` (multibase base58-btc) over
the multicodec prefix of Ed25519 public keys (0xed 0x01) and the key's 32 raw bytes, so a
verifier resolves it without any network. Each signing key has its own DID; a rotated key's
DID still resolves to the old public key, so credentials it signed keep verifying.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_ED25519_PUB = b"\xed\x01"  # multicodec ed25519-pub, varint-encoded


def base58btc(data: bytes) -> str:
    """Bitcoin's base58 (leading zero bytes as "1")."""
    number = int.from_bytes(data, "big")
    digits = []
    while number:
        number, rest = divmod(number, 58)
        digits.append(_ALPHABET[rest])
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(digits))


def from_base58btc(text: str) -> bytes:
    """The bytes of a base58-btc text; ValueError for a character outside the alphabet."""
    number = 0
    for char in text:
        index = _ALPHABET.find(char)
        if index < 0:
            raise ValueError(f"not a base58 character: {char!r}")
        number = number * 58 + index
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\0" * zeros + body


def multikey(public_key: Ed25519PublicKey) -> str:
    """The key's `publicKeyMultibase` (z6Mk...)."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "z" + base58btc(_ED25519_PUB + raw)


def did_of(public_key: Ed25519PublicKey) -> str:
    return f"did:key:{multikey(public_key)}"


def verification_method(public_key: Ed25519PublicKey) -> str:
    """The DID URL of the key inside its DID document (`did:key:z6Mk...#z6Mk...`)."""
    key = multikey(public_key)
    return f"did:key:{key}#{key}"


def public_key_of(did_url: str) -> Ed25519PublicKey:
    """The Ed25519 public key a did:key (or its verification method) names; ValueError for
    anything else."""
    if not did_url.startswith("did:key:z"):
        raise ValueError(f"not an Ed25519 did:key: {did_url!r}")
    key = did_url.removeprefix("did:key:").split("#", 1)[0]
    raw = from_base58btc(key[1:])
    if not raw.startswith(_ED25519_PUB) or len(raw) != 34:
        raise ValueError(f"not an Ed25519 did:key: {did_url!r}")
    return Ed25519PublicKey.from_public_bytes(raw[2:])
