"""Home: what the lab teaches, for whom, and the path through it."""

import streamlit as st

from lessons.catalog import LESSONS, lesson_count_text
from quiz.config import PASS_MARK, QUESTIONS_PER_ATTEMPT
from ui.home_teaser import home_teaser
from ui.navigation import page_link

st.title("Gradient Checkpointing Lab")
st.markdown(
    "Learn how **gradient (activation) checkpointing** trades a little compute for a lot "
    "of training memory, and watch it happen: a small GPT-style transformer trains for real "
    "on this server while you move the sliders."
)
st.markdown(
    "**For** ML engineers and students who train or fine-tune neural networks and have met "
    "*CUDA out of memory*. You need to know what a forward and a backward pass are; "
    "no other background is assumed."
)

lesson_minutes = sum(item.minutes for item in LESSONS)
steps = st.columns(4)
with steps[0]:
    st.markdown(f"##### 1. Lessons\n~{lesson_minutes} min")
    st.caption(f"{lesson_count_text().capitalize().replace(' ', ' short ', 1)} with "
               "calculators and step-by-step figures.")
    page_link(LESSONS[0].path, label="Start the first lesson", icon=":material/play_arrow:")
with steps[1]:
    st.markdown("##### 2. Live demos\n~15 min")
    st.caption("Real forward and backward passes, measured memory and time beside theory.")
    page_link("compare", icon=":material/bar_chart:")
with steps[2]:
    st.markdown("##### 3. Quiz\n~10 min")
    st.caption(f"About {QUESTIONS_PER_ATTEMPT} questions with instant feedback; "
               f"{PASS_MARK:.0%} passes.")
    page_link("quiz", label="Take the quiz")
with steps[3]:
    st.markdown("##### 4. Certificate\n1 min")
    st.caption("A signed PDF with an ID anyone can check.")
    page_link("verify")

st.subheader("The lessons")
for number, item in enumerate(LESSONS, start=1):
    page_link(item.path, label=f"{number}. {item.title} (~{item.minutes} min)")

st.subheader("Live from this server")
st.markdown(
    "One real training step of the demo model, measured with and without checkpointing "
    "every layer (the first visit measures; later visits show the cached result):"
)
home_teaser()
page_link("compare", label="Try other models and strategies", icon=":material/tune:")
