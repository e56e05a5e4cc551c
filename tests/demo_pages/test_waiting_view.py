"""ui.demo_runner's view while a demo runs: the previous result stays (dimmed, labelled
with its settings) until the new one replaces it, also while a long run waits for its
click, and what the run measured so far shows as soon as the worker sends it."""

from __future__ import annotations

import textwrap

from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

PRELUDE = """
import os, threading, time
os.environ["DATA_DIR"] = {data!r}
os.environ.pop("DEMO_RUNNER_COLLECT", None)  # a warm-up listing in this process set it
import pandas as pd
import streamlit as st
from serving import service
from tests.runtime.conftest import CPU, FakeWorker, tiny_compare
from ui import demo_runner


partial_drawn = threading.Event()


class PartialWorker(FakeWorker):
    \"\"\"Sends a result so far (after `before` seconds), then finishes once the page has
    drawn it (not after a fixed sleep a busy machine could outlast).\"\"\"

    before = {before}

    def call(self, job, index, *, on_partial=None, **kwargs):
        time.sleep(self.before)
        if on_partial is not None:
            on_partial(pd.DataFrame({{"seed": [job.config.seed], "step": ["so far"]}}))
            partial_drawn.wait(60)
            partial_drawn.clear()
        return super().call(job, index, **kwargs)


svc = service.DemoService(CPU, worker=PartialWorker(lambda job, i: 0.01),
                          use_store=False).start()
service.set_service(svc)
calls = []
captions = []
_caption = st.caption
st.caption = lambda body, *a, **k: (captions.append(body), _caption(body, *a, **k))[1]

def show(frame):
    calls.append((demo_runner.view_phase(), int(frame["seed"][0]), str(frame["step"][0])))
    if (demo_runner.view_phase() or "").startswith("partial-"):
        partial_drawn.set()
"""

# The first numbers come at once: the page's wait of QUICK_SECONDS for the result starts
# when they are in (on a busy machine the worker's thread may start later than that).
NUMBERS_IN_FIRST = """
from serving import tickets
_wait = tickets.Ticket.wait

def _wait_once_numbers_are_in(self, timeout=None):
    while self.partial[1] is None and not self.done:
        time.sleep(0.01)
    return _wait(self, timeout)

tickets.Ticket.wait = _wait_once_numbers_are_in
try:
{body}
finally:
    tickets.Ticket.wait = _wait
"""


# A first result, then a second run (one more layer) drawn with the same `show`.
TWO_RUNS = """
try:
    demo_runner._run(tiny_compare(seed=1), "a", show=show)
    new = demo_runner._run(tiny_compare(seed=2).__class__.make(
        "compare", tiny_compare(seed=2).config.replace(layers=3), tiny_compare().strategies,
        repeats=1, timeline=False, time_steps=False), "b", show=show)
finally:
    service.set_service(None)
    svc.stop()
    st.caption = _caption
st.write("calls: " + repr(calls))
"""


def _app(tmp_path, body: str, before: float = 2.0) -> AppTest:
    """`before`: seconds until a run sends its result so far (past QUICK_SECONDS: the
    previous result shows dimmed meanwhile)."""
    script = (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
              + PRELUDE.format(data=str(tmp_path), before=before) + body)
    return AppTest.from_string(script, default_timeout=60).run()


def test_the_previous_result_stays_dimmed_until_the_new_one_and_partials_show(tmp_path):
    at = _app(tmp_path, TWO_RUNS + """st.write("captions: " + " | ".join(captions))
""")
    assert not at.exception
    calls = eval(at.markdown[-2].value.removeprefix("calls: "))  # noqa: S307 - our own repr
    first = calls.index((None, 1, "0"))  # the first result, finished
    assert all(c[0].startswith("partial-") for c in calls[:first])  # so far, before it
    assert calls[first + 1] == ("previous", 1, "0")  # dimmed while the second one runs
    partials = calls[first + 2:-1]  # what the second run measured so far (a busy
    assert partials and all(c[0].startswith("partial-") and c[1:] == (2, "so far")
                            for c in partials)  # machine may show it more than once)
    assert calls[-1] == (None, 2, "0")  # replaced by the finished one
    captions = at.markdown[-1].value
    assert "Previous result (Layers 2)" in captions
    assert "shown dimmed until the new one is ready" in captions


def test_a_run_whose_memory_comes_at_once_is_drawn_without_the_dimmed_previous(tmp_path):
    """Within QUICK_SECONDS the result so far replaces the previous result directly: the
    browser draws each chart once, not a blink of the old one first."""
    at = _app(tmp_path, NUMBERS_IN_FIRST.format(body=textwrap.indent(TWO_RUNS, "    ")),
              before=0.0)
    assert not at.exception
    calls = eval(at.markdown[-1].value.removeprefix("calls: "))  # noqa: S307 - our own repr
    first = calls.index((None, 1, "0"))
    assert ("previous", 1, "0") not in calls
    assert calls[first + 1] == ("partial-1", 2, "so far")
    assert calls[-1] == (None, 2, "0")


def test_the_previous_result_stays_while_a_long_run_waits_for_its_click(tmp_path):
    at = _app(tmp_path, """
try:
    demo_runner._run(tiny_compare(seed=1), "a", show=show)
    svc.estimate = lambda job: 300.0  # past SLOW_SECONDS: asks for a click
    waiting = demo_runner._run(tiny_compare(seed=5), "b", show=show)
finally:
    service.set_service(None)
    svc.stop()
    st.caption = _caption
st.write(f"result: {waiting}; calls: " + repr(calls) + " captions: " + " | ".join(captions))
""")
    assert not at.exception
    assert at.button[0].label.startswith("Run it anyway")
    text = at.markdown[-1].value
    assert text.startswith("result: None;")
    assert "('previous', 1, '0')" in text
    assert "Previous result (" in text


def test_a_long_run_already_under_way_is_joined_without_a_click(tmp_path):
    """The warm-up measures a lesson link's large comparison: a learner opening it while
    it runs sees its numbers so far, not a "Run it anyway" button (a fresh class did)."""
    at = _app(tmp_path, """
try:
    svc.estimate = lambda job: 300.0  # past SLOW_SECONDS: a new run asks for a click
    svc.warm([tiny_compare(seed=6)])
    joined = demo_runner._run(tiny_compare(seed=6), "c", show=show)
finally:
    service.set_service(None)
    svc.stop()
    st.caption = _caption
st.write(f"result: {joined is not None}; calls: " + repr(calls))
""", before=0.5)
    assert not at.exception
    assert not [b for b in at.button if b.label.startswith("Run it anyway")]
    text = at.markdown[-1].value
    assert text.startswith("result: True;")
    assert "(None, 6, '0')" in text
