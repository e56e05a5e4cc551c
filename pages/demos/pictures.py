"""Pictures at high resolution: an image model's activations measured live, per block and
as the image grows, with and without the library's checkpointing."""

import streamlit as st

from ui import picture_view as view
from ui.i18n import t
from ui.navigation import page_link

st.title(t("Pictures at high resolution"))
st.markdown(t(
    "Fine-tuning an image model on large pictures (LoRA of SDXL, SD3 or Flux at 1,024 px, "
    "a ViT, SigLIP or DINOv2 at high resolution) is where activation maps overflow GPU "
    "memory: a feature map holds C·H·W numbers per image and a vision transformer "
    "(H/p)·(W/p) tokens, so doubling the image's side makes both four times larger, and "
    "an attention that keeps its scores sixteen times. Pick a family: the server builds a "
    "small model of it from the real diffusers or transformers class, switches "
    "checkpointing on exactly as the code below does, trains one step and measures what "
    "each block keeps for backward."))


@st.fragment
def pictures_demo() -> None:
    view.show(view.controls())


pictures_demo()
page_link("image-models", label=t("Where the idea is taught"), icon=":material/school:")
