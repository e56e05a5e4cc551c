"""The quiz page (/quiz): drawn by ui.quiz_view."""

from ui.quiz_view import render

render()
