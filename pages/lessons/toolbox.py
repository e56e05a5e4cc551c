from ui.lesson_page import render_lesson

render_lesson("toolbox")
