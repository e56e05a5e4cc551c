"""The course outline, one table: the lessons in order, with their URL paths.

Everything that counts or names the lessons reads this table: the router and the sidebar,
the home page's path and its "ten lessons", the quiz topics (`quiz.bank.TOPICS`), and
the cross-references a lesson writes as ``{{lesson:how-many}}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from i18n import DEFAULT, N_, format_number, gettext, ngettext, with_lang


@dataclass(frozen=True)
class Lesson:
    path: str
    title: str  # English, marked for the catalog: show it with `title_in(code)`
    icon: str
    minutes: int

    @property
    def page_file(self) -> str:
        """The thin page script that shows this lesson, relative to the app root."""
        return f"pages/lessons/{self.path.replace('-', '_')}.py"

    def title_in(self, code: str = DEFAULT) -> str:
        """The lesson's title in language `code`."""
        return gettext(code, self.title)


LESSONS: tuple[Lesson, ...] = (
    Lesson("why-memory", N_("Why training runs out of memory"), ":material/memory:", 8),
    Lesson("how-it-works", N_("How checkpointing works"), ":material/replay:", 10),
    Lesson("how-many", N_("Where to put checkpoints"), ":material/tune:", 8),
    Lesson("language-models", N_("Checkpointing a language model"), ":material/layers:", 10),
    Lesson("large-vocabularies", N_("Large vocabularies: the logits"), ":material/dictionary:", 5),
    Lesson("cost-and-correctness", N_("What it costs, what it keeps"), ":material/balance:", 6),
    Lesson("in-practice", N_("Checkpointing in practice"), ":material/build:", 8),
    Lesson("many-gpus", N_("Checkpointing across many GPUs"), ":material/hub:", 12),
    Lesson("image-models", N_("Pictures: vision and diffusion models"), ":material/image:", 10),
    Lesson("toolbox", N_("The practitioner's toolbox"), ":material/handyman:", 14),
)

# The live picture demo's URL path, which lesson 9 links (its front matter's demo path and
# its text's {{page:pictures}}): the page joins ui.navigation.PAGES under this path. Until it
# does, the lesson page draws the link as a plain one (ui/lesson_page.py), not a page link.
PICTURES_DEMO_PATH = "pictures"

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


def reference(path: str, code: str = DEFAULT) -> str:
    """A Markdown link to the lesson with its number and title, in language `code`, as the
    lessons cite one another: "[lesson 3, *Where to put checkpoints*](/how-many?lang=en)".
    The link carries the language: it opens a new page load, which must not fall back to
    the browser's language."""
    item = lesson(path)
    target = with_lang(f"/{item.path}", code)
    return gettext(code, "[lesson {number}, *{title}*]({target})", number=number(path),
                   title=item.title_in(code), target=target)


_WORDS = (N_("zero"), N_("one"), N_("two"), N_("three"), N_("four"), N_("five"), N_("six"),
          N_("seven"), N_("eight"), N_("nine"), N_("ten"), N_("eleven"), N_("twelve"))


def count_in_words(count: int, code: str = DEFAULT) -> str:
    """"seven" for 7 ("sieben" in German); digits from 13 on."""
    if 0 <= count < len(_WORDS):
        return gettext(code, _WORDS[count])
    return format_number(count, code)


def lesson_count_text(code: str = DEFAULT) -> str:
    """How many lessons the course has, in words: "ten lessons" ("zehn Lektionen")."""
    count = len(LESSONS)
    return ngettext(code, "{words} lesson", "{words} lessons", count,
                    words=count_in_words(count, code))


def neighbours(path: str) -> tuple[Lesson | None, Lesson | None]:
    """The lessons before and after `path` in course order."""
    index = LESSON_PATHS.index(path)
    before = LESSONS[index - 1] if index > 0 else None
    after = LESSONS[index + 1] if index + 1 < len(LESSONS) else None
    return before, after
