"""Data Integrity proofs with the `eddsa-rdfc-2022` cryptosuite (W3C VC Data Integrity
EdDSA Cryptosuites v1.0, section 3.2), made with the Ed25519 key that signs certificates.

Signing (3.2.1-3.2.6): the proof's options (type, cryptosuite, created, verificationMethod,
proofPurpose) get the document's `@context`; both the document without its proof and those
options are canonicalized (RDFC-1.0, `quiz.linked_data.canonize`); the signed bytes are
SHA-256 of the canonical options followed by SHA-256 of the canonical document, and the
signature is written as `proofValue`, multibase base58-btc (`z...`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from quiz.did_key import base58btc, from_base58btc, public_key_of, verification_method
from quiz.linked_data import canonize

CRYPTOSUITE = "eddsa-rdfc-2022"


def _hash_data(document: dict[str, Any], options: dict[str, Any]) -> bytes:
    unsigned = {key: value for key, value in document.items() if key != "proof"}
    proof_config = {**options, "@context": document["@context"]}
    return (hashlib.sha256(canonize(proof_config).encode()).digest()
            + hashlib.sha256(canonize(unsigned).encode()).digest())


def sign(document: dict[str, Any], private_key: Ed25519PrivateKey, created: str,
         purpose: str = "assertionMethod") -> dict[str, Any]:
    """The document with its proof by `private_key` (its did:key names the key); `created`:
    an XML Schema dateTime such as 2026-12-03T10:00:00Z. The proof is written as a list of
    one (Data Integrity allows one proof or a set; 1EdTech's Open Badges schema wants a
    list)."""
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": CRYPTOSUITE,
        "created": created,
        "verificationMethod": verification_method(private_key.public_key()),
        "proofPurpose": purpose,
    }
    signature = private_key.sign(_hash_data(document, options))
    return {**document, "proof": [{**options, "proofValue": "z" + base58btc(signature)}]}


def verify(document: dict[str, Any]) -> bool:
    """True when the document's proof is a valid eddsa-rdfc-2022 signature by the did:key
    it names (the key is read from the DID itself: no network)."""
    proof = document.get("proof")
    if isinstance(proof, list) and len(proof) == 1:
        proof = proof[0]
    if not isinstance(proof, dict) or proof.get("cryptosuite") != CRYPTOSUITE:
        return False
    options = {key: value for key, value in proof.items() if key != "proofValue"}
    value = proof.get("proofValue")
    try:
        public_key = public_key_of(str(options.get("verificationMethod", "")))
        if not isinstance(value, str) or not value.startswith("z"):
            return False
        public_key.verify(from_base58btc(value[1:]), _hash_data(document, options))
    except (InvalidSignature, ValueError):
        return False
    return True
