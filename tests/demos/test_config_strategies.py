import pytest

from memory.config import LIMITS, ConfigError, ModelConfig, parse_bytes, slider_ranges
from memory.strategies import STRATEGIES, StrategySpec, parse_strategies, parse_strategy


def test_default_config_is_valid_and_replace_works():
    cfg = ModelConfig().validated()
    assert cfg.replace(layers=2).layers == 2
    with pytest.raises(ConfigError, match="unknown config field"):
        cfg.replace(depth=3)


@pytest.mark.parametrize("field,value,needle", [
    ("layers", 0, "layers=0 is out of range; allowed 1..96"),
    ("layers", 97, "layers=97"),
    ("hidden", 16, "hidden=16"),
    ("seq_len", 10**5, "seq_len=100000"),
    ("dropout", 0.95, "dropout=0.95"),
    ("vocab", 8, "vocab=8"),
    ("layers", 2.5, "layers=2.5 must be an integer"),
])
def test_out_of_range_values_name_field_value_and_range(field, value, needle):
    with pytest.raises(ConfigError) as err:
        ModelConfig().replace(**{field: value}).validated()
    assert needle in str(err.value)
    assert ".." in str(err.value)


def test_hidden_must_divide_by_heads_and_dtype_by_device():
    with pytest.raises(ConfigError, match="divisible by heads"):
        ModelConfig(hidden=100, heads=3).validated()
    with pytest.raises(ConfigError, match="not available on cpu"):
        ModelConfig(dtype="float16").validated("cpu")
    ModelConfig(dtype="float16").validated("cuda")


def test_slider_ranges_stay_inside_limits():
    for kind in ("cpu", "cuda"):
        for name, (lo, hi, step) in slider_ranges(kind).items():
            assert lo < hi and step > 0
            limit_lo, limit_hi = LIMITS[name]
            assert limit_lo <= lo and hi <= limit_hi, (kind, name)
    assert slider_ranges("cuda")["hidden"][1] > slider_ranges("cpu")["hidden"][1]


def test_parse_strategy_forms():
    assert parse_strategy("none") == StrategySpec("none")
    assert parse_strategy("every-k:4").k == 4
    assert parse_strategy("selective").policy == "save-matmuls"
    assert parse_strategy("selective:attention").policy == "save-attention"
    b = parse_strategy("budget:dp:50MiB")
    assert (b.budget_method, b.budget_bytes) == ("dp", 50 * 2**20)
    assert parse_strategy("budget:1GB").budget_method == "greedy"
    assert parse_strategy(parse_strategy("every-k:2").label) == parse_strategy("every-k:2")
    assert [s.name for s in parse_strategies("none, sqrt")] == ["none", "sqrt"]
    assert set(STRATEGIES) == {"none", "every-layer", "every-k", "sqrt", "selective", "budget",
                               "offload"}


@pytest.mark.parametrize("text", ["foo", "every-k", "every-k:x", "selective:bogus",
                                  "budget:fast:1MiB", "budget:lots", "none:3"])
def test_bad_strategy_text_is_a_config_error(text):
    with pytest.raises(ConfigError):
        parse_strategy(text)


def test_parse_bytes():
    assert parse_bytes("1.5KiB") == 1536
    assert parse_bytes("2GB") == 2 * 10**9
    assert parse_bytes("123") == 123
    with pytest.raises(ConfigError):
        parse_bytes("lots")


# ---------------------------------------------------------------- the strategy records


def test_every_record_parses_plans_and_titles_its_own_examples():
    from memory import strategies
    from memory.strategies import PlanInputs

    inputs = PlanInputs(layers=9, block_bytes=1000, input_bytes=60)
    for record in strategies.STRATEGIES.values():
        for spec in record.examples() or (StrategySpec(record.id),):
            assert spec.strategy is record
            assert parse_strategy(spec.label) == spec  # the canonical text round-trips
            assert strategies.title(spec) == spec.title and spec.title
            assert strategies.colour(spec) == record.colour
            assert strategies.describe(spec)
            segments = strategies.plan(spec, inputs)
            assert segments[0].start == 0 and segments[-1].stop == inputs.layers
            assert all(a.stop == b.start for a, b in zip(segments, segments[1:], strict=False))


def test_titles_are_made_from_the_records_not_parsed_back():
    from memory.strategies import title

    assert title(parse_strategy("every-k:4")) == "every 4 layers"
    assert title(parse_strategy("selective")) == "selective: save the matmuls"
    assert title(StrategySpec("selective")) == "selective: save the matmuls"
    assert title(parse_strategy("budget:dp:50MiB")) == "budget (dp, 50.0 MiB)"
    assert title(parse_strategy("budget:dp:40%")) == "budget (dp, 40%)"


def test_each_selective_policy_is_titled_in_words_in_every_language():
    """A learner reads what the policy keeps, not its id ('save-matmuls'); the compiler
    page's labels are the same titles."""
    from memory.strategies import SELECTIVE_POLICIES, title
    from reports.budget_figures import point_label

    for lang in ("en", "de", "vi"):
        titles = {title(StrategySpec("selective", policy=p), lang) for p in SELECTIVE_POLICIES}
        assert len(titles) == len(SELECTIVE_POLICIES), titles
        for policy_id in SELECTIVE_POLICIES:
            text = title(StrategySpec("selective", policy=policy_id), lang)
            assert policy_id not in text, text
            assert point_label("eager", f"selective:{policy_id}", None, lang) == text
    assert title(parse_strategy("selective:save-attention"), "de") == (
        "selektiv: Attention speichern")


def test_budget_share_is_a_fraction_of_what_no_checkpointing_holds():
    from memory.strategies import PlanInputs, plan

    spec = parse_strategy("budget:dp:40%")
    assert (spec.budget_share, spec.budget_bytes, spec.label) == (0.4, None, "budget:dp:40%")
    inputs = PlanInputs(layers=10, block_bytes=1000, input_bytes=50)
    assert plan(spec, inputs) == plan(parse_strategy("budget:dp:4000"), inputs)
    for bad in ("budget:dp:0%", "budget:dp:150%", "budget:dp:x%"):
        with pytest.raises(ConfigError):
            parse_strategy(bad)


def test_the_pages_offer_budget_and_offload_only_where_they_run():
    from memory.strategies import examples

    cpu = [spec.label for spec in examples("cpu")]
    cuda = [spec.label for spec in examples("cuda")]
    assert "none" not in cpu  # the baseline is always measured anyway
    assert {"budget:dp:40%", "budget:greedy:40%"} <= set(cpu)
    assert "offload" not in cpu and "offload" in cuda


def test_selective_policies_are_an_enum_with_one_record_each():
    from memory.strategies import POLICIES, SELECTIVE_POLICIES, SelectivePolicy, policy

    assert set(POLICIES) == set(SelectivePolicy)
    assert list(SELECTIVE_POLICIES) == [p.value for p in SelectivePolicy]
    assert policy(None).policy is SelectivePolicy.SAVE_MATMULS
    with pytest.raises(ConfigError):
        policy("save-nothing")
