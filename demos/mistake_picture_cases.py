"""Cases of the lab of mistakes (demos.mistakes) in image-model training, each measured
plain, wrong and fixed on this run with the lab's tiny image models
(model_classes.tiny_pictures, built by their model kinds): checkpointing left on while
sampling for validation, a training script's checkpointing flag parsed but never applied,
and checkpointing a frozen encoder that runs under no_grad.

What the libraries do when grad is off, read in their installed source:
- torch 2.13, torch/utils/checkpoint.py, `_checkpoint_without_reentrant_generator`:
  "if not torch.is_grad_enabled(): yield; return": the function just runs, nothing is
  saved and nothing recomputed;
- diffusers 0.42.1 calls its checkpointing function only
  "if torch.is_grad_enabled() and self.gradient_checkpointing" (unet_2d_blocks.py,
  transformer_2d.py, transformer_sd3.py, transformer_flux.py), so a pipeline's sampling,
  which runs under @torch.no_grad(), calls every block plainly;
- transformers 5.24, modeling_layers.GradientCheckpointingLayer: checkpoints only
  "if self.gradient_checkpointing and self.training and torch.is_grad_enabled()".
So under no_grad checkpointing neither saves memory nor costs time: there is nothing
saved for a backward to begin with.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from typing import Any

import torch

from demos.mistake_measuring import count_flops, measured, tracked, within_tolerance
from demos.mistake_records import Measured
from demos.tracker import LiveTracker
from model_classes.image_step import saved_step
from model_classes.kinds import ModelKind, kind_for
from model_classes.tiny_pictures import tiny_config
from model_classes.variant import Variant

SAMPLING = {"family": "sdxl-unet", "size": 64, "images": 4, "steps": 2}
TRAINING = {"family": "sdxl-unet", "size": 128, "batch": 2}
ENCODED = {"encoder": "clip-vision", "model": "sd3", "size": 128, "batch": 2}


def _build(family: str, **changes: Any) -> tuple[torch.nn.Module, ModelKind]:
    """A family's tiny model (its config changed by `changes`), fp32, full fine-tuning."""
    cfg = {**tiny_config(family), **changes}
    kind = kind_for(cfg)
    config = kind.config(cfg)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kind.build(config, Variant(), blocks=len(kind.block_types(config))), kind


def _checkpointed_blocks(model: torch.nn.Module) -> int:
    """Modules whose checkpointing flag is on (the libraries' own attribute)."""
    return sum(bool(getattr(m, "gradient_checkpointing", False)) for m in model.modules())


# ------------------------------------------------------------ sampling for validation

def _sample(model: torch.nn.Module, images: int, size: int, steps: int) -> torch.Tensor:
    """A validation sampling loop as a pipeline runs it under no_grad: the UNet called
    `steps` times on noisy latents, each step a plain update of them."""
    side = size // 8
    cfg = model.config
    g = torch.Generator().manual_seed(0)
    latents = torch.randn(images, cfg.in_channels, side, side, generator=g)
    text = torch.randn(images, 77, cfg.cross_attention_dim, generator=g)
    pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
    added = {"text_embeds": torch.randn(images, pooled, generator=g),
             "time_ids": torch.randn(images, 6, generator=g)}
    with torch.no_grad():
        for timestep in torch.linspace(999, 0, steps).long():
            noise = model(latents, timestep.expand(images), text, added_cond_kwargs=added,
                          return_dict=False)[0]
            latents = latents - noise / steps
    return latents.mean()


def run_sampling() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    """Plain: validation sampling of SAMPLING["images"] images at once under no_grad;
    wrong: the same with the training's checkpointing left on (no memory saved, no extra
    FLOPs); fixed: sampled one image at a time, which is what lowers sampling memory."""
    s = SAMPLING
    model, kind = _build(s["family"])
    model.eval()
    out = []
    for checkpointing, at_once in (("none", s["images"]), ("every-layer", s["images"]),
                                   ("none", 1)):
        kind.checkpoint(model, checkpointing)

        def step(tracker: LiveTracker, at_once: int = at_once) -> torch.Tensor:
            return torch.stack([_sample(model, at_once, s["size"], s["steps"])
                                for _ in range(s["images"] // at_once)]).mean()

        run = tracked(model, step)
        # the same arithmetic whether the images go at once or one by one: counted where
        # the batch is whole, to show checkpointing reran nothing
        flops = count_flops(lambda: _sample(model, s["images"], s["size"], s["steps"])) \
            if at_once == s["images"] else None
        out.append(measured(run, flops=flops, statistic=float(_checkpointed_blocks(model))))
    kind.checkpoint(model, "none")
    return out[0], out[1], out[2], {**s, "arch": f"{s['family']} (diffusers, no_grad)"}


def sampling_shows(m: Measured, plain: Measured) -> bool:
    """The peak did not drop with checkpointing on: it stayed the plain sampling's."""
    return within_tolerance(m.peak_bytes, plain.peak_bytes)


def _backward_counted(model: torch.nn.Module, kind: ModelKind,
                      forward: Callable[[Callable[[], None]], torch.Tensor],
                      tracker: LiveTracker, saved: list[int]) -> torch.Tensor:
    """Run `forward` counting what it saves for backward (all storages once, parameters
    apart: model_classes.image_step) into `saved`, then the backward."""
    counted, loss = saved_step(model, kind.blocks(model), forward)
    saved.append(sum(counted.cpu.values()))
    tracker.start_backward()
    loss.backward()
    return loss


# ------------------------------------------------------------ a flag parsed, never applied

def _train_step(model: torch.nn.Module, kind: ModelKind, batch: int, size: int,
                saved: list[int]) -> Callable[[LiveTracker], torch.Tensor]:
    """One training step of a tiny diffusion model; what it saves for backward (all
    storages once, parameters apart: model_classes.image_step) goes to `saved`."""
    def step(tracker: LiveTracker) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        forward = kind.training_forward(model, batch, size, Variant())  # type: ignore[attr-defined]
        return _backward_counted(model, kind, forward, tracker, saved)
    return step


def run_flag_not_applied() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    """A training script parses --gradient_checkpointing and never passes it to the model
    (wrong) against one that does (fixed): the bytes saved for backward show which."""
    setting = TRAINING
    parser = argparse.ArgumentParser()
    parser.add_argument("--gradient_checkpointing", action="store_true")
    out = []
    for argv, applies in (([], True), (["--gradient_checkpointing"], False),
                          (["--gradient_checkpointing"], True)):
        args = parser.parse_args(argv)
        model, kind = _build(setting["family"])
        if applies and args.gradient_checkpointing:
            model.enable_gradient_checkpointing()
        saved: list[int] = []
        step = _train_step(model, kind, setting["batch"], setting["size"], saved)
        run = tracked(model, step)
        out.append(measured(run, saved_bytes=saved[0] if saved else None,
                            statistic=float(_checkpointed_blocks(model))))
    return out[0], out[1], out[2], {**setting, "arch": f"{setting['family']} (diffusers)"}


def flag_shows(m: Measured, plain: Measured) -> bool:
    """Asked for, yet the bytes saved for backward stayed the plain step's."""
    return m.saved_bytes is not None and m.saved_bytes == plain.saved_bytes


# ------------------------------------------------------------ a frozen encoder under no_grad

def _conditioned_step(encoder: torch.nn.Module, model: torch.nn.Module, kind: ModelKind,
                      saved: list[int]) -> Callable[[LiveTracker], torch.Tensor]:
    """One training step of the trained model on the frozen encoder's tokens, the encoder
    run under no_grad as a training script encodes its conditions; what the step saves for
    backward goes to `saved`."""
    e = ENCODED
    g = torch.Generator().manual_seed(0)
    pixels = torch.randn(e["batch"], 3, 224, 224, generator=g)
    latents = torch.randn(e["batch"], 16, e["size"] // 8, e["size"] // 8, generator=g)
    pooled = torch.randn(e["batch"], 32, generator=g)
    timestep = torch.full((e["batch"],), 500.0)

    def step(tracker: LiveTracker) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            tokens = encoder(pixel_values=pixels).last_hidden_state

        def forward(loss_begins: Callable[[], None]) -> torch.Tensor:
            pred = model(hidden_states=latents, timestep=timestep, encoder_hidden_states=tokens,
                         pooled_projections=pooled, return_dict=False)[0]
            loss_begins()
            return (pred.float() - latents).pow(2).mean()

        return _backward_counted(model, kind, forward, tracker, saved)

    return step


def run_frozen_encoder() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    """A frozen image encoder (a tiny CLIP vision tower, its width the trained model's
    text width) conditions a trained diffusion transformer (a tiny SD3): plain, with
    checkpointing switched on in the encoder (wrong: under no_grad it keeps nothing for
    backward anyway), and in the trained model (fixed)."""
    e = ENCODED
    out = []
    for where in ("nowhere", "encoder", "model"):
        encoder, encoder_kind = _build(e["encoder"], hidden_size=32, num_attention_heads=2,
                                       intermediate_size=128)
        encoder.requires_grad_(False)
        model, kind = _build(e["model"])
        if where == "encoder":
            encoder_kind.checkpoint(encoder, "every-layer")
        elif where == "model":
            kind.checkpoint(model, "every-layer")
        saved: list[int] = []
        run = tracked(model, _conditioned_step(encoder, model, kind, saved))
        out.append(measured(run, saved_bytes=saved[0] if saved else None,
                            statistic=float(_checkpointed_blocks(encoder)
                                            + _checkpointed_blocks(model))))
    return out[0], out[1], out[2], {**e, "arch": "clip-vision (frozen) + sd3 (trained)"}


def frozen_shows(m: Measured, plain: Measured) -> bool:
    """Checkpointing on, yet the peak and the bytes saved stayed the plain step's."""
    return (within_tolerance(m.peak_bytes, plain.peak_bytes)
            and m.saved_bytes == plain.saved_bytes)
