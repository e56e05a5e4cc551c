"""Verify a certificate: reached as /verify?id=... (the QR code's link) or by typing an ID.
Every outcome is drawn with the same layout; the lookup itself does the same work found or
not (quiz.certificates.CertificateStore.verify)."""

from __future__ import annotations

import streamlit as st

from quiz import config
from quiz.certificates import Status, Verification
from quiz.ids import MAX_LINK_LENGTH
from quiz.markdown import escape_markdown
from quiz.service import open_service

PLACEHOLDER = "XXXXX-XXXXX-XXXXX-XXXXX-C"
OFFLINE_CHECK = """from cryptography.hazmat.primitives.serialization import load_pem_public_key
import base64, json

fields = {"id": ..., "name": ..., "course": ..., "course_version": ...,
          "date": ..., "score": ..., "key_id": ...}       # as printed on the certificate
payload = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                     ensure_ascii=False).encode()
key = load_pem_public_key(open("public_key.pem", "rb").read())
key.verify(base64.b64decode(signature), payload)     # raises InvalidSignature if forged"""


def headline(result: Verification) -> None:
    certificate = result.certificate
    if result.status is Status.VALID:
        st.success(
            f"**VALID**: issued by {config.COURSE_NAME}; the Ed25519 signature is checked "
            "and correct.",
            icon=":material/verified:",
        )
    elif result.status is Status.REVOKED and certificate is not None:
        st.error(
            f"**REVOKED** on {certificate.revoked_at}. Reason: "
            f"{escape_markdown(certificate.revoke_reason or 'none given')}",
            icon=":material/block:",
        )
    elif result.status is Status.NOT_FOUND:
        st.warning(
            "**NOT FOUND**: no certificate has this ID. Compare it symbol by symbol with the "
            "one printed on the certificate.",
            icon=":material/search_off:",
        )
    elif result.status is Status.TYPO:
        st.warning(
            f"**TYPO IN THE ID**: this is not a valid certificate ID: {result.problem}. "
            "Nothing was looked up. Check each symbol against the certificate.",
            icon=":material/spellcheck:",
        )
    else:
        st.error(
            "**SIGNATURE DOES NOT MATCH**: the stored record and its signature disagree, so it "
            "cannot be trusted.",
            icon=":material/gpp_bad:",
        )


def details(result: Verification) -> None:
    """The same rows for every outcome; a dash where there is nothing to show."""
    certificate = result.certificate
    dash = "—"
    show = certificate is not None and result.status is not Status.BAD_SIGNATURE
    score = dash
    if show and certificate is not None:
        score = f"{certificate.score}%" if certificate.show_score else "not shown by the holder"
    rows = [
        ("Name", certificate.name if show and certificate else dash),
        (
            "Course",
            f"{certificate.course} (version {certificate.course_version})"
            if show and certificate
            else dash,
        ),
        ("Issued", certificate.date if show and certificate else dash),
        ("Score", score),
        ("Certificate ID", result.id_text or dash),
        ("Signature", certificate.signature if show and certificate else dash),
    ]
    for label, value in rows:
        left, right = st.columns([1, 4])
        left.markdown(f"**{label}**")
        right.text(value)


def render() -> None:
    st.title("Verify a certificate")
    service = open_service()
    from_link = st.query_params.get("id", "")
    with st.form("verify"):
        typed = st.text_input(
            "Certificate ID",
            value=from_link[:MAX_LINK_LENGTH],
            # No max_chars: the browser would silently drop a longer paste (a whole link).
            placeholder=PLACEHOLDER,
            help="Case, spaces and dashes do not matter; O reads as 0, I and L as 1. "
                 "A pasted verify link works too.",
        )
        submitted = st.form_submit_button("Verify", type="primary")
    target = typed if submitted else from_link
    if submitted:
        st.query_params["id"] = typed
    if target.strip():
        result = service.verify(target)
        headline(result)
        details(result)
    with st.expander("Check a certificate offline"):
        st.markdown(
            "Certificates are signed with Ed25519. The signature covers a canonical JSON of "
            "the ID, name, course, course version, date, score and key id. With the public key "
            f"below (key id `{service.key_id}`, also printed by `python -m quiz public-key`) "
            "anyone can check a certificate without this site:"
        )
        st.code(service.public_key_pem, language=None)
        st.code(OFFLINE_CHECK, language="python")
