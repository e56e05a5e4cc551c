"""One plan across many GPUs (planner.recommend.recommend_across, read through the
planner's report object as the page and `python -m planner --json` give it): the
recommendation, its steps, the layout section (`parallel`) and the printed code describe
the same plan; when nothing fits on the GPUs given it says so and what would; the layout
search tries what lesson 8 teaches where it applies (context parallelism only from 32,768
tokens, expert parallelism for a mixture of experts); no plan pairs bitsandbytes' 8-bit
AdamW with FSDP2. Cases: Llama 3.1 70B (the preset) on 8 and 16 H100s at 4,096 and
65,536 tokens, Mixtral 8x22B on 16 and 32 and Mistral-Small-24B on TP 8 + SP + 2 stages
(their published config.json values, tests/demos/hf_configs)."""

from __future__ import annotations

import pytest

from memory import parallel as M
from memory.architectures import PRESETS
from memory.footprint import PlannerInputs
from memory.hardware import GPUS
from memory.hf_config import architecture
from planner import parallel_plan as PP
from planner.cli import report
from tests.demos.class_fixtures import load

H100 = GPUS["h100"].bytes
P70 = PlannerInputs(PRESETS["llama-3.1-70b"], seq=4096, gpu_bytes=H100, tuning="full")


class _Experts:
    """A mixture of experts' class as the planner reads it for a layout (its experts per
    layer and per token), with the course's formula for its layers (no fits)."""

    family, layer_types = "mixtral", ()

    def __init__(self, experts: tuple[int, int]) -> None:
        self.experts = experts

    def fit(self, key: tuple) -> None:
        return None


@pytest.fixture(scope="module")
def mixtral() -> PlannerInputs:
    from planner.class_memory import MeasuredClass  # the experts counted on the class

    arch = MeasuredClass(load("mixtral-8x22b")).architecture()
    return PlannerInputs(arch, seq=4096, gpu_bytes=H100, source=_Experts((8, 2)))


def _one_plan(data: dict) -> None:
    """The headline's plan is the layout section's and the code's."""
    rec, par = data["recommendation"], data["parallel"]
    assert par["layout"] == rec["layout"] and par["strategy"] == rec["strategy"]
    assert par["peak_bytes"] == rec["peak_bytes"] and par["fits"] == rec["fits"]
    assert par["gpus"] == rec["gpus"] == rec["settings"]["gpus"]
    row = par["strategies"][rec["strategy"]]
    assert row["peak_bytes"] == rec["peak_bytes"] and row["fits"] == rec["fits"]
    assert par["code"] == rec["code"]
    for plan in (rec, *rec["alternatives"]):  # no 8-bit AdamW under FSDP2 anywhere
        assert not (plan["settings"]["gpus"] > 1 and plan["settings"]["optimizer"] == "adamw-8bit")
        assert "adamw_8bit" not in (plan["code"].get("huggingface") or "")
    if not rec["fits"]:
        assert rec["code"] == {}
    elif rec["code"]["huggingface"] is None:  # a layout beyond FSDP: PyTorch's code
        assert "fully_shard" in rec["code"]["pytorch"]
    else:
        assert "fsdp=True" in rec["code"]["huggingface"]


@pytest.mark.parametrize("gpus", [8, 16])
def test_llama_70b_full_on_h100s_says_nothing_fits_and_what_would(gpus):
    """AdamW's state (16 bytes a parameter) over 8 or 16 H100s leaves no room on any
    layout: the page says so, the layouts it tried are on the GPUs given (no context
    parallelism at 4,096 tokens), and it recommends the fewest GPUs that fit, with LoRA
    as the other choice; the printed code is that plan's."""
    data = report(P70.with_(shards=gpus))
    _one_plan(data)
    rec, par = data["recommendation"], data["parallel"]
    assert rec["fits"] and rec["steps"][0]["action"] == "more-gpus"
    assert rec["steps"][0]["changes_the_task"] and rec["gpus"] > gpus
    assert [a["steps"][0]["action"] for a in rec["alternatives"]] == ["lora"]
    tried = [s["action"] for s in par["steps"]]
    assert tried[0] == "fsdp" and "tp" in tried and "cp" not in tried
    assert {s["layout"]["gpus"] for s in par["steps"]} == {gpus}
    assert not any(s["fits"] for s in par["steps"])
    assert par["reason"]["id"] == "none-fits" and par["fits_on"]["gpus"] == rec["gpus"]


def test_a_learners_8bit_adamw_becomes_adamw_across_gpus():
    """8-bit AdamW chosen by the learner on 16 GPUs: the plan's first step switches to
    torch's AdamW and says why; nothing in it is 8-bit."""
    data = report(P70.with_(shards=16, optimizer="adamw-8bit", tuning="lora"))
    _one_plan(data)
    steps = data["recommendation"]["steps"]
    assert steps[0]["action"] == "sharded-adamw"
    assert steps[0]["reason"] == "eight-bit-adamw-not-sharded"
    assert data["recommendation"]["settings"]["optimizer"] == "adamw"


def test_long_sequences_try_context_parallelism_short_ones_do_not():
    """At 65,536 tokens the search tries context parallelism on 16 GPUs (after tensor
    parallelism inside a node); at 4,096 it never does."""
    data = report(P70.with_(shards=16, seq=65536))
    _one_plan(data)
    tried = [s["action"] for s in data["parallel"]["steps"]]
    assert tried.index("cp") > tried.index("tp") and "cp" in tried
    assert all(s["layout"]["tp"] == 8 for s in data["parallel"]["steps"] if s["action"] == "cp")
    short = [kind for kind, _ in PP.candidates(P70.with_(seq=32767), 16, 8)]
    assert "cp" not in short and "cp" in [k for k, _ in PP.candidates(P70.with_(seq=32768), 16, 8)]


@pytest.mark.parametrize("gpus", [16, 32])
def test_mixtral_8x22b_tries_expert_parallelism(mixtral, gpus):
    """Mixtral 8x22B (141B parameters, 8 experts a layer): expert parallelism is among the
    layouts tried, after tensor parallelism and before pipeline stages, each size dividing
    the 8 experts and the data-parallel GPUs left beside tensor parallel 8 (2 of 16, 4 of
    32); AdamW's state does not fit on 16 or 32 H100s, and the plan says what would."""
    data = report(mixtral.with_(shards=gpus))
    _one_plan(data)
    par = data["parallel"]
    tried = [s["action"] for s in par["steps"]]
    assert tried.index("tp") < tried.index("ep") < tried.index("pp")
    assert all(8 % s["layout"]["ep"] == 0 for s in par["steps"])
    assert max(s["layout"]["ep"] for s in par["steps"]) == gpus // 8
    assert not any(s["fits"] for s in par["steps"])
    assert data["recommendation"]["gpus"] > gpus and par["experts"] is not None


def test_mistral_small_on_the_learners_layout():
    """Mistral-Small-24B with tensor parallel 8, sequence parallelism and 2 pipeline
    stages on 16 GPUs: the headline is that layout's plan (no checkpointing fits there),
    the row marked recommended is it, and the code is the layout's, in two 1F1B stages,
    with no block checkpointed."""
    p = PlannerInputs(architecture(load("mistral-small-24b")), seq=4096, gpu_bytes=H100, shards=16)
    layout = M.Layout(tp=8, sp=True, pp=2, microbatches=8, dp=1)
    data = report(p, layout=layout)
    _one_plan(data)
    rec, par = data["recommendation"], data["parallel"]
    assert par["chosen_by"] == "flags" and par["reason"]["id"] == "yours"
    assert (rec["layout"]["tp"], rec["layout"]["pp"], rec["layout"]["sp"]) == (8, 2, True)
    assert rec["strategy"] == "none" and rec["fits"]
    assert rec["title"] == data["recommended_row"] == "none"  # the table is on that layout
    code = rec["code"]["pytorch"]
    assert "Schedule1F1B" in code and "checkpoint_wrapper(block)" not in code
    assert rec["code"]["huggingface"] is None
    # the recommended layout for the same model: FSDP alone, checkpointing some layers
    auto = report(p)
    _one_plan(auto)
    assert [s["action"] for s in auto["parallel"]["steps"]] == ["fsdp"]
    assert auto["recommended_row"] == auto["recommendation"]["strategy"] == "some-layers"
