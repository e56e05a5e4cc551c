"""CPU time to draw one certificate PDF, for a name DejaVu draws and one that needs the CJK
fallback font: as the app does it (the fonts parsed once per process by `quiz.pdf_fonts`,
the CJK font embedded only when a text needs it), with fpdf2 parsing every font file on
every PDF, and as it was (parsed on every PDF, the CJK font always embedded).
CPU time of this process (load-independent, unlike the wall clock), the median of
`--repeats` renders after a first one; written to benchmarks/certificate-pdf.json.

    .venv/bin/python -m benchmarks.certificate_pdf
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fpdf import FPDF

import quiz.pdf
from quiz.certificate_records import Certificate
from quiz.fonts import cjk_font
from quiz.layout import Item, certificate_layout
from quiz.pdf import render_pdf

OUT = Path(__file__).with_name("certificate-pdf.json")
NAMES = {"DejaVu only": "Nguyễn Thị Minh Khai", "with CJK": "Lý Tiểu Long 李小龍"}


def layout(name: str) -> list[Item]:
    certificate = Certificate(
        id="K7QF-3MXD-8WPA", attempt_id="attempt", name=name, course="course",
        course_version="1", date="2026-03-04", score=92, show_score=True, key_id="key",
        signature="signature", lang="vi",
    )
    return certificate_layout(certificate, "https://example.org/verify?id=K7QF-3MXD-8WPA")


@contextmanager
def parsing_every_time(always_cjk: bool = False) -> Iterator[None]:
    """fpdf2's own add_font, every font file parsed for each PDF; `always_cjk`: the CJK
    font embedded in every PDF, needed or not."""
    shared, own, needs = quiz.pdf.add_font, quiz.pdf.own_fonts, quiz.pdf._needs_fallback

    def add_font(pdf: FPDF, family: str, style: str, path: Path) -> None:
        pdf.add_font(family, style, str(path))

    quiz.pdf.add_font, quiz.pdf.own_fonts = add_font, lambda pdf: None
    if always_cjk:
        quiz.pdf._needs_fallback = lambda items: True
    try:
        yield
    finally:
        quiz.pdf.add_font, quiz.pdf.own_fonts, quiz.pdf._needs_fallback = shared, own, needs


def cpu_seconds(items: list[Item], repeats: int) -> dict[str, float]:
    started = time.process_time()
    render_pdf(items)
    first = time.process_time() - started
    times = []
    for _ in range(repeats):
        started = time.process_time()
        render_pdf(items)
        times.append(time.process_time() - started)
    return {"first": round(first, 3), "median": round(statistics.median(times), 3),
            "min": round(min(times), 3), "max": round(max(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    rows = []
    for label, name in NAMES.items():
        if label == "with CJK" and cjk_font() is None:
            continue
        items = layout(name)
        shared = cpu_seconds(items, args.repeats)
        with parsing_every_time():
            every_time = cpu_seconds(items, args.repeats)
        with parsing_every_time(always_cjk=True):
            before = cpu_seconds(items, args.repeats)
        rows.append({"name": label, "now": shared, "fonts parsed per PDF": every_time,
                     "as before (parsed per PDF, CJK font always)": before,
                     "speed-up": round(before["median"] / shared["median"], 1)})
        print(f"{label:12s} CPU-s per certificate (median of {args.repeats}): now "
              f"{shared['median']:.3f}, fonts parsed per PDF {every_time['median']:.3f}, "
              f"as before {before['median']:.3f} (x{rows[-1]['speed-up']})")
    with open("/proc/loadavg") as load:
        loadavg = load.read().split()[:3]
    OUT.write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                               "load": loadavg, "repeats": args.repeats, "rows": rows},
                              indent=2, ensure_ascii=False) + "\n")
    print(f"written to {OUT}")


if __name__ == "__main__":
    main()
