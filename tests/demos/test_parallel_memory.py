"""The memory model across GPUs (memory.parallel) against Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models", arXiv:2205.05198v1 (pages
as in that PDF): its Table 2 formulas (p. 9), Equations 5 (p. 8) and 6 (p. 9), and the
per-GPU figures it reports for its GPT-3 175B and MT-NLG 530B configurations (Table 3,
p. 10: s = 2,048, micro-batch 1, t = 8, p = 8 and 35, interleaving with m = 3 chunks,
Section 6, p. 10)."""

from __future__ import annotations

import pytest

from memory.parallel import (
    Layout,
    LayoutError,
    activations_per_gpu,
    in_flight,
    interleave_factor,
    layer_bytes,
    layer_transfers,
    split_bytes,
    stage_output_bytes,
    state_per_gpu,
)

GiB = 2**30
# Table 3 of the paper (Section 6, p. 10).
GPT3 = {"a": 96, "h": 12_288, "layers": 96, "t": 8, "p": 8, "b": 1}
MTNLG = {"a": 128, "h": 20_480, "layers": 105, "t": 8, "p": 35, "b": 1}
S = 2_048


@pytest.mark.parametrize("s,b,h,a,t", [(2_048, 1, 12_288, 96, 8), (4_096, 2, 4_096, 32, 4),
                                       (1_024, 3, 2_048, 16, 2)])
def test_table_2_rows(s, b, h, a, t):
    """Each row of Table 2 (Section 5), written out here from the paper."""
    sbh = s * b * h
    assert layer_bytes(s, b, h, a) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert layer_bytes(s, b, h, a, tp=t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert layer_bytes(s, b, h, a, tp=t, sp=True) == pytest.approx(
        sbh * (34 / t + 5 * a * s / (h * t)))
    assert layer_bytes(s, b, h, a, tp=t, recompute="selective") == pytest.approx(
        sbh * (10 + 24 / t))
    assert layer_bytes(s, b, h, a, tp=t, sp=True, recompute="selective") == pytest.approx(
        sbh * 34 / t)
    assert layer_bytes(s, b, h, a, recompute="full") == pytest.approx(2 * sbh)
    assert layer_bytes(s, b, h, a, tp=t, recompute="full") == pytest.approx(2 * sbh)
    # with sequence parallelism the layer's input is itself split along the sequence
    assert layer_bytes(s, b, h, a, tp=t, sp=True, recompute="full") == pytest.approx(2 * sbh / t)


@pytest.mark.parametrize("config", [GPT3, MTNLG], ids=["gpt3-175b", "mt-nlg-530b"])
def test_first_stage_holds_l_layers_under_1f1b(config):
    """Equation 5 (Section 4.2.3): the first 1F1B stage keeps sbhL/t(34 + 5as/h) whatever p
    is, and Equation 6 (Section 5) 34·sbhL/t with selective recomputation."""
    a, h, layers, t, p, b = (config[k] for k in ("a", "h", "layers", "t", "p", "b"))
    layout = Layout(tp=t, sp=True, pp=p, microbatches=4 * p)
    if layers % p:
        return  # Equation 5 assumes p divides L (105 layers on 35 stages do)
    sbhl = S * b * h * layers
    assert activations_per_gpu(layout, layers=layers, s=S, b=b, h=h, a=a) == pytest.approx(
        sbhl / t * (34 + 5 * a * S / h))
    assert activations_per_gpu(layout, layers=layers, s=S, b=b, h=h, a=a,
                               recompute="selective") == pytest.approx(34 * sbhl / t)


def test_interleaved_schedule_scales_by_the_paper_factor():
    """Section 4.2.3: the interleaved schedule keeps L(1 + (p-1)/(pm)) layers' worth; the
    175B and 530B runs used m = 3 (Section 6)."""
    for config in (GPT3, MTNLG):
        a, h, layers, t, p, b = (config[k] for k in ("a", "h", "layers", "t", "p", "b"))
        if layers % (p * 3):
            continue
        layout = Layout(tp=t, sp=True, pp=p, schedule="interleaved", chunks=3,
                        microbatches=4 * p)
        plain = Layout(tp=t, sp=True, pp=p, microbatches=4 * p)
        ratio = (activations_per_gpu(layout, layers=layers, s=S, b=b, h=h, a=a,
                                     recompute="selective")
                 / activations_per_gpu(plain, layers=layers, s=S, b=b, h=h, a=a,
                                       recompute="selective"))
        assert ratio == pytest.approx(interleave_factor(p, 3))
    assert interleave_factor(8, 3) == pytest.approx(1 + 7 / 24)


def test_reported_first_stage_output_tensors_of_mt_nlg():
    """Appendix B (Figure 9's text, p. 16): on the 530B model's first pipeline stage the output
    tensors of its p micro-batches in flight take "sbhp = 2.73 GB" (2 bytes an element;
    binary GB). The first 1F1B stage holds p of them: within 1 %."""
    layout = Layout(tp=8, sp=True, pp=MTNLG["p"], microbatches=280)
    held = stage_output_bytes(S, MTNLG["b"], MTNLG["h"], round(in_flight(layout)))
    assert held / GiB == pytest.approx(2.73, rel=0.01)


@pytest.mark.parametrize("config,reported", [(GPT3, 0.70), (MTNLG, 0.65)],
                         ids=["gpt3-175b", "mt-nlg-530b"])
def test_reported_selective_saving(config, reported):
    """Section 5, p. 9: selective recomputation saves "70% and 65% of the required memory for
    activations for the GPT-3 and MT-NLG models" (5as/h = 80 and 64 against 34), on the
    GPU that holds the most: the first stage of their Table 3 layouts."""
    a, h, layers, t, p, b = (config[k] for k in ("a", "h", "layers", "t", "p", "b"))
    layout = Layout(tp=t, sp=True, pp=p, schedule="interleaved", chunks=3,
                    microbatches=4 * p)
    kept = activations_per_gpu(layout, layers=layers, s=S, b=b, h=h, a=a)
    selective = activations_per_gpu(layout, layers=layers, s=S, b=b, h=h, a=a,
                                     recompute="selective")
    assert 1 - selective / kept == pytest.approx(reported, abs=0.01)


@pytest.mark.parametrize("config", [GPT3, MTNLG], ids=["gpt3-175b", "mt-nlg-530b"])
def test_figure_7_shares_of_the_tensor_parallel_baseline(config):
    """Section 6.1 (p. 10), Figure 7 (p. 11): against the tensor-parallel baseline
    (Equation 2, p. 5), sequence
    parallelism with selective recomputation needs about a fifth ("a 5x reduction bringing
    the memory requirements to under 20%", 530B at 20.2 % by the formula), full
    recomputation about a tenth ("at 10% of the baseline")."""
    a, h, t = config["a"], config["h"], config["t"]
    base = layer_bytes(S, 1, h, a, tp=t)
    present = layer_bytes(S, 1, h, a, tp=t, sp=True, recompute="selective") / base
    full = layer_bytes(S, 1, h, a, tp=t, recompute="full") / base
    assert present == pytest.approx(0.2, abs=0.02)
    assert full == pytest.approx(0.1, abs=0.015)
    assert present / full == pytest.approx(2, rel=0.15)  # "only ~2x of full recomputation"


def test_schedules_hold_what_they_run_ahead():
    assert in_flight(Layout(pp=4, microbatches=8)) == 4
    assert in_flight(Layout(pp=4, microbatches=2)) == 2  # fewer micro-batches than stages
    assert in_flight(Layout(pp=4, microbatches=8, schedule="gpipe")) == 8
    # interleaved, p = 4, v = 2: (4-1)·2 + (2-1)·4 + 1 = 11 chunk passes of L/8 layers
    assert in_flight(Layout(pp=4, microbatches=8, schedule="interleaved", chunks=2)) == 5.5


def test_context_parallel_divides_the_sequence_and_keeps_no_scores():
    plain = layer_bytes(8_192, 1, 8_192, 64, tp=8, sp=True, fused=True)
    assert layer_bytes(8_192, 1, 8_192, 64, tp=8, sp=True, cp=4) == pytest.approx(plain / 4)
    layout = Layout(tp=8, sp=True, cp=2, pp=2, microbatches=8, dp=2, ep=4)
    assert layout.gpus == 64


def test_full_recomputation_adds_one_rebuilt_layer():
    layout = Layout(tp=2, sp=True, pp=2, microbatches=4)
    kept = activations_per_gpu(layout, layers=8, s=128, b=2, h=64, a=4, recompute="full")
    assert kept == pytest.approx(4 * 2 * 2 * 128 * 2 * 64 / 2
                                 + layer_bytes(128, 2, 64, 4, tp=2, sp=True))


def test_state_is_split_by_model_and_data_parallelism():
    layout = Layout(tp=2, pp=2, dp=4, ep=4)
    # dense weights over t·p·dp = 16; experts over t·p·ep and dp/ep = 16 as well
    assert state_per_gpu(16e9, 32e9, 16, layout) == pytest.approx((1e9 + 2e9) * 16)
    assert state_per_gpu(16e9, 0, 16, layout, sharded=False) == pytest.approx(4e9 * 16)


def test_transfers_per_layer():
    tp = {(x.kind, x.collective): x for x in layer_transfers(Layout(tp=4), s=8, b=2, h=16)}
    assert tp[("tp", "all-reduce")].count == 4
    assert tp[("tp", "all-reduce")].elements == 8 * 2 * 16
    sp = {(x.kind, x.collective): x.count
          for x in layer_transfers(Layout(tp=4, sp=True), s=8, b=2, h=16)}
    assert sp == {("sp", "all-gather"): 6, ("sp", "reduce-scatter"): 4}
    cp = layer_transfers(Layout(cp=4), s=8, b=2, h=16, kv_hidden=4)
    assert cp[0].count == 3 * 2 and cp[0].elements == 2 * 2 * 2 * 4
    ep = layer_transfers(Layout(ep=2, dp=2), s=8, b=2, h=16, top_k=2)
    assert ep[0].collective == "all-to-all" and ep[0].elements == 8 * 2 * 16 * 2


@pytest.mark.parametrize("kwargs,word", [({"tp": 0}, "tp"), ({"schedule": "zigzag"}, "schedule"),
                                         ({"schedule": "interleaved"}, "chunks"),
                                         ({"schedule": "interleaved", "chunks": 2, "pp": 4,
                                           "microbatches": 6}, "divisible"),
                                         ({"ep": 3, "dp": 4}, "expert")])
def test_bad_layouts_say_why(kwargs, word):
    with pytest.raises(LayoutError, match=word):
        Layout(**kwargs)


def test_later_stages_hold_fewer_under_1f1b():
    layout = Layout(pp=4, microbatches=8)
    assert [in_flight(layout, stage) for stage in range(4)] == [4, 3, 2, 1]
    assert in_flight(Layout(pp=4, microbatches=8, schedule="gpipe"), 3) == 8
    with pytest.raises(LayoutError, match="stage"):
        in_flight(layout, 4)


def test_torch_sequence_parallel_keeps_the_gathered_inputs_whole():
    """Megatron keeps each projection input's shard and gathers it again in backward
    (34·sbh/t); keeping the gathered tensor instead leaves its 4·sbh whole."""
    megatron = split_bytes(2048, 6, 4, 24, tp=8, sp=True)
    kept_whole = split_bytes(2048, 6, 4, 24, tp=8, sp=True, regather=False)
    assert megatron == pytest.approx(2048 * 34 / 8)
    assert kept_whole == pytest.approx(2048 * (4 + 30 / 8))
