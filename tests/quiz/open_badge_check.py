"""The tests' independent verifier of Open Badges credentials: tests/quiz/obverify/verify.mjs
under Node (Digital Bazaar's @digitalbazaar/vc with the eddsa-rdfc-2022 cryptosuite, did:key,
the Bitstring Status List check, and 1EdTech's OB 3.0 JSON schema through Ajv), installed by
`make test-setup` (npm ci). Nothing is fetched: the status lists are handed over as the
files a server publishes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

FOLDER = Path(__file__).with_name("obverify")
SCHEMA = FOLDER / "ob_v3p0_achievementcredential_schema.json"


def published_lists(folder: Path, credentials: list[dict[str, Any]]) -> dict[str, Any]:
    """The status list each credential points to, read from the folder a server serves
    them from (`<folder>/<key id>.json` is `<address>/app/static/status/<key id>.json`)."""
    lists = {}
    for credential in credentials:
        url = credential["credentialStatus"]["statusListCredential"]
        path = folder / url.rsplit("/", 1)[1]
        if path.exists():
            lists[url] = json.loads(path.read_text(encoding="utf-8"))
    return lists


def independent_verify(credentials: list[dict[str, Any]],
                       status_lists: dict[str, Any]) -> list[dict[str, Any]]:
    """One result per credential: verified, error, statusChecked, revoked, schemaValid,
    schemaErrors, and listAtItsId: whether the status list given for the credential's
    status address names that address as its own `id` (what docs/OPEN_BADGES.md asks a
    verifier to check beside Digital Bazaar's verifier, which does not)."""
    node = shutil.which("node")
    if node is None or not (FOLDER / "node_modules").is_dir():
        pytest.fail("the independent verifier is not installed: run `make test-setup` "
                    "(Node.js and `npm ci` in tests/quiz/obverify)")
    request = {"credentials": credentials, "statusLists": status_lists, "schema": str(SCHEMA)}
    done = subprocess.run([node, str(FOLDER / "verify.mjs")], input=json.dumps(request),
                          capture_output=True, text=True, timeout=300, cwd=FOLDER)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert len(results) == len(credentials)
    for credential, result in zip(credentials, results, strict=True):
        url = credential.get("credentialStatus", {}).get("statusListCredential")
        served = status_lists.get(url) if url else None
        result["listAtItsId"] = served is not None and served.get("id") == url
    return results
