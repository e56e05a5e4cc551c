"""Best placement for this budget: where the checkpoints go on a model with unequal layers,
each method run for real beside the optimum and its frontier."""

import streamlit as st

from ui import placement_view as view
from ui.i18n import t
from ui.navigation import page_link

st.title(t("Best placement for this budget"))
st.markdown(
    t(
        "Give the training step a memory budget and ask where the checkpoints should go. "
        "The optimal placement (a dynamic program over the chain of layers) recomputes the "
        "fewest FLOPs that fit; Chen's greedy walk fills segments up to a size; √N segments, "
        "every layer and the first k layers are the rules of thumb. Each method's placement "
        "runs here, one real training step each: its measured peak against the FLOPs its "
        "backward recomputed, beside what the memory model predicts."
    )
)


@st.fragment
def placement_demo() -> None:
    view.demo()


placement_demo()
page_link("how-many", label=t("Where the idea is taught"), icon=":material/school:")
