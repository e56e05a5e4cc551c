"""Everything an AppTest run put on the page, as text: every string field of every element's
message (titles, Markdown, captions, labels, help, options, alerts, progress texts, links),
for `tools.translations.untranslated_on_page`."""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from streamlit.testing.v1 import AppTest


def _strings(message: Message) -> Iterator[str]:
    for field, value in message.ListFields():
        values = value if field.is_repeated else [value]
        if field.type == FieldDescriptor.TYPE_STRING:
            yield from values
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in values:
                if isinstance(item, Message):
                    yield from _strings(item)


def page_text(at: AppTest) -> str:
    """The main area's text (the page script's own output; the sidebar is the router's)."""
    return "\n".join(text for element in at.main
                     if isinstance(getattr(element, "proto", None), Message)
                     for text in _strings(element.proto))
