"""The lab of mistakes on a page: a symptom-first picker, then one case (linkable as
?case=<id>) run the wrong and the fixed way beside a plain run, with what this run
measured, why, the one-line fix and torch's own words. The cases are demos.mistakes."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from demos.mistakes import (
    CASES,
    SYMPTOM_TITLES,
    Case,
    CaseResult,
    Measured,
    Statistic,
    Symptom,
)
from i18n import N_
from i18n.units import column_unit, format_bytes, format_bytes_in
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.i18n import babel_locale, fmt_decimal, fmt_number, fmt_percent, t
from ui.navigation import page_link

ANY = "any"
PHASES = {"forward": N_("forward"), "recompute": N_("recomputation"),
          "backward": N_("backward"), "loss": N_("loss"), "optimizer": N_("optimizer step")}
STATISTICS = {Statistic.BATCHNORM_UPDATES: N_("Running-statistic updates (all batch norms)"),
              Statistic.SIDE_EFFECTS: N_("Side effects counted (calls and losses appended)"),
              Statistic.CACHED_TOKENS: N_("Tokens held in the key/value cache"),
              Statistic.REENTRANT_CHECKPOINTS: N_("Reentrant checkpoints in the step's graph"),
              Statistic.CHECKPOINTING_FLAGS: N_("Modules with the library's checkpointing "
                                                "flag on")}
SAVED = N_("Saved for backward in forward (each storage once)")
# The cases whose symptom is a gradient difference to the plain run.
GRADIENT_CASES = ("dropout-without-rng", "fsdp-checkpoint-wrapper-rng")
OFFLOADED = N_("Saved for backward through the hooks (to host memory)")
KEPT_ON_DEVICE = N_("Saved for backward past the hooks (left on the device)")


def _bytes(value: int | None) -> str:
    return "—" if value is None else format_bytes(value, locale=babel_locale())


def _diff(value: float | None) -> str:
    if value is None:
        return "—"
    if value == 0:
        return t("0 (bitwise equal)")
    return fmt_decimal(value, 6)


def _phase(m: Measured) -> str:
    return t(PHASES[m.peak_phase]) if m.peak_phase in PHASES else "—"


def _total(m: Measured) -> int | None:
    """The whole peak: the weights plus the live peak above them."""
    return None if m.parameter_bytes is None else (m.peak_bytes or 0) + m.parameter_bytes


def _said(m: Measured) -> str:
    return m.error or m.warning or "—"


def _rows(case: Case, r: CaseResult) -> list[tuple[str, Callable[[Measured], str]]]:
    """(label, value of a run) for what this case measured."""
    runs = (r.plain, r.wrong, r.fixed)
    rows: list[tuple[str, Callable[[Measured], str]]] = []

    def measured(field: str) -> bool:
        return any(getattr(m, field) not in (None, ()) for m in runs)

    def sizes(label: str, size: Callable[[Measured], int | None]) -> None:
        """A row of sizes, in one unit across the runs (never 9.8 KiB beside 3.0 MiB; an
        exact zero reads 0 B)."""
        unit = column_unit(size(m) for m in runs)
        rows.append((label, lambda m: "—" if size(m) is None else _bytes(0) if size(
            m) == 0 else format_bytes_in(size(m), unit, locale=babel_locale())))

    if measured("state_bytes"):
        sizes(t("Peak with weights, gradients and optimizer state"), _total)
        sizes(t("Weights, gradients and optimizer state"), lambda m: m.state_bytes)
    sizes(t("Peak, live bytes above the parameters"), lambda m: m.peak_bytes)
    rows.append((t("Where the peak is"), _phase))
    if measured("saved_bytes"):
        sizes(t(SAVED), lambda m: m.saved_bytes)
    if measured("kept_on_device_bytes"):
        sizes(t(OFFLOADED), lambda m: m.offloaded_bytes)
        sizes(t(KEPT_ON_DEVICE), lambda m: m.kept_on_device_bytes)
    if measured("flops"):
        rows.append((t("Arithmetic of one step"),
                     lambda m: t("{value} GFLOP", value=fmt_decimal((m.flops or 0) / 1e9, 3))))
    if case.id == "reentrant-frozen-inputs":
        rows.append((t("Parameters without a gradient"),
                     lambda m: fmt_number(len(m.none_grads))))
    if measured("max_grad_diff") and (case.statistic is Statistic.NONE
                                       or case.statistic is Statistic.REENTRANT_CHECKPOINTS):
        rows.append((t("Largest gradient difference to the plain run"),
                     lambda m: _diff(m.max_grad_diff)))
    if case.statistic in STATISTICS:
        rows.append((t(STATISTICS[case.statistic]),
                     lambda m: "—" if m.statistic is None else fmt_number(int(m.statistic))))
    if measured("statistic_diff"):
        rows.append((t("Largest running-statistic difference to the plain run"),
                     lambda m: _diff(m.statistic_diff)))
    rows.append((t("Loss"), lambda m: "—" if m.loss is None else fmt_decimal(m.loss, 4)))
    rows.append((t("What the library said"), _said))
    return rows


def _headline(case: Case, r: CaseResult, m: Measured) -> tuple[str, str, str | None]:
    """(label, value, delta against the plain run) of the number that shows the symptom."""
    if case.id == "reentrant-frozen-inputs":
        return t("Parameters without a gradient"), fmt_number(len(m.none_grads)), None
    if case.id in GRADIENT_CASES:
        return t("Largest gradient difference to the plain run"), _diff(m.max_grad_diff), None
    if case.id == "checkpointing-flag-not-applied":
        saved, plain = m.saved_bytes or 0, r.plain.saved_bytes or 1
        return (t(SAVED), _bytes(saved),
                t("{share} of the plain run", share=fmt_percent(saved / plain, 1)))
    if case.statistic in STATISTICS and case.statistic is not Statistic.CHECKPOINTING_FLAGS:
        value = fmt_number(int(m.statistic or 0))
        return t(STATISTICS[case.statistic]), value, None
    if case.id == "selective-under-save-on-cpu":
        return t(KEPT_ON_DEVICE), _bytes(m.kept_on_device_bytes), None
    if case.id == "recompute-mismatch":
        text = (t("stopped: {error}", error=m.error_type) if m.error_type
                else t("finished"))
        return t("Backward"), text, None
    if case.id == "activations-not-the-problem":
        total, plain = _total(m) or 0, _total(r.plain) or 1
        return (t("Peak with weights, gradients and optimizer state"), _bytes(total),
                t("{share} of the plain run", share=fmt_percent(total / plain, 1)))
    plain_peak = r.plain.peak_bytes or 1
    peak = m.peak_bytes or 0
    return (t("Peak, live bytes above the parameters"), _bytes(peak),
            t("{share} of the plain run", share=fmt_percent(peak / plain_peak, 1)))


def pick_case() -> Case:
    """The symptom first, then the case; the case is in the URL (?case=<id>)."""
    symptoms = [ANY, *(s.value for s in Symptom)]
    titles = {ANY: t("Show every case"),
              **{s.value: t(SYMPTOM_TITLES[s]) for s in Symptom}}
    chosen = query.choice("symptom", t("What did you see?"), symptoms, ANY,
                          format_func=titles.__getitem__, horizontal=False)
    ids = [c.id for c in CASES.values() if chosen == ANY or Symptom(chosen) in c.symptoms]
    wanted = st.query_params.get("case")
    if wanted is not None and wanted not in CASES:
        # The link's text, shown literally (never as a link, an image or colour).
        query.show_warning(t("There is no case {case}; showing {default}.",
                             case=query.shown(wanted), default=ids[0]))
    index = ids.index(wanted) if wanted in ids else 0
    case_titles = {i: t(CASES[i].title) for i in ids}
    case_id = st.radio(t("Which mistake?"), ids, index=index, key=f"case-{chosen}",
                       format_func=case_titles.__getitem__)
    if st.query_params.get("case") != case_id:
        st.query_params["case"] = case_id
    return CASES[case_id]


def _side(title: str, code: str, case: Case, r: CaseResult, m: Measured, shows: bool) -> None:
    with st.container(border=True):
        st.markdown(f"**{title}**")
        # Wrapped: two columns side by side cut a long line of code off at its right edge.
        st.code(code, language="python", wrap_lines=True)
        label, value, delta = _headline(case, r, m)
        # No arrow: the delta is a share of the plain run ("41.1% of the plain run" is a
        # reduction), which Streamlit would draw as a rise for being positive.
        st.metric(label, value, delta, delta_color="off", delta_arrow="off")
        if shows:
            label = t("Symptom shown")
            st.markdown(f":red-badge[:material/report: {label}]")
        else:
            label = t("Symptom gone")
            st.markdown(f":green-badge[:material/check_circle: {label}]")
        said = m.error or m.warning
        if said:
            st.caption(t("What the library said (its own words):"))
            st.code(said, language=None, wrap_lines=True)


def show_case(case: Case) -> None:
    st.subheader(t(case.title))
    result = runner.run_mistake(case.id)
    if result is None:
        return
    st.markdown(t("**Why:** {why}", why=t(case.why)))
    left, right = st.columns(2)
    with left:
        _side(t("The wrong way"), case.wrong_code, case, result, result.wrong,
              result.wrong_shows)
    with right:
        _side(t("The fixed way"), case.fixed_code, case, result, result.fixed,
              result.fixed_shows)
    st.success(t("**The fix:** {fix}", fix=t(case.fix)), icon=":material/build:")
    rows = _rows(case, result)
    frame = pd.DataFrame({
        t("Measured"): [label for label, _ in rows],
        t("Plain run"): [value(result.plain) for _, value in rows],
        t("Wrong way"): [value(result.wrong) for _, value in rows],
        t("Fixed way"): [value(result.fixed) for _, value in rows],
    })
    display.table(frame)
    config = result.config
    if case.lesson == "image-models":  # the lab's tiny image models
        about = t("Each run uses tiny image models built from their diffusers and "
                  "transformers classes ({arch}) at {size} × {size} pixels, from the same "
                  "weights and data.", arch=config.get("arch"), size=config.get("size"))
    else:
        about = t("Each run is one training step of the lab's model ({layers} layers, hidden "
                  "{hidden}, batch {batch} × {seq} tokens, vocabulary {vocab}) from the same "
                  "weights and data.", layers=config.get("layers"),
                  hidden=config.get("hidden"), batch=config.get("batch"),
                  seq=config.get("seq_len"), vocab=config.get("vocab"))
    display.measured_caption(t("CPU"), [N_("live-tensor tracker (TorchDispatchMode)")], about)
    display.snapshot_button(
        [(t("Plain run"), result.plain.memory_events),
         (t("Wrong way"), result.wrong.memory_events),
         (t("Fixed way"), result.fixed.memory_events)],
        result.plain.parameter_bytes or 0, f"mistake-{case.id}", case.id)
    page_link(case.lesson, label=t("Where the idea is taught"), icon=":material/school:")
