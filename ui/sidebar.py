"""The sidebar every page shares: where the demos run, and the learner's progress."""

from __future__ import annotations

import streamlit as st
import torch
from streamlit.delta_generator import DeltaGenerator

from lessons.catalog import LESSONS
from ui.demo_runner import device as demo_device
from ui.device_words import device_text
from ui.i18n import language_picker, t
from ui.learner import keep_cookie
from ui.progress import visited_lessons

# The sidebar's own content (the language picker first) above the page list, so the
# picker shows without scrolling on a laptop (the list of 16 pages ends near 850 px), and
# page titles wrap instead of being cut ("1. Why training runs out of me..."): the label
# and the Markdown box inside it, which Streamlit 1.67 keeps on one line with an ellipsis.
# On a phone a table's cells take a smaller font and less padding, so a five-column table
# fits its 390 px (German headers break their long words at soft hyphens in the catalog).
# A metric's label, value and delta wrap instead of ending in "..." (Streamlit 1.67 keeps
# each on one line: four German metrics in a row at 1,400 px lost half their text), the
# value a little smaller so that it wraps less. Streamlit's "Press Enter to submit form"
# under a form's text field is English in every language (it has no translations): it is
# hidden, and the forms say it themselves (ui.i18n.enter_hint). A select box's chosen
# option wraps too (a lesson calculator's German precision was cut). On a phone Plotly's
# tool bar and Streamlit's table tool bar are hidden: with no hover they showed on a tap
# over the chart's title and over the heading above a table.
SIDEBAR_CSS = """<style>
[data-testid="stSidebarContent"] { display: flex; flex-direction: column; }
[data-testid="stSidebarHeader"] { order: 0; }
[data-testid="stSidebarUserContent"] { order: 1; padding-top: 0; padding-bottom: 1rem; }
[data-testid="stSidebarNav"] { order: 2; }
[data-testid="stSidebarNavLink"] { height: auto; min-height: 2rem; }
[data-testid="stSidebarNavLink"] span[label],
[data-testid="stSidebarNavLink"] span[label] * {
    white-space: normal; overflow: visible; text-overflow: clip; overflow-wrap: break-word;
}
[data-testid="stPageLink-NavLink"] { height: auto; }
[data-testid="stPageLink-NavLink"] *, [data-testid="stPageLink-NavLink"] p {
    white-space: normal !important; overflow: visible !important;
    text-overflow: clip !important; overflow-wrap: break-word;
}
[data-testid="stMetric"] label, [data-testid="stMetric"] label *,
[data-testid="stMetricValue"], [data-testid="stMetricValue"] *,
[data-testid="stMetricDelta"], [data-testid="stMetricDelta"] * {
    white-space: normal !important; overflow: visible !important;
    text-overflow: clip !important; overflow-wrap: break-word; height: auto !important;
}
[data-testid="stMetricValue"] { font-size: 1.875rem; line-height: 1.25; }
[data-testid="InputInstructions"] { display: none; }
[data-testid="stSelectbox"] [data-baseweb="select"] > div > div:first-child,
[data-testid="stSelectbox"] [data-baseweb="select"] > div > div:first-child * {
    white-space: normal !important; overflow: visible !important;
    text-overflow: clip !important; height: auto !important;
}
@media (max-width: 640px) {
    .modebar-container, [data-testid="stElementToolbar"] { display: none !important; }
    [data-testid="stTable"] th, [data-testid="stTable"] td {
        padding-left: 0.15rem; padding-right: 0.15rem; font-size: 0.8rem;
    }
}
</style>"""


def render_sidebar(slot: DeltaGenerator) -> None:
    """Fill the sidebar slot the router reserved; called after the page ran, so the
    progress already counts the lesson on screen."""
    device = demo_device()
    with slot:
        # Markdown, not st.html: a style-only st.html goes to a container a fragment's rerun
        # (a slider on a demo page) empties, and the page list came back above the picker.
        st.markdown(SIDEBAR_CSS, unsafe_allow_html=True)
        language_picker()
        st.markdown("**" + t("Demos run on") + "**")
        icon = ":material/developer_board:" if device.kind == "cuda" else ":material/computer:"
        st.markdown(f"{icon} {device_text(device)}")
        st.caption(f"PyTorch {torch.__version__}")
        visited = visited_lessons()
        st.markdown("**" + t("Lessons visited: {visited} / {total}", visited=len(visited),
                             total=len(LESSONS)) + "**")
        st.progress(len(visited) / len(LESSONS))
        keep_cookie()  # the learner id survives a reload and a new tab
