"""Verify a certificate: reached as /verify?id=... (the QR code's link) or by typing an ID.
Every outcome is drawn with the same layout; the lookup itself does the same work found or
not (quiz.certificates.CertificateStore.verify)."""

from __future__ import annotations

import streamlit as st

from quiz import config
from quiz.certificates import Status, Verification
from quiz.ids import MAX_LINK_LENGTH, IdError, parse_id
from quiz.markdown import escape_markdown
from quiz.service import open_service
from quiz.signing import OPTIONAL_SIGNED_FIELDS, SIGNED_FIELDS

PLACEHOLDER = "XXXXX-XXXXX-XXXXX-XXXXX-C"


def offline_check() -> str:
    """Python that checks a certificate without this site, from the one list of signed
    fields (quiz.signing)."""
    fields = ", ".join(f'"{name}": ...' for name in SIGNED_FIELDS)
    optional = ", ".join(f'"{name}"' for name in OPTIONAL_SIGNED_FIELDS)
    return f"""from cryptography.hazmat.primitives.serialization import load_pem_public_key
import base64, json

fields = {{{fields}}}  # as shown for the certificate
# add {optional} when the verify page shows a value for it
payload = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                     ensure_ascii=False).encode()
key = load_pem_public_key(open("public_key.pem", "rb").read())  # the key with its key_id
key.verify(base64.b64decode(signature), payload)  # raises InvalidSignature if forged"""


def for_the_url(typed: str) -> str:
    """What goes into ?id=: the canonical ID when the text is one, else the text cut to the
    longest input that can be valid (a pasted link), never a megabyte of typing."""
    try:
        return parse_id(typed).text
    except IdError:
        return typed[:MAX_LINK_LENGTH]


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
    elif result.status is Status.UNKNOWN_KEY and certificate is not None:
        st.error(
            f"**UNKNOWN SIGNING KEY**: this certificate was signed by key `{certificate.key_id}`,"
            " whose public key this site does not have, so it cannot be checked here. Please "
            "tell the course's operator.",
            icon=":material/key_off:",
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
    show = certificate is not None and result.status in (Status.VALID, Status.REVOKED)
    score = attempts = key = dash
    if show and certificate is not None:
        score = f"{certificate.score}%" if certificate.show_score else "not shown by the holder"
        attempts = str(certificate.attempts) if certificate.attempts else "not recorded"
        key = f"{certificate.key_id} ({'current' if result.key_current else 'earlier'} key)"
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
        ("Attempts", attempts),
        ("Certificate ID", result.id_text or dash),
        ("Signing key", key),
        ("Signature", certificate.signature if show and certificate else dash),
    ]
    for label, value in rows:
        left, right = st.columns([1, 4])
        left.markdown(f"**{label}**")
        right.text(value)


def render() -> None:
    st.title("Verify a certificate")
    service = open_service(create_key=False, strict=False)  # public keys suffice here
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
        st.query_params["id"] = for_the_url(typed)
    if target.strip():
        result = service.verify(target)
        headline(result)
        details(result)
    with st.expander("Check a certificate offline"):
        signed = ", ".join(f"`{name}`" for name in SIGNED_FIELDS)
        optional = ", ".join(f"`{name}`" for name in OPTIONAL_SIGNED_FIELDS)
        st.markdown(
            "Certificates are signed with Ed25519. The signature covers a canonical JSON of "
            f"{signed} (and {optional} when shown). With the public key whose id the "
            "certificate names (below; also printed by `python -m quiz public-key`) anyone "
            "can check a certificate without this site:"
        )
        for number, (key_id, pem) in enumerate(service.public_keys().items()):
            st.caption(f"Key `{key_id}` ({'current' if number == 0 else 'earlier'} key)")
            st.code(pem, language=None)
        st.code(offline_check(), language="python")
