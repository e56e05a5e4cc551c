"""`python -m i18n messages`: extract every message into locale/messages.pot and merge it
into each language's .po (pybabel extract + update, with the project's keywords).
What the translations still lack: `python -m tools.translations`."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from babel.messages.frontend import CommandLineInterface

from i18n.catalog import LOCALE_DIR, ROOT, TEMPLATE, po_path
from i18n.languages import CODES, DEFAULT

# Where messages are written (relative to the repository root) and the functions that
# mark them: t/tn/pt (ui.i18n), gettext/ngettext/pgettext (i18n, language first), N_.
SOURCES = ("app.py", "ui", "pages", "lessons", "quiz", "planner", "serving", "reports", "demos",
           "model_classes", "memory", "i18n")
KEYWORDS = ("N_", "t", "tn:1,2", "pt:1c,2", "gettext:2", "ngettext:2,3", "pgettext:2c,3")


def extract(template: Path = TEMPLATE) -> None:
    """Every marked message of SOURCES into the template (pybabel extract)."""
    template.parent.mkdir(parents=True, exist_ok=True)
    keywords = [arg for keyword in KEYWORDS for arg in ("-k", keyword)]
    with contextlib.chdir(ROOT):  # locations relative to the repository root
        CommandLineInterface().run([
            "pybabel", "-q", "extract", "-F", "babel.cfg", "--no-default-keywords", *keywords,
            "--add-location=file", "--no-wrap", "--project=Gradient Checkpointing Lab",
            "-o", str(template), *SOURCES,
        ])


def update() -> None:
    """Merge the template into each language's .po, creating a missing one (pybabel
    init/update); a changed English message comes back fuzzy, for a translator to check."""
    for code in CODES:
        if code == DEFAULT:
            continue
        command = "update" if po_path(code).exists() else "init"
        extra = (["--ignore-obsolete", "--ignore-pot-creation-date"]
                 if command == "update" else [])
        CommandLineInterface().run([
            "pybabel", "-q", command, "-i", str(TEMPLATE), "-d", str(LOCALE_DIR), "-l", code,
            "--no-wrap", *extra,
        ])


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    if command == "messages":
        extract()
        update()
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
