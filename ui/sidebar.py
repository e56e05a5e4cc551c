"""The sidebar every page shares: where the demos run, and the learner's progress."""

from __future__ import annotations

import streamlit as st
import torch
from streamlit.delta_generator import DeltaGenerator

from demos.engine.device import DeviceInfo
from i18n import N_
from lessons.catalog import LESSONS
from ui.demo_runner import device as demo_device
from ui.i18n import language_picker, t, tn
from ui.learner import keep_cookie
from ui.progress import visited_lessons

# The engine names a CPU run's reason in English (demos.engine.device.detect_device): worded here.
_CPU_REASONS = (N_("no GPU found"), N_("CPU chosen"))


def device_text(device: DeviceInfo) -> str:
    """The device the demos run on, in the session's language."""
    if device.kind == "cuda":
        if not device.total_bytes:
            return device.name
        return t("{name} ({size:.1f} GiB)", name=device.name, size=device.total_bytes / 2**30)
    return tn("CPU ({reason}), {count} core", "CPU ({reason}), {count} cores", device.cores,
              reason=t(device.name))


def render_sidebar(slot: DeltaGenerator) -> None:
    """Fill the sidebar slot the router reserved; called after the page ran, so the
    progress already counts the lesson on screen."""
    device = demo_device()
    with slot:
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
