"""The real model, live: the planner's model family as a tiny transformers model, one
training step, what its layers keep beside the planner's prediction and the lab model's."""

import streamlit as st

from ui import real_model_view as view
from ui.i18n import t

st.title(t("The real model"))
st.markdown(t(
    "The planner's formulas, checked against the libraries practitioners run. Pick a model "
    "family: the server builds a small model of it from the real transformers class, "
    "switches checkpointing on exactly as the code below does, trains one step and counts "
    "what each decoder layer keeps for backward. The **lab model** column is what the "
    "course's own model keeps at the same shapes: the gap is what transformers and PEFT "
    "add (a GELU written in Python, fp32 softmax copies in eager attention, fp32 copies "
    "of the adapters' inputs)."))


@st.fragment
def real_model_demo() -> None:
    view.show(view.controls())


real_model_demo()
