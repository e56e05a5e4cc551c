"""Lesson 10's live measurements (the practitioner's toolbox): packed against padded
batches, autocast's kept dtypes, LoRA's saved inputs, MFU against HFU from counted FLOPs
and a CheckpointError caught with debug=True. Each is a short CPU run of tiny models in
the demo service's worker (serving.toolbox_jobs, measured by demos.toolbox and
demos.toolbox_runs), run when the learner asks and stored for everyone per setting; a
stored result shows at once. Registered by name in ui.lesson_widgets.

The demo runner (and with it torch) is imported when a measurement is drawn, not with this
module: the other lesson pages import the widget registry and stay free of torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from demos import toolbox_settings as settings
from demos.mistake_records import CASE_CONFIG
from i18n import N_
from i18n.units import format_bytes
from memory.toolbox import lora_kept_numbers
from ui.i18n import babel_locale, current_language, fmt_decimal, fmt_number, fmt_percent, t
from ui.lesson_common import measured_or_ask, option_words
from ui.lesson_parallel import SCHEDULE_LABELS as SCHEDULES
from ui.progress import keep, one_of

# documents whose outputs differ from the document run alone by less than this are apart
APART = 1e-4
LAYOUTS = {
    "padded": N_("Padded batch (attention mask)"),
    "packed": N_("Packed row, position_ids restart, use_cache=False"),
    "packed-cache": N_("Packed row, position_ids restart, a cache (use_cache=True)"),
    "packed-no-positions": N_("Packed row, position_ids forgotten"),
}
ROLES = {
    "input": N_("its input"),
    "output": N_("its output"),
    "input-copy": N_("a cast of its input"),
    "weight-copy": N_("a cast of the weight"),
    "weight": N_("the weight"),
    "other": N_("another tensor"),
}
LORA_CASES = {
    "base": N_("Frozen base linear alone"),
    "fp32": N_("LoRA, fp32 adapters (PEFT's default)"),
    "fp32-dropout": N_("LoRA, fp32 adapters, lora_dropout 0.1"),
    "same": N_("LoRA, adapters in the base's bf16"),
    "same-dropout": N_("LoRA, bf16 adapters, lora_dropout 0.1"),
}
STRATEGIES = {
    "none": N_("No checkpointing (the model's FLOPs)"),
    "every-layer": N_("Every layer checkpointed (the hardware's FLOPs)"),
}
DTYPES = {"bfloat16": "bfloat16", "float16": "float16"}


def _bytes(size: float) -> str:
    return format_bytes(size, locale=babel_locale())


def _table(frame: pd.DataFrame) -> None:
    from ui import demo_display

    demo_display.table(frame)


def _measured(part: str, value: Any = None) -> pd.DataFrame | None:
    """The stored measurement of `part` at `value`, or the learner's click to measure it
    now (ui.lesson_common.measured_or_ask), or None."""
    from serving.jobs import Job
    from ui import demo_runner as runner

    job = Job.make("toolbox", CASE_CONFIG, (), **settings.options(part, value))
    return measured_or_ask(job, f"toolbox-{part}-{value}", runner.run_toolbox)


def _caption(how: str) -> None:
    from ui import demo_runner as runner

    st.caption(
        ":material/science: "
        + t(
            "Measured on this server's CPU with torch {version}, {how}.",
            version=runner.device().torch_version,
            how=how,
        )
    )


def _setting(key: str, label: str, part: str, words: Callable[[Any], str]) -> Any:
    _, allowed, default = settings.SETTINGS[part]
    keep({key: (default, one_of(allowed))})
    return st.radio(label, list(allowed), key=key, format_func=words, horizontal=True)


# ------------------------------------------------------------------ packing
def packing() -> None:
    code = current_language()
    st.markdown(t("**Measured: a padded batch against the same sequences packed**"))
    presets = settings.PACK_PRESETS
    preset = _setting(
        "tbm_pack",
        t("Sequence lengths (tokens)"),
        "packing",
        lambda key: ", ".join(fmt_number(n) for n in presets[key]),
    )
    frame = _measured("packing", preset)
    if frame is None:
        return
    rows = {row["layout"]: row for row in frame.to_dict("records")}
    words = option_words(code, LAYOUTS)
    table = pd.DataFrame(
        {
            t("Layout"): [words(key) for key in rows],
            t("Token slots"): [fmt_number(int(r["slots"])) for r in rows.values()],
            t("Saved for backward, growing with the tokens"): [
                _bytes(r["token_bytes"]) for r in rows.values()
            ],
            t("Per token slot"): [_bytes(r["token_bytes"] / r["slots"]) for r in rows.values()],
            t("The s × s mask"): [_bytes(r["square_bytes"]) for r in rows.values()],
            t("Each document's outputs against the document alone"): [
                t("the same (largest difference {diff})", diff=fmt_decimal(r["max_diff"], 7))
                if r["max_diff"] < APART
                else t(
                    "different (largest difference {diff}): the documents attend to each other",
                    diff=fmt_decimal(r["max_diff"], 3),
                )
                for r in rows.values()
            ],
        }
    )
    _table(table)
    padded, packed = rows["padded"], rows["packed"]
    st.markdown(
        t(
            "The packed row keeps **{share}** of what the padded batch keeps for its tokens, "
            "for {real} real tokens in {slots} slots ({slot_share}).",
            share=fmt_percent(packed["token_bytes"] / padded["token_bytes"], 1),
            real=fmt_number(int(padded["real_tokens"])),
            slots=fmt_number(int(padded["slots"])),
            slot_share=fmt_percent(padded["real_tokens"] / padded["slots"], 1),
        )
    )
    _caption(
        t(
            "a tiny transformers Llama (2 layers, SDPA attention), every storage saved "
            "for backward counted once, the weights left out"
        )
    )


# ------------------------------------------------------------------ autocast
def autocast() -> None:
    code = current_language()
    st.markdown(t("**Measured: what each op of a small block saves under CPU autocast**"))
    dtype = _setting("tbm_autocast", t("Autocast dtype"), "autocast", option_words(code, DTYPES))
    frame = _measured("autocast", dtype)
    if frame is None:
        return
    roles = option_words(code, ROLES)
    lines, kept = [], {"float32": 0, "16": 0}
    for op, group in frame.groupby("op", sort=False):
        first = group.iloc[0]
        saved = "; ".join(
            f"{r.dtype} {'×'.join(str(n) for n in r.shape) or '()'} ({roles(r.role)})"
            for r in group.itertuples()
        )
        fp32 = int(group.loc[group["dtype"] == "float32", "bytes"].sum())
        half = int(group.loc[group["dtype"] == dtype, "bytes"].sum())
        kept["float32"] += fp32
        kept["16"] += half
        lines.append(
            {
                t("Op"): op,
                t("Input"): first["input_dtype"],
                t("Output"): first["output_dtype"],
                t("Saved for backward"): saved,
                t("Bytes kept in fp32"): fmt_number(fp32),
                t("Bytes kept in {dtype}", dtype=dtype): fmt_number(half),
            }
        )
    _table(pd.DataFrame(lines))
    total = kept["float32"] + kept["16"]
    st.markdown(
        t(
            "Of the {total} bytes these ops keep in floating point, **{share}** are "
            "fp32, although autocast runs the block in {dtype}.",
            total=fmt_number(total),
            share=fmt_percent(kept["float32"] / total, 1),
            dtype=dtype,
        )
    )
    _caption(
        t(
            'each op run alone under torch.autocast("cpu") on a {tokens} × {width} '
            "input, its saved tensors read by saved-tensor hooks",
            tokens=fmt_number(settings.AUTOCAST_SHAPE[0]),
            width=fmt_number(settings.AUTOCAST_SHAPE[1]),
        )
    )


# ------------------------------------------------------------------ LoRA
def lora() -> None:
    code = current_language()
    st.markdown(t("**Measured: what a frozen linear and a PEFT LoRA linear keep**"))
    frame = _measured("lora")
    if frame is None:
        return
    words = option_words(code, LORA_CASES)
    lines = []
    for case, group in frame.groupby("case", sort=False):
        tokens = int(group["tokens"].iloc[0])
        width = int(group["width"].iloc[0])

        def of(role: str, group: pd.DataFrame = group) -> pd.DataFrame:
            return group[group["role"] == role]

        copies, masks, middle = of("copy"), of("mask"), of("other")
        counted = (
            "—"
            if case == "base"
            else fmt_decimal(
                sum(lora_kept_numbers(width, case.startswith("fp32"), "dropout" in case).values())
                / width,
                0,
            )
        )
        lines.append(
            {
                t("Layer"): words(case),
                t("Its input itself"): t("kept") if len(of("input")) else t("not kept"),
                t("Copies of the input"): ", ".join(copies["dtype"]) or "—",
                t("Dropout masks"): ", ".join(masks["dtype"]) or "—",
                t("Extra bytes a token"): _bytes(
                    (copies["bytes"].sum() + masks["bytes"].sum() + middle["bytes"].sum()) / tokens
                ),
                t("Input-wide copies and masks, measured"): fmt_decimal(
                    (copies["numel"].sum() + masks["numel"].sum()) / tokens / width, 0
                ),
                t("Input-wide copies and masks, the lesson's count"): counted,
            }
        )
    _table(pd.DataFrame(lines))
    st.caption(
        t(
            "Extra: what the layer keeps beyond its weights and its input: copies of "
            "the input, masks and the adapter's rank-wide middle. On a CPU torch's "
            "dropout keeps its mask in the input's dtype (the noise it multiplies by); "
            "on a GPU the fused dropout keeps one byte a number."
        )
    )
    _caption(
        t(
            "a {width}-wide bf16 linear and peft's LoRA of rank {rank} on it, on {tokens} "
            "tokens that need their gradient",
            width=fmt_number(int(frame["width"].iloc[0])),
            rank=fmt_number(settings.LORA_RANK),
            tokens=fmt_number(int(frame["tokens"].iloc[0])),
        )
    )


# ------------------------------------------------------------------ MFU and HFU
def flops() -> None:
    code = current_language()
    st.markdown(
        t("**Measured: model FLOPs against hardware FLOPs, with and without checkpointing**")
    )
    layers = _setting("tbm_flops", t("Layers of the lab's model"), "flops", fmt_number)
    frame = _measured("flops", layers)
    if frame is None:
        return
    rows = {row["strategy"]: row for row in frame.to_dict("records")}
    model_flops = rows["none"]["flops"]
    words = option_words(code, STRATEGIES)
    lines = []
    for key, row in rows.items():
        lines.append(
            {
                t("Step"): words(key),
                t("FLOPs counted by torch"): t(
                    "{value} GFLOP", value=fmt_decimal(row["flops"] / 1e9, 3)
                ),
                t("Predicted by the course"): t(
                    "{value} GFLOP", value=fmt_decimal(row["predicted_flops"] / 1e9, 3)
                ),
                t("Step time (median)"): t("{value} ms", value=fmt_decimal(row["wall_s"] * 1e3, 1)),
                t("Model FLOPs a second"): t(
                    "{value} GFLOP/s", value=fmt_decimal(model_flops / row["wall_s"] / 1e9, 2)
                ),
                t("Hardware FLOPs a second"): t(
                    "{value} GFLOP/s", value=fmt_decimal(row["flops"] / row["wall_s"] / 1e9, 2)
                ),
            }
        )
    _table(pd.DataFrame(lines))
    ratio = rows["every-layer"]["flops"] / model_flops
    slower = rows["every-layer"]["wall_s"] / rows["none"]["wall_s"]
    left, right = st.columns(2)
    left.metric(t("HFU / MFU with checkpointing"), f"{fmt_decimal(ratio, 3)}×")
    right.metric(t("Its step time against no checkpointing"), f"{fmt_decimal(slower, 2)}×")
    st.markdown(
        t(
            "Divide both rates by the same peak and you have MFU and HFU: with every layer "
            "checkpointed, HFU is **{ratio}×** MFU, from the two counts alone. The checkpointed "
            "step's MFU falls by its slowdown, while its HFU stays near the step without "
            "checkpointing: the recomputation bought memory, not speed.",
            ratio=fmt_decimal(ratio, 3),
        )
    )
    _caption(
        t(
            "the lab's model ({layers} layers, hidden {hidden}, batch {batch} × {seq} "
            "tokens), FLOPs from torch.utils.flop_counter.FlopCounterMode around one whole "
            "step, times the median of {repeats} interleaved steps (wall time: on a busy "
            "server the times, not the counts, move)",
            layers=fmt_number(int(layers)),
            hidden=fmt_number(CASE_CONFIG.hidden),
            batch=fmt_number(CASE_CONFIG.batch),
            seq=fmt_number(CASE_CONFIG.seq_len),
            repeats=fmt_number(int(frame["repeats"].iloc[0])),
        )
    )


# ------------------------------------------------------------------ CheckpointError
def checkpoint_error() -> None:
    from demos.toolbox_runs import BLOCK_SOURCE

    st.markdown(t("**Measured: a CheckpointError caught with debug=True**"))
    st.code(
        BLOCK_SOURCE + "\nout = checkpoint(_block, x, state, use_reentrant=False, "
        'debug=True)\nstate["first run"] = False\nout.sum().backward()  '
        "# recomputes _block: CheckpointError",
        language="python",
    )
    frame = _measured("checkpoint-error")
    if frame is None:
        return
    debug = frame[frame["message"] == "debug"]
    plain = frame[frame["message"] == "plain"]
    parts = {part: list(group["line"]) for part, group in debug.groupby("part", sort=False)}
    st.caption(
        t(
            "With debug=True: its first lines, the two logs of operators and its "
            "verdict. The message has {count} lines; the rest are the stack traces of "
            "each operator.",
            count=fmt_number(int(debug["total"].iloc[0])),
        )
    )
    text = "\n".join(
        [
            *parts.get("head", []),
            "…",
            "Operations executed during the original forward:",
            *parts.get("forward", []),
            "Operations executed during recomputation:",
            *parts.get("recompute", []),
            "…",
            *parts.get("error", []),
        ]
    )
    st.code(text, language=None, wrap_lines=True)
    st.caption(t("Without debug: its first lines."))
    st.code("\n".join(plain["line"]), language=None, wrap_lines=True)
    _caption(t("torch's own messages, caught on this run"))


# ------------------------------------------------------------------ the pipeline's bubble
def pipeline() -> None:
    from demos.pipeline_bubble import CHUNKS, STAGES, bubbles
    from lessons.figures import pipeline_timeline_figure
    from ui.lesson_common import CHART

    code = current_language()
    st.markdown(t("**Measured: the bubble of each schedule, two processes on this CPU**"))
    m = _setting("tbm_pipe", t("Micro-batches m"), "pipeline", fmt_number)
    frame = _measured("pipeline", m)
    if frame is None:
        return
    rows = frame.to_dict("records")
    schedules = option_words(code, SCHEDULES)
    lines = []
    for (schedule, checkpointed), entry in bubbles(rows).items():
        lines.append(
            {
                t("Schedule"): schedules(schedule),
                t("Checkpointing"): t("every block") if checkpointed else t("none"),
                t("Busy per process"): t("{value} ms", value=fmt_decimal(entry["busy"] * 1e3, 0)),
                t("Step"): t("{value} ms", value=fmt_decimal(entry["span"] * 1e3, 0)),
                t("Idle over busy, measured"): fmt_percent(entry["measured"], 1),
                t("Idle over busy, predicted"): fmt_percent(entry["predicted"], 1),
                t("CPU while busy"): fmt_percent(min(entry["cpu_share"], 1.0), 0),
            }
        )
    _table(pd.DataFrame(lines))
    events = [r for r in rows if r["kind"] in ("F", "B") and not r["checkpointed"]]
    lanes = {
        (schedule, rank): t(
            "{schedule}, process {rank}", schedule=schedules(schedule), rank=fmt_number(rank + 1)
        )
        for schedule in SCHEDULES
        for rank in range(STAGES)
    }
    kinds = {"F": t("forward of a micro-batch"), "B": t("backward of a micro-batch")}
    st.plotly_chart(
        pipeline_timeline_figure(events, lanes, kinds, code), key=f"tbm_pipe_chart_{m}", **CHART
    )
    st.caption(
        t(
            "The predicted bubble is (p − 1)/m, and (p − 1)/(v·m) interleaved with v = {v} "
            "chunks per process, here p = {p}. Measured: the step's span less each process's "
            "forwards and backwards, over the latter. Tiny stages make the messages and "
            "Python's own work count, and on a busy server the processes also wait for the "
            "cores (the CPU column falls below 100 %): the measured bubble is then larger than "
            "the schedule's. The order of the bars is the schedule's own.",
            v=fmt_number(CHUNKS),
            p=fmt_number(STAGES),
        )
    )
    _caption(
        t(
            "torch.distributed.pipelining over gloo, two processes of one thread, a "
            "stage of linear layers per process, wall time of every forward and backward "
            "of a micro-batch"
        )
    )
