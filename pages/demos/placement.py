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

st.markdown(
    t(
        "One more row asks torch's own SAC solver which ops inside each block to save: every "
        "block is checkpointed with a selective policy that keeps exactly the ops the solver "
        "picks for a share of the block's op memory, the largest share whose predicted peak "
        "fits the budget. The compiler's memory budget (torch.compile's "
        "activation_memory_budget) is not run here: one compile of this page's model takes "
        "from tens of seconds to minutes on this server, longer than a page answers, and on a "
        "CPU the live tracker cannot watch compiled code (Dynamo runs a function eagerly while "
        "a dispatch mode is active), so its peak could not be measured as the other rows' "
        "are. Its own page measures what compiled code saves for backward, on a smaller model."
    )
)


@st.fragment
def placement_demo() -> None:
    view.demo()


placement_demo()
page_link("how-many", label=t("Where the idea is taught"), icon=":material/school:")
page_link("compiler-budget", label=t("The compiler's memory budget"), icon=":material/memory:")
