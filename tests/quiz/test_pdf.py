"""The certificate PDF and its PNG preview: names in Vietnamese and German are drawn with
the shipped font; names the font cannot draw never reach the PDF."""

from __future__ import annotations

import io

import pytest
import segno
from PIL import Image

from i18n import gettext
from quiz.attempts import Attempt
from quiz.certificate_records import long_date
from quiz.config import QUESTIONS_PER_ATTEMPT, verify_url
from quiz.fonts import BOLD, cjk_font, metrics
from quiz.layout import (
    NAME_MAX_WIDTH,
    NAME_MIN_SIZE,
    PT,
    QrCode,
    Text,
    certificate_layout,
    qr_matrix,
)
from quiz.names import NameError_, NameProblem
from quiz.service import QuizService, certificate_pdf, certificate_png
from tests.quiz.pdf_text import embedded_characters

NAMES = ["Nguyễn Thị Minh Khai", "Trần Văn Đức", "Jürgen Groß-Müßig", "Ann 😀 Lee",
         "Jürgen Müller-Lüdenscheid"]
CJK_NAMES = ["李小龍", "山田 花子", "김민준", "Lý Tiểu Long 李小龍"]
needs_cjk_font = pytest.mark.skipif(
    cjk_font() is None, reason="no CJK font installed (make test installs fonts-wqy-microhei)"
)


@pytest.fixture
def issue(service: QuizService, finish):  # noqa: ANN001, ANN201
    def make(name: str, lang: str = "en"):  # noqa: ANN202
        attempt: Attempt = finish(service, service.start_attempt(), QUESTIONS_PER_ATTEMPT)
        return service.issue(attempt.id, name, True, lang=lang)

    return make


@pytest.mark.parametrize("lang", ["de", "vi"])
@pytest.mark.parametrize("name", ["Nguyễn Thị Minh Khai", "Jürgen Müller-Lüdenscheid"])
def test_the_pdf_is_in_the_learners_language(issue, name: str, lang: str) -> None:  # noqa: ANN001
    """Every word of the page in the language the quiz was taken in (the catalog, not the
    session: the PDF is drawn outside Streamlit), the date written out by Babel, and every
    letter of the words and the name drawn with a real glyph."""
    certificate = issue(name, lang)
    texts = [item.text for item in certificate_layout(certificate) if isinstance(item, Text)]
    date = long_date(certificate.date, lang)
    wanted = [
        gettext(lang, "CERTIFICATE OF COMPLETION"),
        gettext(lang, "This certifies that"),
        gettext(lang, "has passed the final quiz of the course"),
        gettext(lang, "Date: {date}", date=date),
        gettext(lang, "Score: {score:.0%}", score=1.0),
        gettext(lang, "Certificate ID"),
    ]
    for line in wanted:
        assert line in texts
    english = {gettext("en", "This certifies that"), gettext("en", "Certificate ID")}
    assert not english & set(texts)
    assert date != long_date(certificate.date, "en")
    drawn = embedded_characters(certificate_pdf(certificate))
    assert set("".join([name, *wanted]).replace(" ", "")) <= drawn


@pytest.mark.parametrize("name", NAMES)
def test_the_pdf_draws_the_name_with_real_glyphs(issue, name: str) -> None:  # noqa: ANN001
    certificate = issue(name)
    pdf = certificate_pdf(certificate)
    assert pdf.startswith(b"%PDF-") and b"DejaVu" in pdf
    drawn = embedded_characters(pdf)
    assert set(name.replace(" ", "")) <= drawn
    assert set(certificate.id.replace("-", "")) <= drawn


def test_the_page_carries_every_fact_and_the_verify_link(issue) -> None:  # noqa: ANN001
    certificate = issue("Jürgen Groß")
    items = certificate_layout(certificate)
    texts = "\n".join(item.text for item in items if isinstance(item, Text))
    link = verify_url(certificate.id)
    assert link.startswith("https://lab.example/verify?id=")
    for fact in [
        certificate.name,
        certificate.course,
        long_date(certificate.date, "en"),
        f"{certificate.score}%",
        certificate.id,
        link,
        certificate.signature,
    ]:
        assert fact in texts
    (qr,) = [item for item in items if isinstance(item, QrCode)]
    assert qr.matrix == qr_matrix(link)
    reference = segno.make(link, error="m", micro=False)
    assert len(qr.matrix) == len(reference.matrix)


def test_only_the_query_separator_is_escaped_in_the_link() -> None:
    assert verify_url("AAAAA-AAAAA-AAAAA-AAAAA-=").endswith("?id=AAAAA-AAAAA-AAAAA-AAAAA-%3D")
    for symbol in "*$~":  # as printed on the certificate, never "%2A"
        assert verify_url(f"AAAAA-AAAAA-AAAAA-AAAAA-{symbol}").endswith(f"-{symbol}")


@pytest.mark.parametrize("symbol", list("*~$=U"))
def test_a_link_with_any_check_symbol_finds_its_certificate(symbol: str) -> None:
    from quiz.ids import format_id, parse_id

    value = next(v for v in range(1, 10_000) if format_id(v)[-1] == symbol)
    assert parse_id(verify_url(format_id(value))).text == format_id(value)


def test_the_preview_is_a_png_of_the_page(issue) -> None:  # noqa: ANN001
    png = certificate_png(issue("Nguyễn Thị Minh Khai"))
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (1188, 840)
    assert image.convert("L").getextrema() == (0, 255)  # ink on paper, not a blank page


def test_a_long_name_is_shrunk_to_fit(issue) -> None:  # noqa: ANN001
    short = [i for i in certificate_layout(issue("Ada")) if isinstance(i, Text)]
    long = [i for i in certificate_layout(issue("W" * 80)) if isinstance(i, Text)]
    size = {t.text: t.size for t in short} | {t.text: t.size for t in long}
    assert size["W" * 80] < size["Ada"]


@pytest.mark.parametrize("name", ["W" * 80, " ".join(["WWWWWWWWW"] * 8), "Ada Lovelace"])
def test_a_long_name_never_runs_past_the_border(issue, name: str) -> None:  # noqa: ANN001
    """80 wide letters used to stop shrinking at the minimum size and run ~35 mm past the
    frame; now a name with spaces wraps to two lines and any name fits NAME_MAX_WIDTH."""
    certificate = issue(name)
    lines = [i for i in certificate_layout(certificate) if isinstance(i, Text)
             and i.bold and i.text and i.text in name and len(i.text) > 2
             and i.text != certificate.course]
    assert " ".join(line.text for line in lines) == name
    for line in lines:
        assert metrics(BOLD).width(line.text, line.size * PT) <= NAME_MAX_WIDTH + 0.01
    if " " in name and len(name) > 40:
        assert len(lines) == 2 and lines[0].y < lines[1].y
        assert all(line.size >= NAME_MIN_SIZE for line in lines)


@pytest.mark.parametrize(
    ("name", "shown"), [("Ann 🦄", "🦄"), ("Lê 👩\u200d💻", "👩"), ("山田 🦄", "🦄")]
)
def test_names_the_font_cannot_draw_are_refused_before_the_pdf(
    service: QuizService, passed_attempt: Attempt, name: str, shown: str
) -> None:
    with pytest.raises(NameError_) as error:
        service.issue(passed_attempt.id, name, True)
    assert error.value.problem in (NameProblem.UNDRAWABLE, NameProblem.UNDRAWABLE_NO_CJK)
    assert error.value.params["characters"].startswith(shown)
    assert service.certificate_for(passed_attempt.id) is None


@needs_cjk_font
@pytest.mark.parametrize("name", CJK_NAMES)
def test_cjk_names_get_a_certificate_with_real_glyphs(issue, name: str) -> None:  # noqa: ANN001
    certificate = issue(name)
    pdf = certificate_pdf(certificate)
    assert set(name.replace(" ", "")) <= embedded_characters(pdf)
    assert len(pdf) < 120_000  # the 5 MB font is subset to the glyphs used
    preview = Image.open(io.BytesIO(certificate_png(certificate)))
    assert preview.format == "PNG"
    size = metrics(BOLD).width(name, 34 * PT)
    assert size > 0
