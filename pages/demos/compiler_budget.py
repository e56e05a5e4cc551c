"""The compiler's memory budget, measured: torch.compile's activation memory budget swept
on the lab's model, beside the manual strategies on the same chart."""

import streamlit as st

from demos.compiler_budget import BASE, BUDGETS, COMPILED_STRATEGIES, EAGER_STRATEGIES
from reports import budget_figures as figures
from reports import memory_snapshot, report
from serving.jobs import Job
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.device_words import device_text
from ui.i18n import current_language, t

BUDGET_OPTIONS = ("1", "0.8", "0.5", "0.2", "0.1", "0")
_MEASURE = "_compiler_budget_measure"

st.title(t("The compiler's memory budget"))
st.markdown(t(
    "`torch.compile` can choose for itself what to save for backward and what to "
    "recompute. Its knob is `torch._functorch.config.activation_memory_budget`, a number "
    "from 0 to 1: at 1 the compiler saves what its runtime-optimised plan keeps, at 0 only "
    "the compiled graph's inputs (the whole graph recomputed in backward), in between at "
    "most that share of the way from the first size to the second, recomputing the "
    "cheapest rest. The leading underscore means a **private** API: it can change or "
    "vanish in any PyTorch release, so pin your version if you rely on it."))
st.markdown(t(
    "Here every budget compiles the model anew and runs real training steps; the manual "
    "strategies run on the same model and batch, eagerly and (two of them) compiled. "
    "Each dot is measured on this run: bytes saved for backward, FLOPs counted from the "
    "graphs that run, and the median step time."))


@st.fragment
def budget_demo() -> None:
    config = controls.model_controls(["layers", "hidden", "arch"], columns=3, defaults=BASE)
    chosen = query.multi_choice(
        "budgets", t("Budgets"), BUDGET_OPTIONS, [f"{b:g}" for b in BUDGETS],
        help=t("Each budget is one compile of the model: fewer budgets measure sooner."))
    with_compiled = query.choice(
        "compiled", t("Manual checkpointing under torch.compile too"), ["yes", "no"], "yes",
        format_func=lambda v: t("yes") if v == "yes" else t("no"))
    if not chosen:
        st.info(t("Pick at least one budget above."), icon=":material/info:")
        return
    job = Job.make("budget", config, (), budgets=tuple(float(b) for b in chosen),
                   eager=EAGER_STRATEGIES,
                   compiled=COMPILED_STRATEGIES if with_compiled == "yes" else (),
                   repeats=5)
    frame = runner.budget_result(job)
    if frame is None and runner.collecting():
        return  # never warmed at start-up: each budget compiles the model
    example = None
    if frame is None:
        seconds = runner.estimated_seconds(job)
        # Too long to measure here (the estimate follows this server's measured speed, so
        # a busy server may say so at the defaults): refused, the stored example still shown.
        refused = seconds > runner.MAX_SECONDS
        if refused:
            st.error(t("This would take roughly {duration} on this {device}, longer than a "
                       "demo may hold a shared server (at most {limit}). Make the model "
                       "smaller or pick fewer budgets.",
                       duration=runner.duration_text(seconds), device=runner.device_noun(),
                       limit=runner.duration_text(runner.MAX_SECONDS)),
                     icon=":material/block:")
        if refused or st.session_state.get(_MEASURE) != repr(job):
            example = runner.budget_example(job)
            if example is None and not refused:
                st.info(t("Not measured yet for these settings. Each budget compiles the "
                          "model first; all together take roughly {duration} on this "
                          "{device}, and other learners' demos take turns with it meanwhile. "
                          "The result is kept for everyone who asks next.",
                          duration=runner.duration_text(seconds),
                          device=runner.device_noun()),
                        icon=":material/timer:")
            elif example is not None:
                st.warning(t("**Stored example, not measured on this server**: these are the "
                             "project's benchmark figures for these settings, measured on "
                             "{date} on an {machine} CPU (torch {torch}, threads: {threads}). "
                             "Each budget compiles the model first; measuring here takes "
                             "roughly {duration} on this {device}, and other learners' demos "
                             "take turns with it meanwhile.",
                             date=example.date, machine=example.machine,
                             threads=example.threads, torch=example.torch,
                             duration=runner.duration_text(seconds),
                             device=runner.device_noun()),
                           icon=":material/inventory_2:")
            if not refused and st.button(t("Measure now (~{duration})",
                                           duration=runner.duration_text(seconds)),
                                         key="measure-budget"):
                st.session_state[_MEASURE] = repr(job)
                st.rerun(scope="fragment")
            if example is None:
                return
            frame = example.frame
        else:
            frame = runner.run_budget(job)
            if frame is None:
                return
    lang = current_language()
    display.chart("compiler-budget", (repr(job), display.fingerprint(frame)),
                  lambda lang: figures.pareto_figure(frame, lang))
    display.note(figures.budget_caption(frame, lang))
    changes = figures.compiler_changes(frame, lang)
    if changes:
        st.subheader(t("What the compiler changes"))
        st.markdown("\n".join(f"- {line}" for line in changes))
    st.dataframe(figures.budget_table(frame, lang), hide_index=True)
    st.caption(t(
        "Bytes saved for backward leave the parameters and the token ids out. Compiled "
        "points: the tensors the compiled graph saves, seen by "
        "`torch.autograd.graph.saved_tensors_hooks`; eager points: the live tracker "
        "(non-reentrant checkpointing packs each of its inputs through those hooks, but a "
        "selective policy's cache keeps its tensors where they do not look; torch 2.14 "
        "added `respect_saved_tensors_hooks=True`, which routes them through). FLOPs: "
        "torch.utils.flop_counter's formulas, counted over the forward and "
        "backward graphs the compiler built (a counter around a compiled step would only "
        "see an eager one: Dynamo does not compile under a dispatch mode). Recomputed FLOPs: "
        "a step's FLOPs above the eager step without checkpointing. Compiled points are "
        "timed right after their compile, not interleaved."))
    if example is None:
        display.measured_caption(device_text(runner.device()), figures.methods(frame, lang))
    else:
        st.caption(":material/inventory_2: " + t(
            "Stored example from the project's benchmark (`python -m benchmarks."
            "compiler_budget`), measured on {date} on an {machine} CPU, not on this run.",
            date=example.date, machine=example.machine))
    name = f"compiler-budget-{report.config_slug(config)}"
    if example is not None:
        display.download(frame, name)
        st.caption(t("The stored example keeps no tracked steps: measure it on this server "
                     "to download its memory snapshot."))
        return
    display.downloads(
        frame, name, memory_snapshot.budget_runs(frame, config),
        t("The memory snapshot holds the eager points' steps only. A compiled step cannot be "
          "tracked: under a dispatch mode such as the lab's tracker, Dynamo leaves the frame "
          "uncompiled and runs it eagerly, so the tracker would see an eager step."))


budget_demo()
