"""Plan your own run (/plan): drawn by ui.plan_view."""

from ui.plan_view import render

render()
