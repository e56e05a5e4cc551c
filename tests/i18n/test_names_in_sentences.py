"""A strategy's title is a noun phrase in the nominative ("jede Schicht", "kein
Checkpointing"): dropped after a German preposition it reads wrong ("mit jede Schicht").
Sentences that take a strategy's title name it after a colon or in a clause of its own."""

from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from i18n.catalog import LOCALE_DIR

# German prepositions that govern the dative or accusative: a nominative title after them
# is ungrammatical.
PREPOSITION = re.compile(r"\b(mit|für|bei|von|ohne|durch|gegen|um|aus|nach|zu|gegenüber)"
                         r"\s+\*{0,2}\{(strategy|strategies|best|plan)\b")


def _catalog(code: str):
    with open(LOCALE_DIR / code / "LC_MESSAGES" / "messages.po", "rb") as f:
        return read_po(f)


def test_no_german_preposition_takes_a_strategy_title() -> None:
    bad = [(m.id, m.string) for m in _catalog("de")
           if m.id and isinstance(m.string, str) and PREPOSITION.search(m.string)]
    assert bad == []


@pytest.mark.parametrize("label", ["Peak memory: {strategy}", "Step time: {strategy}",
                                   "Extra compute: {strategy}"])
def test_the_metric_labels_read_in_german(label: str) -> None:
    from i18n.catalog import gettext

    assert gettext("de", label, strategy="jede Schicht").endswith(": jede Schicht")
