"""The verify page (/verify?id=...): drawn by ui.verify_view."""

from ui.verify_view import render

render()
