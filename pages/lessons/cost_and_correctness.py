from ui.lesson_page import render_lesson

render_lesson("cost-and-correctness")
