"""Verify a certificate: reached as /verify?id=... (the QR code's link) or by typing an ID.
Every outcome is drawn with the same layout; the lookup itself does the same work found or
not (quiz.certificates.CertificateStore.verify)."""

from __future__ import annotations

import logging

import streamlit as st

from i18n import DEFAULT, gettext
from quiz import config
from quiz.certificate_records import Status, Verification, long_date
from quiz.certificates import StorageError
from quiz.did_key import did_of
from quiz.ids import MAX_LINK_LENGTH, IdError, parse_id
from quiz.markdown import escape_markdown
from quiz.service import QuizService, shared_service
from quiz.signing import OPTIONAL_SIGNED_FIELDS, SIGNED_FIELDS, load_public_key_pem
from storage.database import StorageBusy, StorageUnavailable, shared_wait
from ui.badge_download import badge_button
from ui.i18n import current_language, enter_hint, fmt_percent, pt, t

PLACEHOLDER = "XXXXX-XXXXX-XXXXX-XXXXX-C"
LOG = logging.getLogger(__name__)


def offline_check(code: str = DEFAULT) -> str:
    """Python that checks a certificate without this site, from the one list of signed
    fields (quiz.signing), commented in language `code` (the code is the same in every
    language)."""
    fields = ", ".join(f'"{name}": ...' for name in SIGNED_FIELDS)
    optional = ", ".join(f'"{name}"' for name in OPTIONAL_SIGNED_FIELDS)
    shown = gettext(code, "as shown for the certificate")
    add = gettext(code, "add {fields} when the verify page shows a value for it", fields=optional)
    key = gettext(code, "the key with its key_id")
    forged = gettext(code, "raises InvalidSignature if forged")
    return f"""from cryptography.hazmat.primitives.serialization import load_pem_public_key
import base64, json

fields = {{{fields}}}  # {shown}
# {add}
payload = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                     ensure_ascii=False).encode()
key = load_pem_public_key(open("public_key.pem", "rb").read())  # {key}
key.verify(base64.b64decode(signature), payload)  # {forged}"""


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
            t("**VALID**: issued by {course}; the Ed25519 signature is checked and correct.",
              course=config.COURSE_NAME),
            icon=":material/verified:",
        )
    elif result.status is Status.REVOKED and certificate is not None:
        reason = certificate.revoke_reason or t("none given")
        st.error(
            t("**REVOKED** on {date}. Reason: {reason}",
              date=long_date(certificate.revoked_at or certificate.date, current_language()),
              reason=escape_markdown(reason)),
            icon=":material/block:",
        )
    elif result.status is Status.NOT_FOUND:
        st.warning(
            t("**NOT FOUND**: no certificate has this ID. Compare it symbol by symbol with "
              "the one printed on the certificate."),
            icon=":material/search_off:",
        )
    elif result.status is Status.UNKNOWN_KEY and certificate is not None:
        st.error(
            t("**UNKNOWN SIGNING KEY**: this certificate was signed by key `{key}`, whose "
              "public key this site does not have, so it cannot be checked here. Please tell "
              "the course's operator.", key=certificate.key_id),
            icon=":material/key_off:",
        )
    elif result.status is Status.TYPO:
        st.warning(
            t("**TYPO IN THE ID**: this is not a valid certificate ID: {problem}. Nothing was "
              "looked up. Check each symbol against the certificate.",
              problem=t(result.problem.value) if result.problem else "?"),
            icon=":material/spellcheck:",
        )
    else:
        st.error(
            t("**SIGNATURE DOES NOT MATCH**: the stored record and its signature disagree, so "
              "it cannot be trusted."),
            icon=":material/gpp_bad:",
        )


def key_label(key_id: str, current: bool) -> str:
    return (t("{key} (current key)", key=key_id) if current
            else t("{key} (earlier key)", key=key_id))


def details(result: Verification) -> None:
    """The same rows for every outcome, worded in the viewer's language whatever language
    the certificate was issued in; a dash where there is nothing to show."""
    certificate = result.certificate if result.status in (Status.VALID, Status.REVOKED) else None
    dash = "—"
    name = course = issued = score = attempts = key = signature = dash
    if certificate is not None:
        name, signature = certificate.name, certificate.signature
        course = t("{course} (version {version})", course=certificate.course,
                   version=certificate.course_version)
        issued = long_date(certificate.date, current_language())
        score = (fmt_percent(certificate.score / 100) if certificate.show_score
                 else t("not shown by the holder"))
        # The number of attempts is the learner's to show, with the score (one consent)
        attempts = (t("not recorded") if not certificate.attempts
                    else str(certificate.attempts) if certificate.show_score
                    else t("not shown by the holder"))
        key = key_label(certificate.key_id, result.key_current)
    rows = [
        (pt("certificate field", "Name"), name),
        (pt("certificate field", "Course"), course),
        (pt("certificate field", "Issued"), issued),
        (pt("certificate field", "Score"), score),
        (pt("certificate field", "Attempts"), attempts),
        (t("Certificate ID"), result.id_text or dash),
        (t("Signing key"), key),
        (pt("certificate field", "Signature"), signature),
    ]
    for label, value in rows:
        left, right = st.columns([1, 4])
        left.markdown(f"**{label}**")
        right.text(value)


def did_for(pem: str) -> str:
    """The did:key that names a public key as the issuer of Open Badges."""
    return did_of(load_public_key_pem(pem))


def issuer(service: QuizService) -> None:
    """The course's did:key, which its Open Badges name as their issuer: a verifier that
    compares a badge's issuer with it tells a badge signed by another key apart."""
    if service.signer is None:  # the key cannot be read here: the stored keys are below
        return
    st.caption(t("This course signs its Open Badges as `{did}`. A badge that names another "
                 "issuer was not signed by its current key; every key the course has used is "
                 "listed below.", did=did_of(service.signer.public_key)))


def render() -> None:
    st.title(t("Verify a certificate"))
    try:
        with shared_wait():  # a locked database: "try again" after one wait, not several
            show_verify()
    except (StorageError, StorageUnavailable) as problem:  # the operator must act (or wait)
        LOG.error("%s", problem)
        if isinstance(problem, StorageBusy):
            st.warning(t("The server is busy saving other learners' work. Please try again "
                         "in a moment: nothing you did was lost."),
                       icon=":material/hourglass_top:")
        else:
            st.error(t("Certificates cannot be checked right now: the server's certificate "
                       "storage needs the operator's attention, and they have been told in "
                       "the server log. Please try again later."),
                     icon=":material/database_off:")


def show_verify() -> None:
    service = shared_service(create_key=False, strict=False)  # public keys suffice here
    from_link = st.query_params.get("id", "")
    with st.form("verify"):
        typed = st.text_input(
            t("Certificate ID"),
            value=from_link[:MAX_LINK_LENGTH],
            # No max_chars: the browser would silently drop a longer paste (a whole link).
            placeholder=PLACEHOLDER,
            help=t("Case, spaces and dashes do not matter; O reads as 0, I and L as 1. A "
                   "pasted verify link works too."),
            key="verify-id",
        )
        enter_hint()
        submitted = st.form_submit_button(t("Verify"), type="primary")
    target = typed if submitted else from_link
    if submitted:
        st.query_params["id"] = for_the_url(typed)
    if target.strip():
        result = service.verify(target)
        headline(result)
        details(result)
        badge_button(st, service, result.certificate if result.valid else None)
    issuer(service)
    with st.expander(t("Check a certificate offline")):
        signed = ", ".join(f"`{name}`" for name in SIGNED_FIELDS)
        optional = ", ".join(f"`{name}`" for name in OPTIONAL_SIGNED_FIELDS)
        st.markdown(t(
            "Certificates are signed with Ed25519. The signature covers a canonical JSON of "
            "{signed} (and {optional} when shown). With the public key whose id the "
            "certificate names (below; also printed by `python -m quiz public-key`) anyone "
            "can check a certificate without this site:", signed=signed, optional=optional))
        for number, (key_id, pem) in enumerate(service.public_keys().items()):
            st.caption(key_label(f"`{key_id}`", number == 0))
            st.code(pem, language=None)
            st.caption(t("Its Open Badges issuer (did:key): `{did}`", did=did_for(pem)))
        st.code(offline_check(current_language()), language="python")
