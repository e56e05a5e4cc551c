"""Home: what the lab teaches, for whom, and the path through it."""

import streamlit as st

from lessons.catalog import LESSONS, count_in_words
from quiz.config import PASS_MARK, QUESTIONS_PER_ATTEMPT, attempt_minutes
from ui.home_teaser import home_teaser
from ui.i18n import current_language, t, tn
from ui.navigation import page_link

code = current_language()
st.title(t("Gradient Checkpointing Lab"))
st.markdown(t(
    "Learn how **gradient (activation) checkpointing** trades a little compute for a lot "
    "of training memory, and watch it happen: a small GPT-style transformer trains for real "
    "on this server while you move the sliders."
))
st.markdown(t(
    "**For** ML engineers and students who train or fine-tune neural networks and have met "
    "*CUDA out of memory*. You need to know what a forward and a backward pass are; "
    "no other background is assumed."
))

lesson_minutes = sum(item.minutes for item in LESSONS)
steps = st.columns(4)
with steps[0]:
    st.markdown(t("##### 1. Lessons\n~{minutes} min", minutes=lesson_minutes))
    st.caption(tn("{words} short lesson with calculators and step-by-step figures.",
                  "{words} short lessons with calculators and step-by-step figures.",
                  len(LESSONS), words=count_in_words(len(LESSONS), code).capitalize()))
    page_link(LESSONS[0].path, label=t("Start the first lesson"), icon=":material/play_arrow:")
with steps[1]:
    st.markdown(t("##### 2. Live demos\n~{minutes} min", minutes=15))
    st.caption(t("Real forward and backward passes, measured memory and time beside theory."))
    page_link("compare", icon=":material/bar_chart:")
with steps[2]:
    st.markdown(t("##### 3. Quiz\n~{minutes} min",
                  minutes=attempt_minutes(QUESTIONS_PER_ATTEMPT)))
    st.caption(t("About {count} questions with instant feedback; {mark:.0%} passes.",
                 count=QUESTIONS_PER_ATTEMPT, mark=PASS_MARK))
    page_link("quiz", label=t("Take the quiz"))
with steps[3]:
    st.markdown(t("##### 4. Certificate\n{minutes} min", minutes=1))
    st.caption(t("A signed PDF with an ID anyone can check."))
    page_link("verify")

st.subheader(t("The lessons"))
for number, item in enumerate(LESSONS, start=1):
    page_link(item.path, label=t("{number}. {title} (~{minutes} min)", number=number,
                                 title=item.title_in(code), minutes=item.minutes))

page_link("plan", label=t("Plan your own run: the checkpointing setting for your model and "
                           "GPU"), icon=":material/calculate:")

st.subheader(t("Live from this server"))
st.markdown(t(
    "One real training step of the demo model, measured with and without checkpointing "
    "every layer (the first visit measures; later visits show the cached result):"
))
home_teaser()
page_link("compare", label=t("Try other models and strategies"), icon=":material/tune:")
