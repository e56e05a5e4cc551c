"""The image model kinds (model_classes.unet, dit, vision_encoder) on tiny real models
(model_classes.tiny_pictures): which kind claims which config.json, that their blocks are
exactly what diffusers hands its checkpointing function, that the interval checkpoints
exactly every n-th block, and that what a kind says a block keeps is what that block's
activations take in a real step: the live bytes that checkpointing that one block frees
at the end of forward (demos.tracker.LiveTracker), in fp32 and bf16, with and without
LoRA (diffusers' add_adapter on the attention projections; PEFT on a ViT's); and that a
model built and measured under fake tensors (as the planner measures) keeps the same."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from demos.tracker import LiveTracker
from model_classes import diffusion
from model_classes.causal_lm_config import ClassConfigError
from model_classes.image_step import saved_step
from model_classes.kinds import kind_for
from model_classes.tiny_pictures import TINY, tiny_config
from model_classes.variant import Variant

warnings.filterwarnings("ignore")
DIFFUSERS = ("sd15-unet", "sdxl-unet", "sd3", "flux")
SIZE, BATCH = 128, 2
FP32, BF16_LORA = Variant(), Variant("bf16", lora_rank=4, lora_targets="attention")
VARIANTS = [Variant(), Variant("bf16"), Variant(lora_rank=4, lora_targets="attention"),
            BF16_LORA]
# One test process runs this module: a family's plain step (_plain_step) is measured once
# for the three sweeps below that start from it.
pytestmark = pytest.mark.xdist_group("image-kinds")


def _built(family: str, variant: Variant = FP32):
    cfg = tiny_config(family)
    kind = kind_for(cfg)
    config = kind.config(cfg)
    torch.manual_seed(0)
    model = kind.build(config, variant, blocks=len(kind.block_types(config)))
    return model, kind


@functools.cache
def _plain_step(family: str, variant: Variant = FP32):
    """What a real step of a freshly built model keeps, no block checkpointed (a forward
    only: the model is left as it was built). Read only by the tests."""
    model, kind = _built(family, variant)
    return kind.measure_step(model, BATCH, SIZE, variant)


def test_each_config_is_claimed_by_its_kind() -> None:
    expected = {"sd15-unet": "unet", "sdxl-unet": "unet", "sd3": "diffusion-transformer",
                "flux": "diffusion-transformer", "vit": "vision-encoder",
                "siglip": "vision-encoder", "dinov2": "vision-encoder",
                "clip-vision": "vision-encoder"}
    assert {family: kind_for(TINY[family]).name for family in TINY} == expected
    assert kind_for({"model_type": "llama"}).name == "causal-lm"
    assert kind_for({"model_type": "clip", "vision_config": {}}).name == "vision-encoder"
    with pytest.raises(ClassConfigError) as refused:
        kind_for({"_class_name": "AutoencoderKL"})
    assert refused.value.problem == "image-class"


@pytest.mark.parametrize("family", DIFFUSERS)
def test_the_blocks_are_what_diffusers_checkpoints(family: str) -> None:
    """The modules diffusers hands to its checkpointing function, in the order it hands
    them over, are the kind's blocks (read from the library, not from the kind)."""
    model, kind = _built(family)
    handed: list[torch.nn.Module] = []

    def record(module: torch.nn.Module, *args):
        handed.append(module)
        return module(*args)

    model.enable_gradient_checkpointing(gradient_checkpointing_func=record)
    kind.training_forward(model, 1, 64, FP32)(lambda: None)
    assert handed == kind.blocks(model)
    assert len(kind.block_names(model)) == len(handed)


@pytest.mark.parametrize("family", [*DIFFUSERS, "vit"])
def test_the_interval_checkpoints_exactly_every_nth_block(family: str, monkeypatch) -> None:
    """Every n-th block goes through torch's checkpoint (diffusers: through the function
    given to enable_gradient_checkpointing; transformers: every_n_layers), the others run
    plainly; and a checkpointed block keeps only what it is handed."""
    model, kind = _built(family)
    blocks = kind.blocks(model)
    checkpointed = kind.checkpoint(model, "every-n", n=3)
    assert checkpointed == tuple(range(0, len(blocks), 3))
    ran: list[int] = []
    original = torch.utils.checkpoint.checkpoint
    index = {id(b): i for i, b in enumerate(blocks)}

    def spy(function, *args, **kwargs):
        owner = getattr(function, "__self__", None) or getattr(
            getattr(function, "func", None), "__self__", None)
        ran.append(index.get(id(owner), -1))
        return original(function, *args, **kwargs)

    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", spy)
    if family == "vit":  # transformers bound torch's checkpoint when it was switched on
        kind.checkpoint(model, "every-n", n=3)
        assert [layer.gradient_checkpointing for layer in blocks] == [
            i % 3 == 0 for i in range(len(blocks))]
    step = kind.measure_step(model, BATCH, SIZE, FP32)
    if family != "vit":
        assert ran == list(checkpointed)
    plain = _plain_step(family)
    kept, whole = step.per_block(len(blocks)), plain.per_block(len(blocks))
    for i in range(len(blocks)):
        if i in checkpointed:
            assert kept[i] < whole[i] / 4, (i, kept[i], whole[i])
        else:
            assert kept[i] == whole[i]


def _held_at_end_of_forward(model, kind, variant: Variant) -> int:
    """Live bytes when the loss is computed (the parameters and inputs left out)."""
    model.zero_grad(set_to_none=True)
    forward = kind.training_forward(model, BATCH, SIZE, variant)
    tracker = LiveTracker("cpu")
    tracker.ignore(list(model.parameters()))
    with tracker:
        loss = forward(lambda: None)
        held = tracker.live_bytes
    del loss
    tracker.close()
    return held


def _only(model, kind, index: int) -> None:
    """Checkpointing on one block only, through the library's own switch."""
    if kind.name == "vision-encoder":
        kind.checkpoint(model, "every-layer")
        for i, layer in enumerate(kind.blocks(model)):
            layer.gradient_checkpointing = i == index
    else:
        model.enable_gradient_checkpointing(
            gradient_checkpointing_func=diffusion.BlockPicker(lambda i: i == index))


CASES = [(family, variant) for family in ("sd15-unet", "sdxl-unet", "sd3", "flux", "vit")
         for variant in VARIANTS]


@pytest.mark.parametrize("family,variant", CASES,
                         ids=[f"{f}-{v.precision}-r{v.lora_rank}" for f, v in CASES])
def test_a_blocks_bytes_are_what_checkpointing_it_frees(family: str, variant: Variant
                                                        ) -> None:
    """For a block at full resolution, one in the middle and the last: the live bytes at
    the end of forward drop, when only that block is checkpointed, by exactly what the
    kind says that block keeps plain less what it keeps checkpointed, the other blocks
    unchanged; outside the blocks only what the checkpoint holds besides (under LoRA a
    time embedding no plain block saves: nothing frozen needs it for a gradient)."""
    # the first block runs at full resolution: a UNet's down_blocks.0, a transformer's
    # first block
    model, kind = _built(family, variant)
    blocks = kind.blocks(model)
    plain = _plain_step(family, variant)
    plain_held = _held_at_end_of_forward(model, kind, variant)
    for index in sorted({0, len(blocks) // 2, len(blocks) - 1}):
        _only(model, kind, index)
        step = kind.measure_step(model, BATCH, SIZE, variant)
        held = _held_at_end_of_forward(model, kind, variant)
        before, after = plain.per_block(len(blocks)), step.per_block(len(blocks))
        freed = before[index] - after[index] - (step.outside() - plain.outside())
        assert plain_held - held == freed, (index, before, after)
        # under LoRA a UNet's blocks before its first adapter keep nothing either way:
        # nothing before them needs a gradient
        assert after[index] < before[index] or before[index] == after[index] == 0
        assert [b for i, b in enumerate(after) if i != index] == [
            b for i, b in enumerate(before) if i != index]
        assert step.outside() - plain.outside() <= (before[index] - after[index]) / 10
        kind.checkpoint(model, "none")


@pytest.mark.parametrize("family", list(TINY))
@pytest.mark.parametrize("variant", [FP32, BF16_LORA], ids=["fp32", "bf16-lora"])
def test_a_fake_step_keeps_what_a_real_one_does(family: str, variant: Variant) -> None:
    """Built and measured under FakeTensorMode (shapes only, as the planner measures a
    config at full size), per block, module and kind, to the byte."""
    cfg = tiny_config(family)
    kind = kind_for(cfg)
    config = kind.config(cfg)
    blocks = len(kind.block_types(config))
    real = _plain_step(family, variant)
    with FakeTensorMode():
        fake = kind.measure_step(kind.build(config, variant, blocks=blocks, fake=True),
                                 BATCH, SIZE, variant)
    assert dict(fake.cpu) == dict(real.cpu)


def test_lora_trains_only_the_adapters_on_the_attention() -> None:
    """diffusers' add_adapter as its LoRA scripts call it: the base frozen, adapters on
    the attention projections (a Flux model's joint ones too)."""
    model, _ = _built("flux", BF16_LORA)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    assert any(".attn.add_q_proj.lora_A" in n for n in trained)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())


def test_the_step_counts_what_a_checkpoint_holds_by_reference() -> None:
    """Flux hands its blocks the rotary embedding as a tuple, which torch's checkpoint
    keeps in its closure, not through the saved-tensor hooks: it is counted as shared
    whether the blocks are checkpointed or not."""
    model, kind = _built("flux")

    def shared(strategy: str) -> int:
        kind.checkpoint(model, strategy)
        step = kind.measure_step(model, BATCH, SIZE, FP32)
        return sum(v for (slot, module, *_), v in step.cpu.items() if module == "shared")

    assert shared("every-layer") == shared("none") > 0


def test_saved_step_returns_the_loss_for_a_backward() -> None:
    model, kind = _built("sd3")
    kind.checkpoint(model, "every-layer")
    step, loss = saved_step(model, kind.blocks(model), kind.training_forward(
        model, BATCH, SIZE, FP32))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    assert step.outside() > 0
