"""What fits: the largest batch or sequence length within a memory budget, per strategy."""

import streamlit as st

from demos.figures import fits_figure
from ui import demo_runner as demo
from ui import query

st.title("What fits in memory")
st.markdown(
    "Pick a memory budget. For each strategy the engine **predicts** the largest batch (or "
    "sequence length) whose training step fits, then **confirms** it with a real run, and "
    "reports the tokens per second it reaches. This is the sources' advice in numbers: "
    "spend the memory checkpointing frees on a larger batch or longer sequences, rather "
    "than cutting the maximum length."
)


@st.fragment
def what_fits_demo() -> None:
    lo, hi, step, default = demo.budget_range()
    left, right = st.columns(2)
    with left:
        budget_mib = query.int_slider("budget", "Memory budget (MiB, parameters included)", lo,
                                      hi, step, default, help=demo.budget_help())
    with right:
        vary = query.choice("grow", "Grow", ["batch", "seq"], "batch",
                            help="Which dimension to make as large as the budget allows.")
    kept = "seq" if vary == "batch" else "batch"  # the other one stays fixed
    config = demo.model_controls(("layers", "hidden", "heads", "vocab", kept), columns=5,
                                 defaults=demo.fit_default())
    field = "batch" if vary == "batch" else "seq_len"
    frame = demo.run_fits(config, demo.FIT_STRATEGIES, field, budget_mib * 2**20)
    if frame is None:
        return
    st.plotly_chart(fits_figure(frame, field, budget_mib * 2**20))
    st.table(demo.fits_table(frame, field), hide_index=True, border="horizontal")
    demo.measured_caption(demo.device().label(), list(frame["measured_by"]),
                          "Tokens per second from one timed step at the confirmed size.")
    demo.download(frame, f"what-fits-{field}-{budget_mib}MiB-{demo.config_slug(config)}")


what_fits_demo()
