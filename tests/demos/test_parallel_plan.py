"""The planner across GPUs (planner.parallel_plan, `python -m planner --tp ...`): its
per-GPU bytes agree with memory.parallel for given layouts, the single-GPU planner for
FSDP alone, and the recommendation adds parallelism in practitioners' order."""

from __future__ import annotations

import json

import pytest

from memory import parallel as M
from memory.architectures import PRESETS
from memory.footprint import STRATEGIES, PlannerInputs, activations, peak_bytes
from planner import parallel_plan as PP
from planner.cli import main
from planner.parallel_code import experts_words, parallel_code

P8 = PlannerInputs(PRESETS["llama-3.1-8b"], seq=8192, batch=1, accumulation=8)


def _cli(capsys, *flags: str) -> dict:
    assert main(["--model", "llama-3.1-8b", "--seq", "8192", "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_fsdp_alone_is_the_single_gpu_planners_sharding():
    for strategy in STRATEGIES:
        row = PP.gpu_row(P8, M.Layout(dp=8), strategy)
        assert row.peak == pytest.approx(peak_bytes(P8.with_(shards=8), strategy), rel=1e-9)


def test_checkpoints_split_as_memory_parallel_says():
    arch = P8.arch
    layout = M.Layout(tp=4, sp=True, pp=4, microbatches=8, dp=1)
    p = P8.with_(chunked_loss=True)  # a small loss: the first stage is the most loaded
    row = PP.gpu_row(p, layout, "every-layer")
    per_layer = M.input_bytes(8192, arch.hidden, tp=4, sp=True, act_bytes=P8.residual_bytes)
    expected = per_layer * M.stage_layers(arch.layers, 4) * M.in_flight(layout)
    assert row.kept == pytest.approx(expected, rel=1e-9)
    assert row.stage == "first"
    # without sequence parallelism the layer inputs stay whole on every GPU
    plain_tp = PP.gpu_row(p, M.Layout(tp=4, pp=4, microbatches=8), "every-layer")
    assert plain_tp.kept == pytest.approx(4 * row.kept, rel=1e-9)
    # the whole loss on the last stage makes it the most loaded, with one micro-batch
    last = PP.gpu_row(P8, layout, "every-layer")
    assert last.stage == "last"
    assert last.kept == pytest.approx(per_layer * M.stage_layers(arch.layers, 4), rel=1e-9)


@pytest.mark.parametrize("sp", [False, True])
def test_plain_layers_split_by_korthikanti_ratio(sp):
    one = PP.gpu_row(P8, M.Layout(), "none").kept
    four = PP.gpu_row(P8, M.Layout(tp=4, sp=sp), "none").kept
    # fused attention: no scores; Table 2 without them: sbh(10 + 24/t), or 34/t with sp
    assert four / one == pytest.approx((34 / 4 if sp else 10 + 24 / 4) / 34, rel=1e-9)


def test_schedules_and_context_parallelism():
    p = P8.with_(chunked_loss=True)
    one_f = PP.gpu_row(p, M.Layout(pp=4, microbatches=8), "every-layer")
    gpipe = PP.gpu_row(p, M.Layout(pp=4, schedule="gpipe", microbatches=8), "every-layer")
    assert gpipe.kept == pytest.approx(one_f.kept * 8 / 4, rel=1e-9)
    single = activations(P8, "every-layer").kept
    cp = PP.gpu_row(P8, M.Layout(cp=2), "every-layer")
    assert cp.kept == pytest.approx(single / 2, rel=1e-9)


def test_cli_json_agrees_with_the_layout(capsys):
    data = _cli(capsys, "--gpus", "16", "--tp", "4", "--sp", "--pp", "2",
                "--schedule", "gpipe", "--microbatches", "4")
    par = data["parallel"]
    assert par["chosen_by"] == "flags"
    assert par["layout"]["dp"] == 2 and par["layout"]["nodes"] == 2
    layout = M.Layout(tp=4, sp=True, pp=2, schedule="gpipe", microbatches=4, dp=2)
    p = P8.with_(shards=16)
    for strategy, row in par["strategies"].items():
        expected = PP.gpu_row(p, layout, strategy)
        assert row["activations_kept_bytes"] == pytest.approx(expected.kept, rel=1e-12)
        assert row["peak_bytes"] == pytest.approx(expected.peak, rel=1e-12)
        assert row["fits"] == expected.fits
        assert row["layout"]["tp"] == 4 and row["layout"]["pp"] == 2
    compile(par["code"]["pytorch"], "<plan>", "exec")
    assert "ScheduleGPipe" in par["code"]["pytorch"]


@pytest.mark.parametrize("flags, message", [
    (("--sp",), "--sp"), (("--gpus", "6", "--tp", "4"), "multiple of"),
    (("--tp", "0"), "out of range"), (("--ep", "2"), "--ep"),
    (("--pp", "2", "--schedule", "interleaved", "--microbatches", "3"), "divisible"),
])
def test_bad_layouts_get_one_line(capsys, flags, message):
    assert main(["--model", "llama-3.1-8b", *flags]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_recommendation_adds_parallelism_in_practitioners_order():
    from planner.recommend import recommend_across

    p70 = PlannerInputs(PRESETS["llama-3.1-70b"], seq=8192, batch=1, accumulation=8)
    steps = recommend_across(p70.with_(shards=16, tuning="lora")).layout_steps
    actions = [s.action for s in steps]
    assert actions[0] == "fsdp" and steps[0].layout.dp == 16
    tps = [s.layout.tp for s in steps if s.action == "tp"]
    assert tps == sorted(tps) and max(tps, default=1) <= 8
    # each step holds no more per GPU than the one before, and only the last fits
    peaks = [s.row.peak for s in steps]
    assert peaks == sorted(peaks, reverse=True)
    assert [s.row.fits for s in steps] == [False] * (len(steps) - 1) + [True]
    kinds = [k for k, _ in PP.candidates(p70, 16, 8)]
    assert kinds.index("tp") < kinds.index("pp") and "cp" not in kinds
    # long sequences: context parallelism after tensor and before pipeline parallelism
    long = [k for k, _ in PP.candidates(p70.with_(seq=65536), 16, 8)]
    assert long.index("tp") < long.index("cp") < long.index("pp")
    # a model that fits with FSDP alone stops there
    small = recommend_across(P8.with_(shards=16)).layout_steps
    assert [s.action for s in small] == ["fsdp"] and small[0].row.fits


def test_done_when_command(capsys):
    assert main(["--model", "llama-3.1-70b", "--seq", "8192", "--gpu", "h100",
                 "--gpus", "16", "--gpus-per-node", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    par = data["parallel"]
    # the layouts tried are on the 16 GPUs asked for; with AdamW none fits there, so the
    # plan is the fewest GPUs that fit, the same one as the recommendation's
    assert {s["layout"]["gpus"] for s in par["steps"]} == {16}
    assert not any(s["fits"] for s in par["steps"])
    assert par["fits"] and par["gpus"] == par["fits_on"]["gpus"] == data[
        "recommendation"]["gpus"] > 16
    assert par["fits_on"]["changes"] == ["more-gpus"]
    assert set(par["strategies"]) == set(STRATEGIES)
    assert par["code"] == data["recommendation"]["code"]
    assert "fsdp=True" in par["code"]["huggingface"]


def test_code_checkpoints_the_plans_blocks():
    layout = M.Layout(tp=2, sp=True, pp=2, microbatches=4)
    some = parallel_code(P8.with_(strategy="some-layers", some_layers=5), layout)
    # 5 of 32 layers priced as 2.5 in each of the two stages: 3 checkpointed in each
    assert "if i < 3:" in some and "Schedule1F1B(runs[0]" in some
    alone = parallel_code(P8.with_(strategy="some-layers", some_layers=5), M.Layout(tp=2))
    assert "if i < 5:" in alone and "class Stage" not in alone
    interleaved = M.Layout(pp=2, microbatches=4, schedule="interleaved", chunks=2)
    assert "ScheduleInterleaved1F1B(runs," in parallel_code(P8, interleaved)
    assert "checkpoint_wrapper(block)" not in parallel_code(P8.with_(strategy="none"), layout)


def test_code_says_what_it_does_with_the_experts():
    """The printed code keeps a mixture-of-experts block whole on every tensor-parallel
    GPU (its experts are 3D parameters DTensor's styles do not split) and says so in every
    plan; for a model with experts it says how that differs from the figures: t times the
    experts' state, and FSDP gathering all of a layer's experts where expert parallelism
    would gather 1/ep of them."""
    moe = P8.with_(arch=P8.arch.with_(expert_params=10**9, expert_block=10**7))
    whole = "stays whole on every tensor-parallel GPU"
    assert whole in experts_words(P8, M.Layout(tp=2))
    assert "planner's figures" not in experts_words(P8, M.Layout(tp=2))  # dense model
    assert "planner's figures" not in experts_words(moe, M.Layout(dp=8))
    assert "holds 4 times the experts'" in experts_words(moe, M.Layout(tp=4, dp=2))
    both = experts_words(moe, M.Layout(tp=2, dp=4, ep=2))
    assert "holds 2 times" in both and "gather the 1/2 of them" in both
    assert "times the experts" not in experts_words(moe, M.Layout(dp=8, ep=4))
    code = parallel_code(moe.with_(strategy="every-layer"), M.Layout(tp=2, dp=4, ep=2))
    assert 'if hasattr(block.mlp, "experts"):' in code
    comments = " ".join(line.strip().removeprefix("# ") for line in code.splitlines()
                        if line.strip().startswith("#"))
    assert both in comments
    de = experts_words(moe, M.Layout(tp=2, dp=4, ep=2), "de")
    assert "das 2-Fache" in de and "1/2" in de


@pytest.mark.parametrize("code", ["en", "de"])
def test_code_refuses_a_block_without_llamas_attention_names(code):
    """A block whose attention has no q_proj, k_proj, v_proj and o_proj (GPT-2's c_attn,
    DeepSeek's latent attention) is refused with one message naming its class, before
    anything is split; a Llama block passes that check."""
    import torch
    from transformers import GPT2LMHeadModel

    from tests.demos.tiny_hf import TINY

    namespace: dict = {}
    exec(parallel_code(P8.with_(strategy="every-layer"), M.Layout(tp=2), code), namespace)  # noqa: S102
    block = GPT2LMHeadModel(TINY["gpt2"]()).transformer.h[0]
    with pytest.raises(NotImplementedError, match="^GPT2Block: .*q_proj, k_proj, v_proj") as e:
        namespace["tensor_parallel"](block, None)
    assert ("dieser Code teilt" in str(e.value)) == (code == "de")
    llama = torch.nn.Module()
    llama.self_attn = torch.nn.Module()
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        setattr(llama.self_attn, name, torch.nn.Linear(2, 2))
    with pytest.raises(AttributeError):  # past the check: no mlp on this stand-in
        namespace["tensor_parallel"](llama, None)


def test_code_offers_transformers_route_where_the_class_has_a_plan():
    """transformers' tensor parallelism is printed for a family whose config class holds
    a base_model_tp_plan (Llama; GPT-2 has none), with tensor parallelism alone and a
    checkpointing activation_checkpointing_enable applies (its deprecated alias
    gradient_checkpointing_enable never)."""
    tp = M.Layout(tp=2)
    assert "DistributedConfig(tp_size=TP, fsdp_size=DP)" in parallel_code(P8, tp)
    assert "activation_checkpointing_enable" in parallel_code(P8, tp)
    assert "gradient_checkpointing" not in parallel_code(P8, tp)
    assert "activation_checkpointing_enable" not in parallel_code(P8.with_(strategy="none"), tp)
    gpt2 = PlannerInputs(PRESETS["gpt2"], strategy="every-layer")
    assert "load_with_transformers_tp" not in parallel_code(gpt2, tp)
    assert "load_with_transformers_tp" not in parallel_code(
        P8.with_(strategy="some-layers"), tp)
    assert "load_with_transformers_tp" not in parallel_code(
        P8, M.Layout(tp=2, pp=2, microbatches=4))


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_code_comments_say_checkpointed_only_when_the_plan_checkpoints(code):
    """The comment over the loop over blocks says they are checkpointed only when the code
    under it wraps them in checkpoint_wrapper; a plan without checkpointing says it keeps
    every block's activations, and a plan of two-layer segments or a compiler budget, which
    the code checkpoints block by block, says that the code keeps the every-layer row."""
    from i18n import gettext

    layout = M.Layout(tp=2, sp=True)
    said = gettext(code, "Tensor parallelism inside each block, then the block checkpointed "
                         "(its input kept, the rest recomputed in backward), then sharded "
                         "with FSDP; the root last.")
    plain = gettext(code, "Tensor parallelism inside each block, then sharded with FSDP; the "
                          "root last. This plan checkpoints no block: every block keeps its "
                          "activations for backward.")
    assert plain != said
    for strategy in STRATEGIES:
        printed = " ".join(line.strip().lstrip("#").strip()
                           for line in parallel_code(P8.with_(strategy=strategy), layout,
                                                     code).splitlines())
        wraps = "checkpoint_wrapper(block)" in printed
        assert (said in printed) == wraps and (plain in printed) == (not wraps), strategy
        # a plan the code can only approximate block by block says what the code keeps
        for approximated, note in NEAREST.items():
            assert (gettext(code, note) in printed) == (strategy == approximated), strategy


NEAREST = {
    "two-layer": "The plan's two-layer segments are checkpointed here block by block, their "
                 "nearest form inside the FSDP units (a checkpoint around two units would "
                 "gather both at once): this code keeps what the table's every-layer row "
                 "counts.",
    "budget": "The plan's compiler budget is replaced here by a checkpoint on every block: "
              "this code keeps what the table's every-layer row counts.",
}


def test_code_comments_follow_the_language():
    layout = M.Layout(tp=2, sp=True)
    english = parallel_code(P8, layout, "en")
    german = parallel_code(P8, layout, "de")
    assert "Tensor parallelism inside each block" in english
    assert "Tensorparallelität in jedem Block" in german
    assert "Song song tensor trong mỗi khối" in parallel_code(P8, layout, "vi")


def test_the_words_on_the_experts_follow_the_installed_class_s_plan(monkeypatch):
    """Where the class's tensor-parallel plan names the experts (transformers 5.24's
    Mixtral), transformers' own route splits them as the figures do; where it leaves them
    out (5.25), the words say that route keeps them whole too; a class without a plan is
    not named."""
    import transformers

    from planner import parallel_code

    moe = P8.with_(arch=P8.arch.with_(family="mixtral", expert_params=10**9,
                                      expert_block=10**7))
    layout = M.Layout(tp=2, dp=4)
    monkeypatch.setattr(parallel_code, "tp_plan", lambda family: (
        "layers.*.self_attn.q_proj", "layers.*.mlp.experts.gate_up_proj"))
    words = experts_words(moe, layout)
    assert "as transformers' from_pretrained with a DistributedConfig splits them" in words
    assert "own route" not in words
    monkeypatch.setattr(parallel_code, "tp_plan", lambda family: ("layers.*.self_attn.q_proj",))
    words = experts_words(moe, layout)
    assert (f"transformers {transformers.__version__}'s own route keeps them whole as well"
            in words and "holds 2 times the experts'" in words)
    assert "splits them" not in words
    assert "transformers 5" in experts_words(moe, layout, "de")
    monkeypatch.setattr(parallel_code, "tp_plan", lambda family: ())
    assert "own route" not in experts_words(moe, layout)


def test_code_ends_with_the_torchrun_command_for_the_plans_nodes():
    """One node: one torchrun over its GPUs; 16 GPUs on nodes of 8: one command on each
    node (--nnodes 2 --nproc_per_node 8, its NODE_RANK, the first's address); nodes of 4:
    four of them. The script's own run is started by main() under that command. (Some
    layers checkpointed: no transformers route, which reads the class's plan.)"""
    p = P8.with_(strategy="some-layers")
    one = parallel_code(p, M.Layout(tp=8, sp=True))
    assert "# launch with: torchrun --nproc_per_node 8 train.py" in one
    two = parallel_code(p, M.Layout(tp=8, sp=True, dp=2), per_node=8)
    assert "torchrun --nnodes 2 --nproc_per_node 8" in two and "--node_rank $NODE_RANK" in two
    assert "torchrun --nnodes 4 --nproc_per_node 4" in parallel_code(
        p, M.Layout(tp=4, sp=True, dp=4), per_node=4)
    assert 'if __name__ == "__main__":\n    main(train_dataset)' in one
