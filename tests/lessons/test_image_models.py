"""Lesson 9 (pictures): its numbers come from memory/pixels.py, it says what the course says
elsewhere about fused attention, and it links the picture demo in every language."""

from __future__ import annotations

import pytest

from i18n.languages import SUPPORTED
from lessons.catalog import PICTURES_DEMO_PATH, lesson, number
from lessons.document import ANY_PLACEHOLDER, content_file, load
from lessons.values import lesson_values
from memory.pixels import SDXL, unet_kept_numbers, unet_levels
from tests.lessons.test_documents import all_text, document_text

PATH = "image-models"
CODES = [language.code for language in SUPPORTED]


def test_it_is_lesson_nine_after_many_gpus():
    assert number(PATH) == 9
    assert lesson(PATH).title == "Pictures: vision and diffusion models"


@pytest.mark.parametrize("code", CODES)
def test_it_renders_in_every_language_and_links_the_picture_demo(code):
    document = load(PATH, lesson_values(code), code)
    text = document_text(document)
    assert not ANY_PLACEHOLDER.search(text)
    assert document.demo.path == PICTURES_DEMO_PATH
    assert f"](/{PICTURES_DEMO_PATH}?lang={code})" in text  # {{page:pictures}} in the text
    assert len(document.takeaways) == 5
    assert lesson_values(code)["pix_score_factor"] in text


def test_the_english_states_the_numbers_of_its_formulas():
    text = all_text(PATH)
    for figure in ("196", "784", "4,096", "×16", "1/8", "4,608", "4,429", "333", "×13.4",
                   "6.6 GB", "0.58 GB", "69%", "56%", "enable_gradient_checkpointing()",
                   "use_reentrant=False", "set_grad_checkpointing()", "checkpoint_seq",
                   "--gradient_checkpointing_interval", "#6388"):
        assert figure in text, figure


def test_no_figure_is_typed_in():
    source = content_file(PATH).read_text(encoding="utf-8")
    for typed in ("4,096", "16,384", "6.6 GB", "69%", "1,310,720", "268.4 MB", "×16"):
        assert typed not in source, typed


def test_scores_count_only_where_materialized_as_lesson_four_says():
    text = all_text(PATH)
    assert "only where the scores are materialized" in text
    assert "keeps no s × s matrix" in text
    assert "never store this matrix" in all_text("language-models")


def test_the_sdxl_share_is_the_module_s_share():
    levels = unet_levels(SDXL)
    share = levels[-1].kept_numbers / unet_kept_numbers(SDXL)
    assert lesson_values()["pix_sdxl_l3_share"] == f"{share:.0%}"
    assert max(levels, key=lambda level: level.kept_numbers) is levels[-1]


def test_frozen_parts_save_nothing_and_link_the_no_grad_mistake():
    text = all_text(PATH)
    assert "Checkpointing it saves nothing" in text
    assert "case=no-grad-or-eval" in text and "case=reentrant-frozen-inputs" in text
