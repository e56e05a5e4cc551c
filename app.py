"""Gradient Checkpointing Lab: the router.

Every page is registered on every run (the verify page too, which learners reach by
a link), so a deep link such as /verify?id=... or /compare?layers=16 opens that page.
"""

import streamlit as st

from ui.demo_runner import learner_arrives
from ui.navigation import build_navigation
from ui.query import limit_notice
from ui.sidebar import render_sidebar

st.set_page_config(
    page_title="Gradient Checkpointing Lab",
    page_icon=":material/memory:",
    layout="wide",
)
learner_arrives()  # the demo engine's background work gives way to this page at once
navigation = st.navigation(build_navigation(), expanded=True)
limit_notice()  # a link too long for Streamlit: say why its settings were not used
sidebar = st.sidebar.container()
try:
    navigation.run()
finally:
    render_sidebar(sidebar)
