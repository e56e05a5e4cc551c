"""The quiz: one question at a time with instant feedback, then the score and, on a pass,
the certificate. The attempt lives on the server (quiz.service); this page only draws it.
The attempt id travels in st.session_state, in the URL (?attempt=...) and in the learner's
progress on the server, so a reload or a second tab resumes it. Attempts and the cooldown
after a failed one belong to the learner (ui.learner), not to the tab. Nothing else in the
URL is read (a ?score=100 changes nothing)."""
import contextlib
import logging
from urllib.parse import urlsplit

import streamlit as st

from i18n import N_
from lessons.catalog import LESSONS, lesson
from quiz import config
from quiz.attempts import (
    AnswerOutOfTurn,
    Attempt,
    AttemptExpired,
    CooldownActive,
    TooManyStarts,
)
from quiz.bank import BankError
from quiz.certificate_records import Certificate
from quiz.certificates import StorageError
from quiz.grading import Feedback
from quiz.ids import file_name_part
from quiz.markdown import escape_markdown
from quiz.names import MAX_NAME_LENGTH, NameError_, NameProblem, normalise_name
from quiz.service import QuizService, certificate_pdf, certificate_png, shared_service
from storage.database import StorageBusy, StorageUnavailable, shared_wait
from ui.badge_download import badge_button
from ui.i18n import current_language, enter_hint, fmt_percent, t, tn, with_lang
from ui.learner import client_address, learner_id
from ui.navigation import page_link
from ui.progress import store as progress_store

ATTEMPT_KEY = "quiz_attempt_id"
_NOTICE = "quiz_notice"  # what a button's callback has to tell the next run
_CONFIRM = "quiz_confirm_name"  # the name as it will be printed, waiting for the learner's OK
_WAIT_FROM = "quiz_wait_from"  # when the issuing click began waiting for the database
_SHOWN_IN = "quiz_shown_language"  # the language of the question's last run
OPEN_ATTEMPT = "quiz:attempt"  # the learner's open attempt, in their server-side progress
LOG = logging.getLogger(__name__)

# Why a name was refused (quiz.names), worded for the learner; `params` fill the blanks.
NAME_PROBLEMS: dict[NameProblem, str] = {
    NameProblem.EMPTY: N_("Please type the name to print on the certificate."),
    NameProblem.TOO_LONG: N_("A name has at most {limit} characters; this one has {length}."),
    NameProblem.BIDI_CONTROL: N_(
        "The name contains an invisible text-direction control ({character}); please type it "
        "without one."),
    NameProblem.CONTROL: N_(
        "The name contains a control or unassigned character ({character}); please type it "
        "without one."),
    NameProblem.NO_VISIBLE_LETTER: N_(
        "The name has no visible letter (only invisible or combining characters, "
        "punctuation or symbols); please type the name to print."),
    NameProblem.UNDRAWABLE: N_(
        "The certificate fonts (DejaVu Sans and a CJK font) cannot draw {characters}. They "
        "cover Latin (Vietnamese and German included), Greek, Cyrillic, Arabic, Hebrew, "
        "Chinese, Japanese and Korean, but not colour emoji. Please write the name with "
        "letters they can draw, for example in a Latin transcription."),
    NameProblem.UNDRAWABLE_NO_CJK: N_(
        "The certificate font (DejaVu Sans) cannot draw {characters}. It covers Latin "
        "(Vietnamese and German included), Greek, Cyrillic, Arabic and Hebrew, but not "
        "Chinese, Japanese or Korean characters or colour emoji. Please write the name with "
        "letters it can draw, for example in a Latin transcription."),
}


def name_problem(error: NameError_) -> str:
    """Why a name was refused, in the session's language."""
    params = dict(error.params)
    more = params.pop("more", 0)
    if more:
        params["characters"] = tn("{characters} and {count} more character",
                                  "{characters} and {count} more characters", more,
                                  characters=params["characters"])
    return t(NAME_PROBLEMS[error.problem], **params)


def storage_message(problem: Exception) -> None:
    """What a learner sees when the database or the key cannot be used: a short wait for a
    lock, else that the operator must act (the details go to the server log, once per
    problem, for the operator)."""
    LOG.error("%s", problem)
    if isinstance(problem, StorageBusy):
        st.warning(t("The server is busy saving other learners' work. Please try again in a "
                     "moment: nothing you did was lost."), icon=":material/hourglass_top:")
        return
    st.error(
        t("Certificates cannot be issued or checked right now: the server's certificate "
          "storage needs the operator's attention, and they have been told in the server "
          "log. No certificate was issued; please try again later."),
        icon=":material/database_off:",
    )


def reached_base(url: str | None, base_path: str, port: int) -> str:
    """The app's root from the page URL the browser reports (scheme, host, port and the
    server's base path); without one, localhost on the port the server runs on."""
    if url:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.netloc:
            base = base_path.strip("/")
            return f"{parts.scheme}://{parts.netloc}" + (f"/{base}" if base else "")
    return f"http://localhost:{port}"


def app_base_url() -> str:
    """The address the learner reached the app by, for the certificate's verify link when
    APP_BASE_URL is not set (quiz.config.base_url): printed on the PDF, never signed (the
    browser reports it, so a learner can choose it)."""
    return reached_base(st.context.url, str(st.get_option("server.baseUrlPath") or ""),
                        int(st.get_option("server.port")))


def _view_key(attempt_id: str) -> str:
    return f"quiz_view_{attempt_id}"


def remember(attempt_id: str | None) -> None:
    """Keep the attempt id in the session and the URL (or forget it)."""
    if attempt_id:
        if st.session_state.get(ATTEMPT_KEY) != attempt_id:
            progress_store().record(learner_id(), OPEN_ATTEMPT, attempt_id)
        st.session_state[ATTEMPT_KEY] = attempt_id
        st.query_params["attempt"] = attempt_id
    else:
        st.session_state.pop(ATTEMPT_KEY, None)
        st.query_params.pop("attempt", None)
        progress_store().forget(learner_id(), OPEN_ATTEMPT)


def start(service: QuizService, previous_id: str | None = None) -> None:
    """A button's callback: a new attempt (or the cooldown's notice, shown by the run).

    The buttons act in callbacks, before the run draws the page, rather than with
    st.rerun(): a rerun stops the script before the router draws the sidebar, and the
    browser then forgets the language picker's value (the next click switched the page
    back to English)."""
    try:
        attempt = service.start_attempt(previous_id, learner_id(), client_address())
    except TooManyStarts as wait:
        st.session_state[_NOTICE] = ("starts", wait.seconds_left)
        return
    except CooldownActive as wait:
        st.session_state[_NOTICE] = ("cooldown", wait.seconds_left)
        return
    except StorageUnavailable as problem:
        st.session_state[_NOTICE] = ("storage", problem)
        return
    remember(attempt.id)


def show_notice() -> None:
    """What the last button's callback had to say."""
    notice = st.session_state.pop(_NOTICE, None)
    if notice is None:
        return
    kind, value = notice
    if kind == "cooldown":
        st.warning(t("Take a short break: a new attempt can start in {seconds} s.",
                     seconds=value))
    elif kind == "starts":
        st.warning(t("Too many quiz attempts were started from here without being finished. "
                     "Finish one, or a new attempt can start in {seconds} s.", seconds=value))
    elif kind == "answering-cooldown":
        st.warning(t("An attempt failed after this one was started: take a short break, this "
                     "attempt can be answered again in {seconds} s.", seconds=value))
    elif kind == "pick":
        st.warning(t("Pick an answer first."))
    elif kind == "forged":
        st.warning(t("That answer is not one of the options shown; please pick one of them."))
    elif kind == "name":
        st.error(value)
    elif kind == "storage":
        storage_message(value)


def lesson_link(topic: str) -> None:
    """A link to the lesson that teaches `topic`, inside the app (the session and its
    attempt stay; the sidebar's Quiz entry leads back)."""
    page_link(topic, label=t("Read the lesson: {title}", title=t(lesson(topic).title)),
              icon=":material/school:")


def show_intro(service: QuizService) -> None:
    st.markdown(tn(
        "{count} question drawn from all {lessons} lessons, one at a time.",
        "{count} questions drawn from all {lessons} lessons, one at a time.",
        service.questions_per_attempt, lessons=len(LESSONS),
    ) + " " + t(
        "Each answer is locked when you check it, and you see at once whether it was right "
        "and why. Pass with {mark:.0%} or more to earn a certificate that anyone can verify.",
        mark=config.PASS_MARK,
    ))
    wait = service.wait_left(learner_id(), client_address())
    if wait:
        st.info(t("After the last attempt, a new one can start in {seconds} s.", seconds=wait))
    st.button(t("Start the quiz"), type="primary", key="quiz-start", on_click=start,
              args=(service,))
    show_notice()


def keep_picks_across_languages(keys: list[str]) -> None:
    """A pick the learner has not checked yet survives a language switch: the server keeps
    it (the widgets' keys do not depend on their words), but the browser redraws options
    whose words changed as unpicked, so the run after a switch sends the picks back."""
    code = current_language()
    if st.session_state.get(_SHOWN_IN) not in (None, code):
        for key in keys:
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]
    st.session_state[_SHOWN_IN] = code


def question_of(position: int, total: int) -> str:
    return t("Question {number} of {total}", number=position + 1, total=total)


def show_question(service: QuizService, attempt: Attempt, position: int) -> None:
    drawn = attempt.questions[position]
    total = len(attempt.questions)
    st.progress(position / total, text=question_of(position, total))
    st.subheader(drawn.question.prompt)
    options = drawn.options
    # No st.form: a form keeps a pick only in the browser, and a language switch (which
    # rewords the options) would drop it. These widgets live in session_state under keys
    # that do not depend on their words, so a pick survives the switch.
    keys = ([f"{attempt.id}-q{position}-o{i}" for i in range(len(options))]
            if drawn.question.multiple else [f"{attempt.id}-q{position}"])
    keep_picks_across_languages(keys)
    with st.container(border=True, key="quiz-question"):
        if drawn.question.multiple:
            st.caption(t("Select all that apply."))
            for option, key in zip(options, keys, strict=True):
                st.checkbox(escape_markdown(option), key=key)
        else:
            st.radio(
                t("Your answer"),
                range(len(options)),
                index=None,
                format_func=lambda i: escape_markdown(options[i]),
                label_visibility="collapsed",
                key=keys[0],
            )
        st.button(t("Check answer"), type="primary", key=f"check-{position}",
                  on_click=check,
                  args=(service, attempt.id, position, keys, drawn.question.multiple))
    show_notice()


def check(service: QuizService, attempt_id: str, position: int, keys: list[str],
          multiple: bool) -> None:
    """The Check button's callback: lock the answer picked in the widgets under `keys`
    (one checkbox per option, or one radio), or ask for one."""
    if not multiple:
        pick = st.session_state.get(keys[0])
        chosen = [] if pick is None else [pick]
    else:
        chosen = [i for i, key in enumerate(keys) if st.session_state.get(key)]
    if not chosen:
        st.session_state[_NOTICE] = ("pick", None)
        return
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in chosen):
        # A value the page never offered (a forged message): refuse it, no traceback.
        LOG.info("refused an answer that is not an option of the question: %r", chosen[:3])
        st.session_state[_NOTICE] = ("forged", None)
        return
    try:
        with contextlib.suppress(AnswerOutOfTurn):  # another tab moved on: show where it is
            service.answer(attempt_id, position, chosen)
    except CooldownActive as wait:
        st.session_state[_NOTICE] = ("answering-cooldown", wait.seconds_left)
        return
    except ValueError:  # an option number the question does not have
        LOG.info("refused an answer that is not an option of the question: %r", chosen[:3])
        st.session_state[_NOTICE] = ("forged", None)
        return
    except StorageUnavailable as problem:
        st.session_state[_NOTICE] = ("storage", problem)
        return
    st.session_state[_view_key(attempt_id)] = position


def show_feedback(attempt: Attempt, position: int, feedback: Feedback) -> None:
    drawn = attempt.questions[position]
    total = len(attempt.questions)
    st.progress((position + 1) / total, text=question_of(position, total))
    st.subheader(drawn.question.prompt)
    if feedback.is_correct:
        st.success(t("Correct."), icon=":material/check_circle:")
    else:
        st.error(t("Not quite."), icon=":material/cancel:")
    right_answer, wrong, your_answer = t("right answer"), t("wrong"), t("your answer")
    for i, option in enumerate(drawn.options):
        right = i in feedback.correct
        mark = (f":green[:material/check_circle: **{right_answer}**]" if right
                else f":red[{wrong}]")
        yours = f" · *{your_answer}*" if i in feedback.chosen else ""
        st.markdown(f"**{escape_markdown(option)}** ({mark}{yours})")
        st.caption(escape_markdown(feedback.explanations[i]))
    lesson_link(feedback.topic)
    last = position + 1 == total
    label = t("See my score") if last else t("Next question")
    st.button(label, type="primary", key=f"next-{position}", on_click=st.session_state.pop,
              args=(_view_key(attempt.id), None))


def show_certificate(service: QuizService, certificate: Certificate) -> None:
    st.success(t("Your certificate is ready."), icon=":material/workspace_premium:")
    st.markdown(t("**Name:** {name}", name=escape_markdown(certificate.name)))
    if certificate.attempts:
        st.caption(t("Passed at attempt {number} (printed on the verify page).",
                     number=certificate.attempts))
    st.markdown(t("**Certificate ID** (anyone can check it on the verify page):"))
    st.code(certificate.id, language=None)
    with st.spinner(t("Drawing the certificate…")):
        base = config.base_url(app_base_url())
        pdf = _cached_pdf(certificate, base)
        png = _cached_png(certificate, base)
    left, middle, right = st.columns(3)
    left.download_button(
        t("Download the PDF"),
        data=pdf,
        file_name=f"certificate-{file_name_part(certificate.id)}.pdf",
        mime="application/pdf",
        type="primary",
        icon=":material/download:",
    )
    badge_button(middle, service, certificate)
    with right:  # inside the app, so it works whatever APP_BASE_URL the PDF link carries
        page_link("verify", label=t("Open the verify link"), icon=":material/verified:",
                  query_params=with_lang({"id": certificate.id}))
    if certificate.lang != current_language():
        st.caption(t("The certificate is in the language you took the quiz in."))
    st.image(png, caption=t("Preview of your certificate"))


@st.cache_data(max_entries=64, show_spinner=False)
def _cached_pdf(certificate: Certificate, base_url: str) -> bytes:
    return certificate_pdf(certificate, base_url)


@st.cache_data(max_entries=64, show_spinner=False)
def _cached_png(certificate: Certificate, base_url: str) -> bytes:
    return certificate_png(certificate, base_url)


def show_issue_form(service: QuizService, attempt: Attempt) -> None:
    """Two steps: the name (Enter or the button shows it as it will be printed), then the
    learner confirms it with the score choice in view. Nothing is issued by Enter."""
    st.markdown("### " + t("Your certificate"))
    confirming = st.session_state.get(_CONFIRM)
    if confirming is not None and confirming[0] == attempt.id:
        show_confirmation(service, attempt, confirming[1])
        return
    with st.form("issue"):
        st.text_input(
            t("Name to print on the certificate"),
            # No max_chars: the browser silently drops a paste longer than max_chars, and
            # the learner was then told to "type the name". quiz.names says how long it is.
            help=t("Up to {limit} characters, in any script the certificate font can draw.",
                   limit=MAX_NAME_LENGTH),
            key="quiz-name",
        )
        enter_hint()
        st.checkbox(t("Show my score and how many attempts I took on the public verify page"),
                    key="quiz-show-score")
        st.form_submit_button(t("Check the name"), type="primary", on_click=preview_name,
                              args=(attempt.id,))
    show_notice()


def preview_name(attempt_id: str) -> None:
    """The name form's callback (Enter, or its button): the name as it will be printed, or
    why it cannot be."""
    try:
        name = normalise_name(st.session_state.get("quiz-name", ""))
    except NameError_ as problem:
        st.session_state[_NOTICE] = ("name", name_problem(problem))
        return
    st.session_state[_CONFIRM] = (attempt_id, name)


def show_confirmation(service: QuizService, attempt: Attempt, name: str) -> None:
    st.info(t("Please check your certificate before it is issued: it cannot be changed "
              "afterwards."), icon=":material/fact_check:")
    with st.container(border=True, key="quiz-confirm"):
        st.caption(t("Name, exactly as it will be printed"))
        st.markdown(f"#### {escape_markdown(name)}")
        st.checkbox(t("Show my score and how many attempts I took on the public verify page"),
                    key="quiz-show-score")
        st.caption(
            t("Your score ({score}) will be printed on the certificate and shown on the "
              "verify page.", score=fmt_percent(attempt.score.percent / 100))
            if st.session_state.get("quiz-show-score") else
            t("Your score will be shown neither on the certificate nor on the verify page.")
        )
        left, right = st.columns(2)
        left.button(t("Issue my certificate"), type="primary", key="quiz-issue",
                    on_click=issue, args=(service, attempt.id, name))
        right.button(t("Change the name"), key="quiz-edit-name",
                     on_click=st.session_state.pop, args=(_CONFIRM, None))
    show_notice()


def issue(service: QuizService, attempt_id: str, name: str) -> None:
    """The confirm button's callback: the certificate, in the session's language, under the
    name the learner saw (or why it cannot be issued now). A failure after the certificate
    was stored is not "not issued": a certificate the attempt has and that verifies is
    shown. The click and the page drawn after it share one wait for a locked database
    (storage.database.shared_wait), so "try again in a moment" comes within it."""
    with shared_wait() as began:
        st.session_state[_WAIT_FROM] = began
        _issue(service, attempt_id, name)


def _issue(service: QuizService, attempt_id: str, name: str) -> None:
    try:
        service.issue(attempt_id, name, bool(st.session_state.get("quiz-show-score")),
                      lang=current_language())
    except NameError_ as problem:
        st.session_state[_NOTICE] = ("name", name_problem(problem))
        st.session_state.pop(_CONFIRM, None)
        return
    except (StorageUnavailable, StorageError) as problem:
        if issued_certificate(attempt_id) is None:
            st.session_state[_NOTICE] = ("storage", problem)
            return
        LOG.error("issued, then: %s", problem)
    st.session_state.pop(_CONFIRM, None)


def issued_certificate(attempt_id: str) -> tuple[QuizService, Certificate] | None:
    """The attempt's certificate when it is stored and verifies, with the verify page's
    service it was read through (the signing key is not needed); None when there is none
    or the storage cannot tell."""
    try:
        reader = shared_service(create_key=False, strict=False)
        certificate = reader.certificate_for(attempt_id)
        if certificate is None or not reader.verify(certificate.id).valid:
            return None
    except (StorageUnavailable, StorageError):
        return None
    return reader, certificate


def show_result(service: QuizService, attempt: Attempt) -> None:
    score = attempt.score
    st.progress(1.0, text=t("All questions answered"))
    st.metric(t("Your score"), fmt_percent(score.percent / 100))
    st.caption(tn("{correct} of {count} question right", "{correct} of {count} questions right",
                  score.total, correct=score.correct))
    missed = sorted(
        {
            attempt.questions[p].question.topic
            for p, chosen in attempt.answers.items()
            if chosen != attempt.questions[p].correct
        }
    )
    if missed:
        st.markdown("**" + t("Lessons to revisit:") + "**")
        for topic in missed:
            lesson_link(topic)
    if score.passed:
        st.success(t("Passed: the pass mark is {mark:.0%}.", mark=config.PASS_MARK))
        certificate = service.certificate_for(attempt.id)
        if certificate is None:
            show_issue_form(service, attempt)
        else:
            show_certificate(service, certificate)
        return
    st.error(t("Not passed this time: the pass mark is {mark:.0%}.", mark=config.PASS_MARK))
    wait = service.cooldown_left(attempt)
    if wait:
        st.info(t("You can try again with a new set of questions in {seconds} s.",
                  seconds=wait))
    st.button(t("Try again with new questions"), type="primary", key="quiz-retry",
              on_click=start, args=(service, attempt.id))
    show_notice()


def render() -> None:
    st.title(t("Quiz"))
    with shared_wait(st.session_state.pop(_WAIT_FROM, None)):  # after a click: its wait
        _render()


def _render() -> None:
    try:
        service = shared_service()
        show_quiz(service)
    except (StorageError, StorageUnavailable) as problem:  # the operator must act (or wait)
        # The certificate the learner's click issued is shown all the same (the key file
        # damaged after it was signed stops issuing, not the certificate already issued).
        attempt_id = st.query_params.get("attempt") or st.session_state.get(ATTEMPT_KEY)
        issued = issued_certificate(attempt_id) if attempt_id else None
        if issued is None:
            storage_message(problem)
        else:
            LOG.error("%s", problem)
            show_certificate(*issued)


def show_quiz(service: QuizService) -> None:
    try:
        service.bank()
    except BankError as problem:  # a teacher's edit broke the file: say where
        st.error(t("The question bank cannot be used: {problem}", problem=str(problem)))
        return
    attempt_id = (
        st.query_params.get("attempt")
        or st.session_state.get(ATTEMPT_KEY)
        or progress_store().items(learner_id(), OPEN_ATTEMPT).get("")
    )
    if not attempt_id:
        show_intro(service)
        return
    try:
        attempt = service.attempt(attempt_id, current_language())
    except AttemptExpired:
        remember(None)
        st.warning(
            t("This quiz attempt has expired or its link is not valid any more, so it cannot "
              "be resumed. Start a new one below."),
            icon=":material/timer_off:",
        )
        show_intro(service)
        return
    remember(attempt.id)
    viewing = st.session_state.get(_view_key(attempt.id))
    feedback = attempt.feedback(viewing) if viewing is not None else None
    if feedback is not None:
        show_feedback(attempt, viewing, feedback)
    elif attempt.next_position is not None:
        show_question(service, attempt, attempt.next_position)
    else:
        show_result(service, attempt)
