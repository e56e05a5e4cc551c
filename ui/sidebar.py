"""The sidebar every page shares: where the demos run, and the learner's progress."""

from __future__ import annotations

import streamlit as st
import torch
from streamlit.delta_generator import DeltaGenerator

from demos.device import DeviceInfo, detect_device
from lessons.catalog import LESSONS
from ui.progress import visited_lessons


@st.cache_resource
def server_device() -> DeviceInfo:
    """The device the live demos run on, detected once per server process."""
    return detect_device()


def render_sidebar(slot: DeltaGenerator) -> None:
    """Fill the sidebar slot the router reserved; called after the page ran, so the
    progress already counts the lesson on screen."""
    device = server_device()
    with slot:
        st.markdown("**Demos run on**")
        icon = ":material/developer_board:" if device.kind == "cuda" else ":material/computer:"
        st.markdown(f"{icon} {device.label()}")
        st.caption(f"PyTorch {torch.__version__}")
        visited = visited_lessons()
        st.markdown(f"**Lessons visited: {len(visited)} / {len(LESSONS)}**")
        st.progress(len(visited) / len(LESSONS))
