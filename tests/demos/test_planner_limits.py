"""What no real config.json is, refused before anything is built (memory.hf_config: a text
past MAX_TEXT_CHARS, JSON nested past MAX_DEPTH, sizes past SIZE_LIMITS), and the command
line's promise kept for every bad config or flag: one line on stderr, exit code 2.

Each config below once took the server or the command line down: a Llama or DeepSeek-V3
with 10^9 layers built a tuple of one entry per layer (8 GiB, 30-47 s, other learners'
pages timed out), 10^12-wide MLPs and 10^9 experts were planned as "short by 828 million
GiB", and the command line ended in a traceback with exit 1 (MemoryError, OverflowError,
RecursionError, torch's storage overflow, torch.topk's "k not in range") or read 4 GiB
of /dev/zero first."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from memory import hf_config as H
from planner.cli import main
from tests.demos.class_fixtures import FAMILIES, load, path


def _refused(cfg: dict | str) -> H.ConfigJsonError:
    text = cfg if isinstance(cfg, str) else json.dumps(cfg)
    with pytest.raises(H.ConfigJsonError) as error:
        H.parse(text)
    assert "\n" not in str(error.value)
    return error.value


# ---------------------------------------------------------------- the checks


@pytest.mark.parametrize("size", H.SIZE_LIMITS, ids=lambda s: s.what)
def test_every_size_past_its_bound_is_refused_naming_its_field(size: H.SizeLimit) -> None:
    base = load("mixtral-8x7b")
    for key in size.keys:
        error = _refused({**base, key: size.limit + 1})
        assert (error.problem, error.field, error.limit) == ("too-large", key, size.limit)
        assert key in str(error) and f"{size.limit:,}" in str(error)
        for value in (1e9, float("nan"), "4096", True, [size.limit + 1], -1):
            error = _refused({**base, key: value})
            assert error.problem in ("bad-value", "too-large") and error.field == key, value


def test_the_bounds_lie_above_every_real_model() -> None:
    """Every family the tests know, every preset, and the default config of every model
    transformers builds as a causal LM (Doge's 16,384 experts, Gemma 3n's list of widths)
    pass the checks."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    for name in FAMILIES:
        H.parse(path(name).read_text(encoding="utf-8"))
    for model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        try:
            cfg = CONFIG_MAPPING[model_type]().to_dict()
        except Exception:  # noqa: BLE001 - a config class that needs arguments
            continue
        H.parse(json.dumps(cfg, default=str))


def test_a_token_picks_no_more_experts_than_there_are() -> None:
    error = _refused({**load("mixtral-8x7b"), "num_experts_per_tok": 9})
    assert (error.problem, error.field, error.value, error.limit) == (
        "top-k", "num_experts_per_tok", 9, 8)
    error = _refused({**load("deepseek-v3"), "topk_group": 9})  # of its 8 groups
    assert (error.problem, error.field) == ("top-k", "topk_group")


def test_a_text_too_long_or_nested_too_deep_is_refused_at_once() -> None:
    started = time.process_time()
    assert _refused(" " * (H.MAX_TEXT_CHARS + 1)).problem == "too-long"
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert _refused(deep).problem == "too-deep"
    just = '{"a": ' + "[" * (H.MAX_DEPTH - 1) + "]" * (H.MAX_DEPTH - 1) + "}"
    assert H.parse(just)["a"]
    assert _refused('{"a": ' + "[" * H.MAX_DEPTH + "]" * H.MAX_DEPTH + "}").problem == (
        "too-deep")
    assert _refused('{"hidden_size": ' + "9" * 5000 + "}").problem == "not-json"
    assert time.process_time() - started < 2


def test_the_text_config_is_checked_too() -> None:
    """Gemma 3's config.json is planned as its text_config: its sizes are the ones built."""
    cfg = {"model_type": "gemma3", "text_config": {**load("gemma-3-1b"),
                                                   "num_hidden_layers": 10**9}}
    assert _refused(cfg).field == "num_hidden_layers"


# ---------------------------------------------------------------- the command line


def _write(tmp_path: Path, name: str, cfg: dict | str) -> str:
    file = tmp_path / f"{name}.json"
    file.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg), encoding="utf-8")
    return str(file)


NINE = {  # each ended in a traceback (or a plan of no real model) on the earlier code
    "huge-layers": lambda: {**load("llama-3.1-8b"), "num_hidden_layers": 10**9},
    "deepseek-huge-layers": lambda: {**load("deepseek-v3"), "num_hidden_layers": 10**9},
    "huge-intermediate": lambda: {**load("llama-3.1-8b"), "intermediate_size": 10**12},
    "huge-experts": lambda: {**load("mixtral-8x7b"), "num_local_experts": 10**9},
    "memory-error": lambda: {**load("mixtral-8x7b"), "num_hidden_layers": 10**12},
    "overflow-error": lambda: {**load("mixtral-8x7b"), "num_hidden_layers": 10**19},
    "recursion-error": lambda: '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "storage-overflow": lambda: {**load("llama-3.1-8b"), "hidden_size": 2**40,
                                 "num_attention_heads": 2**33, "head_dim": 128},
    "k-not-in-range": lambda: {**load("mixtral-8x7b"), "num_experts_per_tok": 9},
}


@pytest.mark.parametrize("case", list(NINE))
def test_a_config_no_model_has_ends_in_one_line_and_exit_2(case: str, tmp_path: Path,
                                                           capsys) -> None:
    started = time.monotonic()
    assert main(["--config", _write(tmp_path, case, NINE[case]()), "--tuning", "lora"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m planner: error: "), err
    assert "Traceback" not in err
    assert time.monotonic() - started < 10  # refused before anything is built


def test_dev_zero_is_read_no_further_than_a_config_can_be(capsys) -> None:
    started = time.monotonic()
    assert main(["--config", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "longer than 1,000,000 bytes" in err
    assert time.monotonic() - started < 2


def test_a_file_that_is_no_text_is_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "config.json"
    bad.write_bytes(b"\xff\xfe{}")
    assert main(["--config", str(bad)]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    assert main(["--config", str(tmp_path)]) == 2  # a folder
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("error", [
    MemoryError(), OverflowError("cannot fit 'int' into an index-sized integer"),
    RecursionError("maximum recursion depth exceeded"),
    RuntimeError("Storage size calculation overflowed with sizes=[1, 2]"),
    RuntimeError("k not in range for dimension\nsecond line"), ValueError("math domain")],
    ids=lambda e: type(e).__name__)
def test_any_error_a_config_may_still_raise_is_one_line(error: BaseException, monkeypatch,
                                                        capsys) -> None:
    """Past the checks, whatever the libraries raise while planning a config is one line
    and exit 2 at the command's boundary, not a traceback with exit 1."""
    import planner.cli as cli

    def raises(*args, **kwargs):
        raise error

    monkeypatch.setattr(cli, "report", raises)
    assert main(["--model", "gpt2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot plan this: {type(error).__name__}" in err


def test_the_language_flag_offers_the_course_languages(capsys) -> None:
    from i18n.languages import CODES

    with pytest.raises(SystemExit) as ended:
        main(["--language", "xx"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'xx'" in err and all(f"'{c}'" in err for c in CODES)
    assert err.count("\n") == 1 and "Traceback" not in err  # one line, no usage block
    assert main(["--model", "gpt2", "--language", "vi", "--json"]) == 0


@pytest.mark.timeout(120)
def test_a_second_learner_plans_on_beside_every_hostile_config(tmp_path: Path,
                                                               capsys) -> None:
    """Each config above, and /dev/zero, refused while another learner plans a preset in
    the same process: each refusal comes at once, and the other learner never goes a
    second without a new plan (the earlier code spent 30-47 s and 8 GiB on 10^9 layers)."""
    from tests.demos.second_learner import SecondLearner

    files = [_write(tmp_path, case, make()) for case, make in NINE.items()]
    other = SecondLearner()
    took = {}
    with other:
        for file in [*files, "/dev/zero"]:
            started = time.monotonic()
            assert main(["--config", file, "--tuning", "lora"]) == 2
            took[Path(file).name] = time.monotonic() - started
    assert capsys.readouterr().err.count("\n") == len(files) + 1
    assert max(took.values()) < 3, took
    assert other.plans >= 1 and other.longest_wait < max(1.0, 10 * other.alone), (
        other.alone, other.gaps)


# ---------------------------------------------------------------- image models' sizes

HOSTILE_PICTURES = {  # (tiny family, the field set, its value, words of the refusal)
    "huge-channels": ("sdxl-unet", "block_out_channels", [16, 32, 10**9], "no real model"),
    "many-levels": ("sd15-unet", "block_out_channels", [8] * 40, "levels"),
    "deep-transformers": ("sdxl-unet", "transformer_layers_per_block", [1, 1, 10**6],
                          "no real model"),
    "many-single-blocks": ("flux", "num_single_layers", 10**9, "no real model"),
    "huge-latents": ("sd3", "sample_size", 10**7, "no real model"),
    "huge-patch": ("flux", "patch_size", 10**5, "no real model"),
    "huge-image": ("siglip", "image_size", 10**6, "no real model"),  # in its vision_config
    "text-channels": ("flux", "in_channels", "many", "whole number"),
}


@pytest.mark.parametrize("case", list(HOSTILE_PICTURES))
def test_an_image_config_no_model_has_is_refused_before_anything_is_built(
        case: str, tmp_path: Path, capsys) -> None:
    """Channels, levels, blocks, sides and patches beyond any published image model: one
    line naming the field, exit 2, nothing built or measured."""
    from model_classes.tiny_pictures import tiny_config

    family, field, value, words = HOSTILE_PICTURES[case]
    cfg = tiny_config(family)
    cfg.get("vision_config", cfg)[field] = value
    started = time.monotonic()
    assert main(["--config", _write(tmp_path, case, cfg), "--resolution", "256"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err and words in err, err
    assert time.monotonic() - started < 2


def test_no_published_image_model_is_refused() -> None:
    from model_classes.tiny_pictures import TINY
    from planner.picture_presets import PICTURE_PRESETS, preset_config

    for cfg in [*TINY.values(), *(preset_config(name) for name in PICTURE_PRESETS)]:
        assert H.check_image_sizes(cfg) is cfg
