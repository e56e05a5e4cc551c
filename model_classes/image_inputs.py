"""One training step's inputs for the image kinds, as the training scripts make them:
random latents, timesteps and text embeddings for a diffusion model, pixels and labels
for a vision encoder. Random from a seeded generator on real tensors, empty under the
caller's FakeTensorMode (shapes only)."""

from __future__ import annotations

import torch

# a VAE of the Stable Diffusion family halves an image's side three times: latents at H/8
VAE_SCALE = 8
# the text tokens the training scripts encode: CLIP's 77 (SD 1.5, SDXL); SD3's CLIP and
# T5 embeddings joined, 77 + 77 (train_dreambooth_lora_sd3.py, max_sequence_length 77);
# Flux's T5 at 512 (train_dreambooth_lora_flux.py, max_sequence_length 512)
TEXT_TOKENS = {"UNet2DConditionModel": 77, "SD3Transformer2DModel": 154,
               "FluxTransformer2DModel": 512}


def _fake() -> bool:
    from torch._guards import detect_fake_mode

    return detect_fake_mode() is not None


class Inputs:
    """Random tensors of one step on `device`, reproducible from `seed` (drawn on the CPU,
    so a GPU run trains on the same numbers)."""

    def __init__(self, seed: int = 0, device: torch.device | str = "cpu") -> None:
        self.fake = _fake()
        self.device = torch.device(device)
        self.gen = None if self.fake else torch.Generator().manual_seed(seed)

    def normal(self, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        if self.fake:
            return torch.empty(shape, dtype=dtype, device=self.device)
        return torch.randn(shape, generator=self.gen).to(self.device, dtype)

    def integers(self, high: int, *shape: int) -> torch.Tensor:
        if self.fake:
            return torch.zeros(shape, dtype=torch.long, device=self.device)
        return torch.randint(0, high, shape, generator=self.gen).to(self.device)

    def uniform(self, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        if self.fake:
            return torch.empty(shape, dtype=dtype, device=self.device)
        return torch.rand(shape, generator=self.gen).to(self.device, dtype)

    def constant(self, value: float, *shape: int, dtype: torch.dtype = torch.float32
                 ) -> torch.Tensor:
        return torch.full(shape, value, dtype=dtype, device=self.device)


def device_of(model: torch.nn.Module) -> torch.device:
    """Where a model's weights are."""
    return next(model.parameters()).device


def latent_side(size: int) -> int:
    """The latents' side for an image side in pixels."""
    return size // VAE_SCALE
