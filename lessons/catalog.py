"""The course outline, one table: the lessons in order, with their URL paths.

Everything that counts or names the lessons reads this table: the router and the sidebar,
the home page's path and its "seven lessons", the quiz topics (`quiz.bank.TOPICS`), and
the cross-references a lesson writes as ``{{lesson:how-many}}``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lesson:
    path: str
    title: str
    icon: str
    minutes: int

    @property
    def page_file(self) -> str:
        """The thin page script that shows this lesson, relative to the app root."""
        return f"pages/lessons/{self.path.replace('-', '_')}.py"


LESSONS: tuple[Lesson, ...] = (
    Lesson("why-memory", "Why training runs out of memory", ":material/memory:", 8),
    Lesson("how-it-works", "How checkpointing works", ":material/replay:", 10),
    Lesson("how-many", "Where to put checkpoints", ":material/tune:", 8),
    Lesson("language-models", "Checkpointing a language model", ":material/layers:", 10),
    Lesson("large-vocabularies", "Large vocabularies: the logits", ":material/dictionary:", 5),
    Lesson("cost-and-correctness", "What it costs, what it keeps", ":material/balance:", 6),
    Lesson("in-practice", "Checkpointing in practice", ":material/build:", 8),
)

LESSON_PATHS: tuple[str, ...] = tuple(lesson.path for lesson in LESSONS)


def lesson(path: str) -> Lesson:
    """The lesson at `path`; KeyError for an unknown path."""
    for item in LESSONS:
        if item.path == path:
            return item
    raise KeyError(path)


def number(path: str) -> int:
    """The lesson's place in the course, from 1; KeyError for an unknown path."""
    return LESSON_PATHS.index(lesson(path).path) + 1


def reference(path: str) -> str:
    """A Markdown link to the lesson with its number and title, as the lessons cite one
    another: "[lesson 3, *Where to put checkpoints*](/how-many)"."""
    item = lesson(path)
    return f"[lesson {number(path)}, *{item.title}*](/{item.path})"


_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
          "ten", "eleven", "twelve")


def count_in_words(count: int) -> str:
    """"seven" for 7; digits from 13 on."""
    return _WORDS[count] if 0 <= count < len(_WORDS) else f"{count:,}"


def lesson_count_text() -> str:
    """How many lessons the course has, in words: "seven lessons"."""
    return f"{count_in_words(len(LESSONS))} lesson{'' if len(LESSONS) == 1 else 's'}"


def neighbours(path: str) -> tuple[Lesson | None, Lesson | None]:
    """The lessons before and after `path` in course order."""
    index = LESSON_PATHS.index(path)
    before = LESSONS[index - 1] if index > 0 else None
    after = LESSONS[index + 1] if index + 1 < len(LESSONS) else None
    return before, after
