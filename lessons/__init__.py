"""Lesson content (Markdown) and the pure helpers behind its calculators and figures."""
