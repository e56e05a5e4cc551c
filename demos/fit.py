"""What fits: the largest batch or sequence length a strategy can train within a budget."""

from __future__ import annotations

from demos.device import detect_device
from demos.measure import compare
from demos.results import FitResult
from i18n.units import format_bytes
from memory import theory
from memory.config import LIMITS, ConfigError, ModelConfig
from memory.strategies import StrategySpec, require_spec


def predicted_total(cfg: ModelConfig, spec: StrategySpec, device: str = "cpu") -> int:
    """Parameters plus the predicted peak of one step."""
    return theory.parameter_bytes(cfg) + theory.predicted_peak_bytes(cfg, spec, device)


# Timed steps at the confirmed size: the throughput is their median (demos.measure.compare;
# a size measured over the budget is not timed). Every size gets the same timed steps, a
# large batch as many as a small one, so the throughputs compare like with like.
FIT_REPEATS = 3


def largest_fitting(base: ModelConfig, spec: StrategySpec, vary: str, budget_bytes: int,
                    device: str = "auto", confirm: bool = True, max_tries: int = 4,
                    repeats: int = FIT_REPEATS) -> FitResult:
    """Binary search on the theory for the largest `vary` ('batch' or 'seq_len') whose
    parameters + predicted peak fit budget_bytes; then, if confirm, run it and step down
    (about 10% at a time) until the measured total fits too, and time that size with
    `repeats` steps (wall and CPU time, the step's FLOPs counted). The result names the
    strategy by its canonical text (a row of the page's table)."""
    if vary not in ("batch", "seq_len"):
        raise ConfigError(f"vary={vary!r}: allowed batch, seq_len")
    if budget_bytes <= 0:
        raise ConfigError(f"budget={budget_bytes} bytes must be positive")
    spec = require_spec(spec)
    kind = detect_device(device).kind
    lo, hi = LIMITS[vary]
    lo, hi = int(lo), int(hi)

    def fits(v: int) -> bool:
        return predicted_total(base.replace(**{vary: v}), spec, kind) <= budget_bytes

    if not fits(lo):
        need = predicted_total(base.replace(**{vary: lo}), spec, kind)
        return FitResult(spec.label, vary, budget_bytes, None, None, None, None, need, None,
                         None, None, f"even {vary}={lo} needs {format_bytes(need)}, over the "
                                     f"budget of {format_bytes(budget_bytes)}")
    while lo < hi:  # largest v with fits(v)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    best = lo
    pred = predicted_total(base.replace(**{vary: best}), spec, kind)
    result = FitResult(spec.label, vary, budget_bytes, best, None, None, None, pred, None, None,
                       None)
    if not confirm:
        return result
    value = best
    for _ in range(max_tries):
        cfg = base.replace(**{vary: value})
        # the device's own guard; timed only when the measured total is within the budget;
        # no plain reference step: a fit shows no gradient agreement, and the plain step of
        # a batch that fits only checkpointed holds several budgets
        comp = compare(cfg, [spec], device=device, repeats=repeats, time_within=budget_bytes,
                       min_repeats=repeats, check_gradients=False)
        r = comp.results[0]
        total = (comp.parameter_bytes or 0) + (r.peak_bytes or 0)
        if r.fits and total <= budget_bytes:
            result.value_confirmed, result.peak_bytes = value, r.peak_bytes
            result.total_bytes = total
            result.step_seconds, result.measured_by = r.step_seconds, r.measured_by
            result.step_seconds_runs = list(r.step_seconds_runs)
            result.cpu_seconds_runs = list(r.cpu_seconds_runs)
            result.threads = r.threads
            result.flops_counted, result.flops_predicted = r.flops_counted, r.flops_predicted
            result.memory_events = r.memory_events
            if r.step_seconds:
                result.tokens_per_second = cfg.batch * cfg.seq_len / r.step_seconds
            return result
        result.note = (f"{vary}={value} measured {format_bytes(total)}, over the budget"
                       if r.fits else (r.error or "did not fit"))
        if value == 1:
            break
        value = max(1, int(value * 0.9))
    return result
