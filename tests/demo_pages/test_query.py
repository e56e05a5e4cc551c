"""ui.query's parsing: bad links give a clear warning and a safe value."""

from __future__ import annotations

import pytest

from ui.query import Parsed, parse_choice, parse_float, parse_int, parse_list


def test_int_in_range_is_kept_silently() -> None:
    assert parse_int("16", name="layers", lo=1, hi=24, default=8) == parse_int(
        " 16 ", name="layers", lo=1, hi=24, default=8)
    parsed = parse_int("16", name="layers", lo=1, hi=24, default=8)
    assert parsed.value == 16 and parsed.warning is None


@pytest.mark.parametrize("raw", [None, "", "  "])
def test_missing_int_gives_the_default(raw: str | None) -> None:
    parsed = parse_int(raw, name="layers", lo=1, hi=24, default=8)
    assert parsed.value == 8 and parsed.warning is None


def test_huge_int_is_clamped_with_a_warning_that_names_the_range() -> None:
    parsed = parse_int("99999", name="layers", lo=1, hi=24, default=8, where="on this CPU")
    assert parsed.value == 24
    assert "?layers='99999'" in parsed.warning
    assert "1–24 on this CPU" in parsed.warning


def test_small_int_is_clamped_to_the_low_end() -> None:
    parsed = parse_int("-3", name="batch", lo=1, hi=8, default=2)
    assert parsed.value == 1 and "outside" in parsed.warning


@pytest.mark.parametrize("raw", ["abc", "nan", "inf", "1e999", "4; DROP TABLE"])
def test_text_that_is_not_a_number_falls_back_to_the_default(raw: str) -> None:
    parsed = parse_int(raw, name="layers", lo=1, hi=24, default=8)
    assert parsed.value == 8
    assert "not a number" in parsed.warning


def test_off_grid_values_snap_to_the_slider_step() -> None:
    parsed = parse_int("300", name="hidden", lo=64, hi=512, step=64, default=256)
    assert parsed.value == 320
    assert "steps of 64" in parsed.warning
    assert parse_int("2.0", name="batch", lo=1, hi=8, default=2).warning is None


def test_long_raw_text_is_shortened_in_the_warning() -> None:
    parsed = parse_int("x" * 500, name="layers", lo=1, hi=24, default=8)
    assert len(parsed.warning) < 150


def test_float_clamps() -> None:
    assert parse_float("0.7", name="dropout", lo=0.0, hi=0.5, default=0.1).value == 0.5
    assert parse_float("0.2", name="dropout", lo=0.0, hi=0.5, default=0.1).warning is None
    assert parse_float("x", name="dropout", lo=0.0, hi=0.5, default=0.1).value == 0.1


def test_choice_rejects_unknown_values() -> None:
    assert parse_choice("bfloat16", name="dtype", choices=["float32", "bfloat16"],
                        default="float32").value == "bfloat16"
    parsed = parse_choice("float16", name="dtype", choices=["float32", "bfloat16"],
                          default="float32", where="on this CPU")
    assert parsed.value == "float32"
    assert "not available on this CPU" in parsed.warning and "bfloat16" in parsed.warning


def test_list_keeps_known_names_in_the_options_order() -> None:
    options = ["every-layer", "every-k:2", "sqrt", "selective:save-matmuls"]
    parsed = parse_list("sqrt,every-layer,sqrt", name="strategy", choices=options,
                        default=["every-layer"])
    assert parsed.value == ("every-layer", "sqrt") and parsed.warning is None
    repeated = parse_list(["sqrt", "every-k:2"], name="strategy", choices=options, default=[])
    assert repeated.value == ("every-k:2", "sqrt")


def test_list_drops_unknown_names_with_a_warning() -> None:
    parsed = parse_list("sqrt,offload", name="strategy", choices=["every-layer", "sqrt"],
                        default=["every-layer"])
    assert parsed.value == ("sqrt",)
    assert "'offload'" in parsed.warning and "ignored" in parsed.warning


def test_list_of_only_unknown_names_gives_the_default() -> None:
    parsed = parse_list("bogus", name="strategy", choices=["every-layer", "sqrt"],
                        default=["every-layer"])
    assert parsed.value == ("every-layer",) and "none of these" in parsed.warning
    assert parse_list(None, name="strategy", choices=["sqrt"], default=["sqrt"]).value == (
        "sqrt",)


def test_list_drops_an_implied_name_without_a_warning() -> None:
    """?strategy=none,sqrt: `none` is always measured as the baseline; it used to be called
    "not available" in a warning."""
    options = ["every-layer", "sqrt"]
    parsed = parse_list("none,sqrt", name="strategy", choices=options, default=["every-layer"],
                        implied=["none"])
    assert parsed == Parsed(("sqrt",))
    only = parse_list("none", name="strategy", choices=options, default=["every-layer"],
                      implied=["none"])
    assert only == Parsed(("every-layer",))
