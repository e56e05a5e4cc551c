"""What this exact model should hold and peak at, from its shapes alone; FLOPs; and the
reference figures of the sources (Korthikanti et al. 2022, the seed documents).

Every number here is derived from the tensors the blocks save for backward, listed in
block_tensors() from memory.layer's per-layer formula (one source for both): for a
pre-LN gpt block in fp32 with fused attention that is 64·s·b·h + 4·(4·b·s + a·b·s)
bytes, the figure measured on the prototype; the llama block (cfg.arch) has its own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from i18n import gettext
from memory import strategies
from memory.architectures import of_config
from memory.config import ConfigError, ModelConfig
from memory.layer import (
    Held,
    attention_flops,
    cached_only_tensors,
    forward_flops,
    head_flops,
    last_matmul,
    layer_flops,
    layer_tensors,
    linear_flops,
    norm_tensors,
)
from memory.layer import early_stop_skips as layer_early_stop_skips
from memory.segments import Segment
from memory.strategies import (
    CHECKPOINT_KEEPS,
    PlanInputs,
    StrategySpec,
    require_spec,
)
from memory.worked_examples import korthikanti_layer_bytes

# A tensor a block keeps: name, bytes, kind and the FLOPs that remake it. The per-layer
# formula is memory.layer's (one source for the planner and this engine's predictions).
HeldTensor = Held

# The matmuls of the engine's gpt block (demos.model) by the planner's linear layers of a
# gpt layer (memory.architectures, linears()): its fused QKV, the attention's output
# projection and the MLP's two; a llama block's matmuls are its linear layers by name.
GPT_MATMULS = {"qkv": ("q", "k", "v"), "proj": ("o",), "fc": ("fc",), "out": ("proj",)}


def _sizes(cfg: ModelConfig, device: str) -> tuple[int, int, int, int]:
    """(element bytes, LayerNorm-statistics bytes, dropout-mask bytes, sbh) for a device."""
    e = cfg.dtype_bytes
    stats = e if device == "cpu" else 4  # CUDA keeps LayerNorm statistics in fp32
    mask = e if device == "cpu" else 1  # CPU dropout masks have the input dtype; CUDA bool
    return e, stats, mask, cfg.batch * cfg.seq_len * cfg.hidden


def _plain(cfg: ModelConfig, device: str) -> tuple[Held, ...]:
    """What one block keeps when it runs plainly: memory.layer.layer_tensors for this
    model's architecture, with the fused attention kernel the engine runs."""
    return layer_tensors(of_config(cfg), cfg.batch, cfg.seq_len, cfg.dtype_bytes, fused=True,
                         device=device)


def _cached_only(cfg: ModelConfig) -> tuple[Held, ...]:
    return cached_only_tensors(of_config(cfg), cfg.batch, cfg.seq_len, cfg.dtype_bytes)


def block_tensors(cfg: ModelConfig, device: str = "cpu") -> list[Held]:
    """Every tensor a block makes that a strategy may keep for backward, with its bytes:
    what a plain block keeps, then what only a selective policy caches."""
    plain = _plain(cfg, device)
    names = {t.name for t in plain}
    return [*plain, *(t for t in _cached_only(cfg) if t.name not in names)]


def held_in_block(cfg: ModelConfig, how: str = "keep", device: str = "cpu") -> list[Held]:
    """The tensors one block keeps: how is 'keep', 'checkpoint' or a selective policy (its
    record for the model's architecture names them)."""
    if how == "keep":
        return list(_plain(cfg, device))
    names = CHECKPOINT_KEEPS if how == "checkpoint" else strategies.policy(how, cfg.arch).keeps
    return [t for t in block_tensors(cfg, device) if t.name in names]


def predicted_block_bytes(cfg: ModelConfig, device: str = "cpu") -> int:
    """Bytes one plain block keeps for backward, its input included.
    gpt, fp32, CPU, no dropout: 64·s·b·h + 4·(4·b·s + a·b·s)."""
    return sum(t.bytes for t in held_in_block(cfg, "keep", device))


def outside_blocks(cfg: ModelConfig, device: str = "cpu") -> list[Held]:
    """Held outside the blocks, loss excluded: the final norm's tensors (the planner's
    norm formula; "ln_f.in" when it keeps its input itself) and the embedding's dropout
    mask."""
    e, _, m, sbh = _sizes(cfg, device)
    out = [replace(t, name="ln_f.in") if t.name == "input" else t
           for t in norm_tensors(of_config(cfg), "ln_f", cfg.batch, cfg.seq_len, e, device)]
    if cfg.dropout > 0:
        out.append(Held("emb.mask", sbh * m, "dropout"))
    return out


def logits_bytes(cfg: ModelConfig) -> int:
    """One b·s·V tensor: the logits, their log-softmax, or a gradient of either."""
    return cfg.batch * cfg.seq_len * cfg.vocab * cfg.dtype_bytes


def loss_held_bytes(cfg: ModelConfig) -> int:
    """Held by the loss at the end of forward: the log-softmax output and two scalars."""
    return logits_bytes(cfg) + 2 * cfg.dtype_bytes


def plan_for(cfg: ModelConfig, spec: StrategySpec, device: str = "cpu") -> list[Segment]:
    """The segments a strategy runs the layers in. Raises BudgetTooSmall for budgets.

    Every prediction here takes a StrategySpec record (TypeError for text: a strategy's
    text is parsed where it comes in, memory.strategies.parse_strategy)."""
    require_spec(spec)
    inputs = PlanInputs(cfg.layers, predicted_block_bytes(cfg, device),
                        cfg.batch * cfg.seq_len * cfg.hidden * cfg.dtype_bytes)
    return strategies.plan(spec, inputs)


def _last_output(cfg: ModelConfig, plan: list[Segment], device: str) -> int:
    """A policy that caches a layer's output ("output" in its record) keeps the last
    layer's too: the final norm's input, counted there unless that norm keeps only an fp32
    copy (RMSNorm in 16-bit)."""
    last = plan[-1] if plan else None
    if last is None or last.mode != "selective" or "output" not in strategies.policy(
            last.policy, cfg.arch).rebuild_extra:
        return 0
    if any(t.name == "ln_f.in" for t in outside_blocks(cfg, device)):
        return 0
    return cfg.batch * cfg.seq_len * cfg.hidden * cfg.dtype_bytes


def _segment_held(cfg: ModelConfig, seg: Segment, device: str) -> int:
    if seg.mode == "keep":
        return seg.size * predicted_block_bytes(cfg, device)
    if seg.mode == "checkpoint":
        return sum(t.bytes for t in held_in_block(cfg, "checkpoint", device))
    # selective: every layer is its own checkpoint with a per-op policy
    return seg.size * sum(t.bytes for t in held_in_block(cfg, seg.policy, device))


def predicted_activation_bytes(cfg: ModelConfig, spec: StrategySpec,
                               device: str = "cpu") -> int:
    """Bytes held for backward at the end of forward, outside the loss (the log-softmax
    is loss_held_bytes). Offload moves them to CPU memory: 0 stay on the GPU."""
    spec = require_spec(spec)
    if spec.strategy.offloads:
        return 0
    plan = plan_for(cfg, spec, device)
    return (sum(_segment_held(cfg, seg, device) for seg in plan)
            + sum(t.bytes for t in outside_blocks(cfg, device))
            + _last_output(cfg, plan, device))


def parameter_count(cfg: ModelConfig) -> int:
    """gpt: 12·h² + 13·h per block (qkv, proj, fc, out with biases, two LayerNorms), the
    token and position tables, the final LayerNorm and the untied head."""
    return of_config(cfg).params()


def parameter_bytes(cfg: ModelConfig) -> int:
    return parameter_count(cfg) * cfg.dtype_bytes


def predicted_peak_bytes(cfg: ModelConfig, spec: StrategySpec, device: str = "cpu") -> int:
    """Peak bytes above the parameters during one step (gradients included): the largest
    of predicted_peak_moments."""
    return max(predicted_peak_moments(cfg, spec, device).values())


def predicted_peak_where(cfg: ModelConfig, spec: StrategySpec,
                         device: str = "cpu") -> str:
    """The moment of predicted_peak_moments that sets the peak ("loss", "head", "layers",
    "end"); the first in that order on a tie."""
    moments = predicted_peak_moments(cfg, require_spec(spec), device)
    return max(moments, key=lambda moment: moments[moment])


def predicted_peak_moments(cfg: ModelConfig, spec: StrategySpec,
                           device: str = "cpu") -> dict[str, int]:
    """The bytes above the parameters at each moment that can set a step's peak: "loss"
    (the loss's backward), "head" (the LM head's backward), "layers" (the layers'
    backward), "end" (every gradient exists).

    Three moments compete. (1) In the loss's backward the log-softmax, its gradient and
    the logits' gradient (three b·s·V tensors) sit on top of everything held. (2) In the
    layers' backward, last layer first, the peak comes at a segment's first MLP backward:
    the earlier layers' held bytes, the segment's rebuilt layers (the MLP's last
    activation already released), the gradients made so far, and the gradients in flight
    (_mlp_backward: for gpt 9·s·b·h, the GELU output's and input's, 4h each, and the
    residual stream's). (3) At the very end
    every gradient exists, plus the one flowing into the embedding: this wins when the
    weights outweigh the activations. On the CPU this is exact to the byte without dropout
    (and within 1% with it)."""
    spec = require_spec(spec)
    e, _, _, sbh = _sizes(cfg, device)
    held = predicted_activation_bytes(cfg, spec, device)
    lg = logits_bytes(cfg)
    arch = of_config(cfg)
    # LM head and final norm: what embedding_params counts beyond the two tables
    head_grad = (arch.embedding_params() - (arch.vocab + arch.positions) * arch.hidden) * e
    loss_peak = held + loss_held_bytes(cfg) + 2 * lg
    head_peak = held + lg + head_grad + sbh * e
    block_grad = arch.block_params() * e
    gelu, in_flight, out_grad = _mlp_backward(cfg, device)
    held += _last_output_in_backward(cfg, spec, device)
    if arch.norm == "rmsnorm" and e < 4:
        # RMSNorm in 16-bit runs its backward in fp32: measured on the CPU, one more fp32
        # s·b·h gradient at the final norm, one more 16-bit one in a layer (exact in the
        # layers; within 3% when the peak comes in the final norm's backward)
        head_peak += sbh * 4
        in_flight += sbh * e
    emb_mask = sum(t.bytes for t in outside_blocks(cfg, device) if t.name == "emb.mask")
    if spec.strategy.offloads:  # held bytes live in CPU memory; one layer comes back at a time
        plan, held_by = [Segment(0, cfg.layers, "checkpoint")], [0] * (cfg.layers + 1)
        rebuilt_of = {0: predicted_block_bytes(cfg, device)}
    else:
        plan = plan_for(cfg, spec, device)
        held_by = [emb_mask]
        for seg in plan:
            held_by.append(held_by[-1] + _segment_held(cfg, seg, device))
        rebuilt_of = {j: (held_by[j + 1] - held_by[j]) if seg.mode == "keep"
                      else seg.size * predicted_block_bytes(cfg, device)
                      + _cached_extra(cfg, seg, device) for j, seg in enumerate(plan)}
    layer_peak = 0
    for j, seg in enumerate(plan):
        grads = head_grad + (cfg.layers - seg.stop) * block_grad + out_grad
        layer_peak = max(layer_peak, held_by[j] + rebuilt_of[j] - gelu + grads + in_flight)
    # last, the token embedding's gradient (V·h) appears when every other gradient exists
    end_peak = parameter_bytes(cfg) + sbh * e + 2 * e
    return {"loss": int(loss_peak), "head": int(head_peak), "layers": int(layer_peak),
            "end": int(end_peak)}


def _mlp_backward(cfg: ModelConfig, device: str) -> tuple[int, int, int]:
    """A layer's backward starts in the MLP's output projection. (the activation released
    once it has run, the gradients then in flight, that projection's weight gradient).
    gpt: the GELU output goes; the residual's gradient and the GELU output's and input's
    (4h each) are in flight. llama: the gated product goes; the residual's gradient, the
    product's, and SiLU's and up's (m each) are in flight. And the loss scalar and its unit
    gradient."""
    e, _, _, sbh = _sizes(cfg, device)
    arch = of_config(cfg)
    m = cfg.batch * cfg.seq_len * arch.mlp_width * e
    i, o = arch.linears()["down" if arch.mlp == "swiglu" else "proj"]
    weight = (i * o + (o if arch.linear_bias else 0)) * e
    wide = 3 if arch.mlp == "swiglu" else 2
    return m, sbh * e + wide * m + 2 * e, weight


def _last_output_in_backward(cfg: ModelConfig, spec: StrategySpec, device: str) -> int:
    if spec.strategy.offloads:
        return 0
    return _last_output(cfg, plan_for(cfg, spec, device), device)


def _cached_extra(cfg: ModelConfig, seg: Segment, device: str) -> int:
    """What a selective segment's policy caches beyond a plain layer, alive while the
    layer is rebuilt ("output": the layer's output, kept by the cache of its add)."""
    if seg.mode != "selective":
        return 0
    e, _, _, sbh = _sizes(cfg, device)
    sizes = {t.name: t.bytes for t in _cached_only(cfg)} | {"output": sbh * e}
    return sum(sizes.get(name, 0)
               for name in strategies.policy(seg.policy, cfg.arch).rebuild_extra)


def early_stop_skips(cfg: ModelConfig) -> float:
    """Forward FLOPs a checkpointed segment does NOT rerun in backward under torch's
    non-reentrant checkpoint: the work in its last layer after the last op that saves
    something for backward (memory.layer.early_stop_skips: the MLP's last linear without
    dropout, nothing when a dropout after the MLP saves its mask). Reentrant checkpoint
    "always recomputes function in its entirety" (torch/utils/checkpoint.py)."""
    return layer_early_stop_skips(of_config(cfg), cfg.batch, cfg.seq_len)


def segment_recompute(cfg: ModelConfig, seg: Segment, reentrant: bool = False,
                      attention: float | None = None) -> tuple[float, float]:
    """(matmul FLOPs, attention FLOPs) backward reruns for one segment: a checkpointed
    segment reruns its layers, the last one without what early stop skips (its final MLP
    linear, when no dropout follows it) unless `reentrant`; a selective layer reruns the
    matmuls its policy does not save (memory.strategies records them, early stop included)
    and attention unless saved. `attention`: one layer's attention FLOPs (default: the
    causal count, attention_flops)."""
    arch = of_config(cfg)
    b, s = cfg.batch, cfg.seq_len
    att = attention_flops(arch, b, s) if attention is None else attention
    linears = layer_flops(arch, b, s) - attention_flops(arch, b, s)
    if seg.mode == "checkpoint":
        skipped = 0.0 if reentrant else early_stop_skips(cfg)
        return seg.size * linears - skipped, seg.size * att
    if seg.mode == "selective":
        record = strategies.policy(seg.policy, cfg.arch)
        groups = GPT_MATMULS if cfg.arch == "gpt" else {n: (n,) for n in arch.linears()}
        names = record.recomputed_matmuls
        # the records leave out the MLP's last linear (early stop); a dropout after the
        # MLP saves its mask after it, so unless the policy caches its output it reruns
        tail = "out" if cfg.arch == "gpt" else last_matmul(arch)
        if tail not in record.keeps and tail not in names and not early_stop_skips(cfg):
            names += (tail,)
        redo = sum(linear_flops(arch, b, s, n) for name in names for n in groups[name])
        return seg.size * redo, (seg.size * att if record.recomputes_attention else 0.0)
    return 0.0, 0.0


def step_flops(cfg: ModelConfig, spec: StrategySpec | None = None,
               reentrant: bool = False) -> dict[str, float]:
    """Matmul FLOPs of one step: forward, backward (2x forward: the gradients of the inputs
    and of the weights), the recomputation a strategy adds, and the ratio to a step
    without checkpointing. The recomputation follows torch: non-reentrant checkpoint stops
    early (early_stop_skips), `reentrant` reruns whole segments. Attention is counted
    causal (half the s² pairs: the work a causal kernel does)."""
    n = cfg.layers
    arch = of_config(cfg)
    # gpt: 2·b·s·12·h² + 2·b·s²·h (causal: half the scores); the planner's layer formula
    block = layer_flops(arch, cfg.batch, cfg.seq_len)
    head = head_flops(arch, cfg.batch, cfg.seq_len)
    forward = forward_flops(arch, cfg.batch, cfg.seq_len)
    backward = 2 * forward
    recompute = 0.0
    if spec is not None:
        for seg in plan_for(cfg, spec):
            recompute += sum(segment_recompute(cfg, seg, reentrant))
    base = forward + backward
    # what checkpointing every layer adds: the blocks' forward once more, less what early
    # stop skips in each (without dropout the MLP's last linear: 8 of the gpt block's 24
    # b·s·h² of linear FLOPs; with a dropout after the MLP nothing)
    every = n * (block - (0.0 if reentrant else early_stop_skips(cfg)))
    return {"forward": forward, "backward": backward, "recompute": recompute,
            "total": base + recompute, "block_forward": block, "head_forward": head,
            "overhead": (base + recompute) / base,
            "recompute_every_layer": every, "overhead_every_layer": (base + every) / base}


# The course's rule of thumb for checkpointing every layer: one more forward pass, in a
# step of three (forward, backward = 2 forwards): +1/3; with frozen weights (LoRA, QLoRA)
# backward computes no weight gradients, a step is about two forwards: +1/2. torch's early
# stop makes the real figure lower (early_stop_skips).
COURSE_OVERHEAD = {"full": 1 / 3, "frozen": 1 / 2}


# torch's FLOP counter (torch/utils/flop_counter.py) counts mm, addmm, bmm and the fused
# attention kernels it has a formula for: torch 2.13 the CUDA ones
# (_scaled_dot_product_flash/efficient/cudnn_attention and their backward), not the CPU's
# (_scaled_dot_product_flash_attention_for_cpu), so on a CPU it counts no attention;
# torch 2.15 registers the CPU kernel too. The engine reads which from the installed
# counter's registry (demos.installed_torch) and passes `attention_counted`. The
# attention formulas ignore the causal mask: 2 matmuls of b·a·s²·d forward, 5 backward
# (the scores recomputed, then the gradients of scores, v, q and k).
COUNTER_ATTENTION_FORWARD = 4  # × b·a·s²·d
COUNTER_ATTENTION_BACKWARD = 10


def counted_flops(cfg: ModelConfig, spec: StrategySpec | None = None,
                  device: str = "cpu", reentrant: bool = False,
                  attention_counted: bool | None = None) -> dict[str, float]:
    """What torch.utils.flop_counter.FlopCounterMode reports around one whole training
    step of this model (forward, loss, backward): the linear layers and the head forward,
    twice that backward, the recomputation (step_flops' rule: early stop, reentrant,
    selective), and the attention when the counter counts it (`attention_counted`: whether
    the installed counter has a formula for the fused kernel on `device`, which
    demos.installed_torch reads; unset: torch 2.13's registry, on a GPU only).
    Keys: total, recompute, base (the step without checkpointing), overhead."""
    arch = of_config(cfg)
    b, s, n = cfg.batch, cfg.seq_len, cfg.layers
    counted = device != "cpu" if attention_counted is None else attention_counted
    unit = b * arch.heads * s * s * arch.head_dim if counted else 0
    linears = n * (layer_flops(arch, b, s) - attention_flops(arch, b, s)) + head_flops(arch, b, s)
    base = 3 * linears + n * (COUNTER_ATTENTION_FORWARD + COUNTER_ATTENTION_BACKWARD) * unit
    recompute = 0.0
    if spec is not None:
        spec = require_spec(spec)
        for seg in plan_for(cfg, spec, "cuda" if device != "cpu" else "cpu"):
            recompute += sum(segment_recompute(
                cfg, seg, reentrant, attention=COUNTER_ATTENTION_FORWARD * unit))
    return {"base": base, "recompute": recompute, "total": base + recompute,
            "overhead": (base + recompute) / base}


# An effective rate for this model's training step on a small CPU (measured 60-110 GFLOP/s
# on 2 cores; lower under load). Used only to warn before a long run.
CPU_FLOPS_PER_SECOND = 8e10
TRACKED_STEP_COST = 3  # a step under the live-bytes tracker costs about 2-3 plain steps
COUNTED_STEP_COST = 1  # the step under torch's FLOP counter (demos.measure.Step.counted)


def cpu_seconds(runs: Sequence[tuple[ModelConfig, StrategySpec, int]]) -> float:
    """Rough seconds on a CPU for (config, strategy, steps) runs, from step_flops; 0 when
    a config is invalid (the engine then explains why)."""
    try:
        flops = sum(step_flops(config, strategy)["total"] * steps
                    for config, strategy, steps in runs)
    except (ConfigError, ValueError, ZeroDivisionError):
        return 0.0
    return flops / CPU_FLOPS_PER_SECOND


def explain_differences(cfg: ModelConfig, device: str = "cpu", lang: str = "en") -> str:
    """Why this model's bytes per layer differ from Korthikanti's 34·s·b·h, in `lang`."""
    ours = predicted_block_bytes(cfg, device)
    sbh = cfg.batch * cfg.seq_len * cfg.hidden
    theirs = korthikanti_layer_bytes(cfg.batch, cfg.seq_len, cfg.hidden, cfg.heads)
    e = cfg.dtype_bytes
    if cfg.dropout == 0:
        dropout = gettext(lang, "This model has no dropout, so no masks.")
    else:
        dropout = gettext(lang, "This model drops out after attention and after the MLP, not "
                                "inside attention, so the a·s² mask is absent.")
        dropout += " " + (gettext(lang, "On the CPU a mask has the activation's dtype.")
                          if device == "cpu" else gettext(lang, "Masks are 1-byte bool."))
    lines = [
        gettext(lang, "This model keeps {ours:.1f}·s·b·h bytes per layer; Korthikanti et al. "
                      "count 34·s·b·h ({ratio:.2f}×).", ours=ours / sbh, ratio=ours / theirs),
        "- " + gettext(lang, "Number size: Korthikanti assume 16-bit activations (2 bytes); "
                             "this run uses {dtype} ({bytes} bytes), so each kept tensor costs "
                             "{factor}× as much.", dtype=cfg.dtype, bytes=e,
                       factor=format(e / 2, "g")),
        "- " + gettext(lang, "Dropout: Korthikanti keep 1-byte dropout masks (attention, after "
                             "attention, after the MLP: 2·s·b·h plus 1·a·s²·b).") + " " + dropout,
        "- " + gettext(lang, "Attention: with fused attention (scaled_dot_product_attention) "
                             "the s×s scores are never stored; only the output and a "
                             "log-sum-exp per head and token are, so the 5·a·s²·b term is "
                             "gone."),
        "- " + gettext(lang, "Kept tensors in units of s·b·h elements: LayerNorm inputs and "
                             "outputs 4, fused QKV 3, attention output 1, MLP 4h GELU input and "
                             "output 8: 16, plus LayerNorm statistics and the log-sum-exp (b·s "
                             "numbers each)."),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- what sets a peak

LOSS_OPS = ("softmax", "nll_loss", "cross_entropy")
PEAK_PARTS = ("activations", "logits", "gradients", "temporaries")


@dataclass(frozen=True)
class PeakCause:
    """Where a measured step peaked and which part of memory set the peak: ids and
    numbers from the run, worded by the UI.

    `where`: forward | loss | loss-backward (the loss's gradient, backward's first ops) |
    recompute | backward (of `layer`) | head-backward (embedding and LM head, outside the
    layers). `part`: the largest of PEAK_PARTS at the peak, `part_bytes` its bytes."""

    strategy: str
    where: str
    layer: int | None
    op: str | None
    peak_bytes: int
    part: str
    part_bytes: int

    @property
    def share(self) -> float:
        return self.part_bytes / self.peak_bytes if self.peak_bytes else 0.0


def peak_where(phase: str | None, layer: int | None, op: str | None) -> str:
    """The place of a peak as an id (see PeakCause.where)."""
    if phase == "loss":
        return "loss"
    if phase in ("forward", "recompute"):
        return phase
    if layer is not None:
        return "backward"
    if op is not None and any(name in op for name in LOSS_OPS):
        return "loss-backward"
    return "head-backward"


def peak_cause(result) -> PeakCause | None:
    """What set a measured result's peak (a demos.results.StrategyResult), from the
    tracker's breakdown at the peak and the op there; None when it did not run."""
    if not result.fits or result.peak_bytes is None or not result.breakdown:
        return None
    parts = {p: int(result.breakdown.get(p, 0) or 0) for p in PEAK_PARTS}
    part = max(parts, key=lambda p: parts[p])
    return PeakCause(result.strategy, peak_where(result.peak_phase, result.peak_layer,
                                                 result.peak_op),
                     result.peak_layer, result.peak_op, int(result.peak_bytes), part,
                     parts[part])


def shared_peaks(results) -> list[list[str]]:
    """Groups (two or more) of checkpointing strategies that reached exactly the same
    peak: a sign that something checkpointing does not touch sets it."""
    groups: dict[int, list[str]] = {}
    for r in results:
        if r.fits and r.peak_bytes is not None and not r.spec.strategy.baseline:
            groups.setdefault(int(r.peak_bytes), []).append(r.strategy)
    return [names for names in groups.values() if len(names) > 1]
