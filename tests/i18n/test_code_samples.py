"""The code samples pages show (the planner's Hugging Face and PyTorch snippets, the verify
page's offline check) are the same code in every language: only comments and docstrings
are translated, and in German and Vietnamese no comment line is left as the English one
(unless it holds nothing but code names)."""

from __future__ import annotations

import ast
import io
import itertools
import re
import tokenize

import pytest

from i18n import DEFAULT, SUPPORTED
from memory import footprint as P
from memory.architectures import PRESETS
from planner import hf_code as hf_module
from planner import torch_code as torch_module
from ui.verify_view import offline_check

TRANSLATED = [language.code for language in SUPPORTED if language.code != DEFAULT]


def _settings() -> list[P.PlannerInputs]:
    """Every snippet builder's branches: each strategy, tuning, sharding and loss choice."""
    base = P.PlannerInputs(PRESETS["llama-3.1-8b"])
    return [base.with_(strategy=strategy, tuning=tuning, shards=shards, offload=shards > 1,
                       chunked_loss=chunked, some_layers=some)
            for strategy, tuning, shards, chunked, some in itertools.product(
                P.STRATEGIES, P.TUNINGS, (1, 4), (False, True), (1, 3))]


def samples(code: str) -> list[str]:
    """Every code sample in language `code`, in a fixed order."""
    builders = (hf_module.hf_code, torch_module.torch_code)
    snippets = [builder(p, code) for p in _settings() for builder in builders]
    return [*snippets, offline_check(code)]


def code_only(source: str) -> str:
    """The syntax tree of `source` without docstrings (comments never reach it)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(source).readline))


def prose_lines(source: str) -> list[str]:
    """The comment lines and docstring lines of `source`, stripped."""
    comments = [tok.string.lstrip("#").strip() for tok in _tokens(source)
                if tok.type == tokenize.COMMENT]
    docs = [ast.get_docstring(node) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)]
    return comments + [line.strip() for doc in docs if doc for line in doc.splitlines()]


def is_prose(line: str, names: set[str]) -> bool:
    """Whether `line` has a word that is not code: not inside backticks, not a token with
    code punctuation (`from_pretrained(...`, `key_id`, `nn.ModuleList`), not a name of the
    sample's code."""
    line = re.sub(r"`[^`]*`", " ", line)
    words = [word.strip(",;:!?") for word in line.split()]
    return any(re.fullmatch(r"[^\W\d_]{2,}", word) and word not in names for word in words
               if not re.search(r"[_.()=\[\]{}\"']", word))


def english_left(english: str, translated: str) -> list[str]:
    """The prose lines of `translated` that are lines of `english` word for word."""
    names = {tok.string for tok in _tokens(english) if tok.type == tokenize.NAME}
    originals = set(prose_lines(english))
    return [line for line in prose_lines(translated)
            if line in originals and is_prose(line, names)]


@pytest.fixture(scope="module")
def english() -> list[str]:
    return samples(DEFAULT)


@pytest.mark.parametrize("code", TRANSLATED)
def test_a_translated_sample_is_the_english_code(code: str, english: list[str]) -> None:
    translated = samples(code)
    assert len(translated) == len(english)
    for source, original in zip(translated, english, strict=True):
        assert code_only(source) == code_only(original), source


@pytest.mark.parametrize("code", TRANSLATED)
def test_no_english_comment_is_left(code: str, english: list[str]) -> None:
    for source, original in zip(samples(code), english, strict=True):
        assert english_left(original, source) == [], source
        assert bool(prose_lines(source)) == bool(prose_lines(original)), source


def test_the_checks_catch_english_comments_and_changed_code(english: list[str]) -> None:
    """The checkers on broken samples: English left, a changed argument, code names only."""
    commented = [source for source in english if any(
        is_prose(line, set()) for line in prose_lines(source))]
    assert len(commented) > len(english) // 2  # most samples have prose to translate
    for source in commented:
        assert english_left(source, source), source
    check = offline_check(DEFAULT)
    assert code_only(check) != code_only(check.replace("sort_keys=True", "sort_keys=False"))
    assert code_only(check) == code_only(check.replace("# ", "# Kommentar "))
    assert not is_prose("from_pretrained(..., quantization_config=quantization)", set())
    assert not is_prose("`layers` nn.ModuleList", set())
    assert is_prose("For from_pretrained(...)", set())
