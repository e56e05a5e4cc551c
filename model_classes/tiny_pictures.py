"""The image models the course teaches, as tiny real models: config.json dicts in the
shapes of their families (the same block types, levels and ratios, a few layers, a few
dozen channels), built by their model kinds (model_classes.kinds) from the real diffusers
and transformers classes with random weights; nothing is downloaded. The lab's /pictures
page trains them one step (demos.picture_models), the tests check the kinds on them.

Their full-size counterparts, for the shapes: SD 1.5's UNet (block_out_channels 320, 640,
1280, 1280; attention at the three highest resolutions; 8 heads), SDXL's (320, 640, 1280;
no attention at full resolution, transformer depths 2 and 10), SD3 Medium's transformer
(24 joint blocks), FLUX.1-dev's (19 double-stream and 38 single-stream blocks, guidance
distilled), ViT-B/16 (12 layers, 16-pixel patches), SigLIP's and DINOv2's vision towers
(16- and 14-pixel patches) and CLIP's.
"""

from __future__ import annotations

from typing import Any

_TEXT = 32  # the text embeddings' width (CLIP's 768, T5's 4,096 at full size)

TINY: dict[str, dict[str, Any]] = {
    "sd15-unet": {
        "_class_name": "UNet2DConditionModel", "sample_size": 32, "in_channels": 4,
        "out_channels": 4, "block_out_channels": [16, 32, 64, 64], "layers_per_block": 2,
        "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                             "CrossAttnDownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                           "CrossAttnUpBlock2D"],
        "attention_head_dim": 2, "cross_attention_dim": _TEXT, "norm_num_groups": 8},
    "sdxl-unet": {
        "_class_name": "UNet2DConditionModel", "sample_size": 32, "in_channels": 4,
        "out_channels": 4, "block_out_channels": [16, 32, 64], "layers_per_block": 2,
        "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
        "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
        "transformer_layers_per_block": [1, 1, 3], "attention_head_dim": [1, 2, 4],
        "cross_attention_dim": _TEXT, "norm_num_groups": 8, "use_linear_projection": True,
        "addition_embed_type": "text_time", "addition_time_embed_dim": 8,
        "projection_class_embeddings_input_dim": 6 * 8 + _TEXT},
    "sd3": {
        "_class_name": "SD3Transformer2DModel", "sample_size": 32, "patch_size": 2,
        "in_channels": 16, "out_channels": 16, "num_layers": 4, "attention_head_dim": 16,
        "num_attention_heads": 2, "joint_attention_dim": _TEXT, "caption_projection_dim": 32,
        "pooled_projection_dim": _TEXT, "pos_embed_max_size": 96},
    "flux": {
        "_class_name": "FluxTransformer2DModel", "patch_size": 1, "in_channels": 64,
        "num_layers": 2, "num_single_layers": 4, "attention_head_dim": 16,
        "num_attention_heads": 2, "joint_attention_dim": _TEXT,
        "pooled_projection_dim": _TEXT, "guidance_embeds": True, "axes_dims_rope": [4, 6, 6]},
    "vit": {
        "model_type": "vit", "architectures": ["ViTForImageClassification"],
        "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "intermediate_size": 256, "image_size": 224, "patch_size": 16, "num_labels": 10},
    "siglip": {
        "model_type": "siglip", "vision_config": {
            "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
            "intermediate_size": 256, "image_size": 224, "patch_size": 16}},
    "dinov2": {
        "model_type": "dinov2", "hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "mlp_ratio": 4, "image_size": 518, "patch_size": 14},
    "clip-vision": {
        "model_type": "clip_vision_model", "hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "intermediate_size": 256, "image_size": 224,
        "patch_size": 16},
}


def tiny_config(family: str) -> dict[str, Any]:
    """A family's tiny config.json (a copy)."""
    import copy

    return copy.deepcopy(TINY[family])
