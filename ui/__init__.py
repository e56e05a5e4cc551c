"""Streamlit pieces shared by the pages: the sidebar, lesson progress, query-bound widgets.

The engine (demos/), the quiz logic (quiz/) and the lesson content (lessons/) never
import Streamlit; everything that does lives here or in pages/.
"""
