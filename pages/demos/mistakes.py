"""Why didn't it help? The classic checkpointing mistakes, each run the wrong and the fixed
way on the lab's model and measured."""

import streamlit as st

from ui import mistakes_view
from ui.i18n import t

st.title(t("Why didn't it help? The classic mistakes"))
st.markdown(t(
    "Pick what you saw. Each case runs three times on the lab's own small model, live: "
    "without checkpointing, the wrong way and the fixed way, and shows what this run "
    "measured, why it happens, the one-line fix and what the library itself said."))


@st.fragment
def mistakes_lab() -> None:
    mistakes_view.show_case(mistakes_view.pick_case())


mistakes_lab()
