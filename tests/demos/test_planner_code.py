"""The code the planner hands out: the PyTorch snippets run against the installed torch
(same gradients as plain layers, keyword names from the real signatures); the Hugging Face
snippets use only keyword names the installed transformers, peft and accelerate accept (the
scripts themselves run in tests/demos/test_planner_hf_run.py). All of
it in every language, whose snippets differ only in comments and docstrings
(tests/i18n/test_code_samples.py)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools

import peft
import pytest
import torch
import torch._functorch.config
import torch.utils.checkpoint as ckpt
import transformers
from transformers.training_args import OptimizerNames

from demos.llama import LlamaBlock
from i18n import SUPPORTED
from memory import footprint as P
from memory.architectures import PRESETS
from memory.config import ModelConfig
from planner import hf_code as hf_module
from planner import torch_code as torch_module

TORCH_CALLABLES = {
    "checkpoint": ckpt.checkpoint,
    "create_selective_checkpoint_contexts": ckpt.create_selective_checkpoint_contexts,
}
LANGUAGES = [language.code for language in SUPPORTED]
ACCEPTED = {  # the keywords each library callable the scripts call accepts
    "TrainingArguments": {f.name for f in dataclasses.fields(transformers.TrainingArguments)},
    "LoraConfig": {f.name for f in dataclasses.fields(peft.LoraConfig)},
    "BitsAndBytesConfig": set(inspect.signature(
        transformers.BitsAndBytesConfig.__init__).parameters),
    "prepare_model_for_kbit_training": set(inspect.signature(
        peft.prepare_model_for_kbit_training).parameters),
    "activation_checkpointing_enable": set(inspect.signature(
        transformers.PreTrainedModel.activation_checkpointing_enable).parameters),
    "Trainer": set(inspect.signature(transformers.Trainer.__init__).parameters),
    "from_pretrained": set(inspect.signature(
        transformers.PreTrainedModel.from_pretrained).parameters) | {
        "dtype", "attn_implementation", "quantization_config"},
}


def _inputs(**changes) -> P.PlannerInputs:
    return P.PlannerInputs(PRESETS["llama-3.1-8b"], **changes)


def _calls(code: str) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("strategy", [s for s in P.STRATEGIES
                                      if s not in ("budget", "selective")])
def test_torch_snippet_runs_and_gives_the_plain_gradients(strategy: str, lang: str) -> None:
    code = torch_module.torch_code(_inputs(strategy=strategy, some_layers=2), lang)
    for call in _calls(code):
        if _name(call) in TORCH_CALLABLES:
            params = inspect.signature(TORCH_CALLABLES[_name(call)]).parameters
            for keyword in call.keywords:
                assert keyword.arg in params
                assert params[keyword.arg].kind is not inspect.Parameter.VAR_KEYWORD
    namespace: dict = {}
    exec(compile(code, f"<{strategy}>", "exec"), namespace)  # noqa: S102 - our own snippet
    cfg = ModelConfig(layers=3, hidden=32, heads=4, seq_len=8, batch=2, vocab=64)
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(LlamaBlock(cfg, i) for i in range(3))
    x = torch.randn(2, 8, 32, requires_grad=True)

    def grads(run) -> list[torch.Tensor]:
        for p in layers.parameters():
            p.grad = None
        x.grad = None
        run(x).square().mean().backward()
        return [p.grad.clone() for p in layers.parameters()] + [x.grad.clone()]

    def plain(x: torch.Tensor) -> torch.Tensor:
        for layer in layers:
            x = layer(x)
        return x

    wrapped = namespace["Layers" if strategy == "none" else "Checkpointed"](layers)
    recomputed = [0]
    hooks = [layer.register_forward_pre_hook(lambda *a: recomputed.__setitem__(
        0, recomputed[0] + 1)) for layer in layers]
    wrapped(x).sum().backward()
    for hook in hooks:
        hook.remove()
    expected = {"none": 3, "every-layer": 6, "two-layer": 6, "some-layers": 5}[strategy]
    assert recomputed[0] == expected  # forwards plus the checkpointed layers' reruns
    for a, b in zip(grads(plain), grads(wrapped), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_budget_snippet_sets_the_compiler_setting_that_exists(lang: str) -> None:
    code = torch_module.torch_code(_inputs(strategy="budget", budget=0.3), lang)
    assert "activation_memory_budget = 0.3" in code
    assert hasattr(torch._functorch.config, "activation_memory_budget")
    assert hasattr(torch, "compile")


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("strategy, tuning, optimizer, shards, chunked", list(itertools.product(
    P.STRATEGIES, P.TUNINGS, P.OPTIMIZER_KEYS, (1, 4), (False, True))))
def test_hf_snippet_uses_only_installed_names(strategy, tuning, optimizer, shards, chunked,
                                              lang) -> None:
    """Every keyword of every call the script makes is a parameter (or dataclass field) of
    the installed library's callable; the optimizer name is one of the Trainer's."""
    p = _inputs(strategy=strategy, tuning=tuning, optimizer=optimizer, shards=shards,
                chunked_loss=chunked, offload=shards > 1)
    code = hf_module.hf_code(p, lang)
    calls = {_name(c): c for c in _calls(code)}
    for call_name, call in calls.items():
        if call_name in ACCEPTED:
            assert {k.arg for k in call.keywords} <= ACCEPTED[call_name], call_name
    keywords = {k.arg: k.value for k in calls["TrainingArguments"].keywords}
    assert OptimizerNames(keywords["optim"].value)
    deprecated = ("gradient_checkpointing_enable", "gradient_checkpointing=",
                  "gradient_checkpointing_kwargs")  # transformers 4 names, gone in v6
    assert not any(name in code.replace("use_gradient_checkpointing=", "")
                   for name in deprecated)
    assert keywords["per_device_train_batch_size"].value == p.batch
    assert ("BitsAndBytesConfig" in calls) is (tuning == "qlora")
    assert ("get_peft_model" in calls) is (tuning != "full")
    assert ("fsdp" in keywords) is (shards > 1)
    assert ("use_liger_kernel" in keywords) is (chunked and hf_module.model_type(p)
                                                in hf_module.LIGER_MODEL_TYPES)
    assert "checkpoint(" not in code.replace("activation_checkpointing_enable(", "")


def test_the_pinned_versions_are_the_installed_ones() -> None:
    import accelerate
    import peft
    import transformers

    assert transformers.__version__ == hf_module.HF_VERSION
    assert peft.__version__ == hf_module.PEFT_VERSION
    assert accelerate.__version__ == hf_module.ACCELERATE_VERSION


@pytest.mark.parametrize("lang", LANGUAGES)
def test_selective_snippet_keeps_no_scores(lang: str) -> None:
    """The selective snippet's attention equals softmax(q·kᵀ/√d)·v (causal) and keeps no
    tokens × tokens tensor for backward: what the planner's selective row counts."""
    namespace: dict = {}
    source = torch_module.torch_code(_inputs(strategy="selective"), lang)
    exec(compile(source, "<selective>", "exec"), namespace)  # noqa: S102
    torch.manual_seed(0)
    b, a, s, d = 2, 4, 64, 8
    q, k, v = (torch.randn(b, a, s, d, requires_grad=True) for _ in range(3))
    saved: list[int] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t,
                                                  lambda t: t):
        out = namespace["causal_attention"](q, k, v)
    scores = (q @ k.transpose(-1, -2)) / d ** 0.5
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(out, scores.softmax(-1) @ v)
    assert saved and max(saved) < b * a * s * s


@pytest.mark.parametrize("precision, tuning", [("fp32", "full"), ("mixed", "full"),
                                               ("bf16", "full"), ("mixed", "lora"),
                                               ("bf16", "lora"), ("bf16", "qlora")])
def test_torch_train_step_runs_the_plans_precision(precision, tuning) -> None:
    """The printed train_step runs the layers under autocast exactly when the planner
    counts an autocast step (mixed precision; QLoRA in 16-bit), and leaves the weights in
    the dtype the plan says (fp32 for mixed precision, bf16 for pure bf16)."""
    p = _inputs(strategy="every-layer", precision=precision, tuning=tuning)
    code = torch_module.torch_code(p)
    namespace: dict = {}
    exec(compile(code, "<step>", "exec"), namespace)  # noqa: S102 - our own snippet
    cfg = ModelConfig(layers=2, hidden=32, heads=4, seq_len=8, batch=2, vocab=64)
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(LlamaBlock(cfg, i) for i in range(2))
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = namespace["Checkpointed"](layers).to(dtype)
    autocast: list[bool] = []
    layers[0].register_forward_pre_hook(
        lambda *a: autocast.append(torch.is_autocast_enabled("cpu")))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 8, 32, dtype=dtype)
    loss = namespace["train_step"](model, x, lambda y: y.float().square().mean(), optimizer)
    assert torch.isfinite(loss)
    assert autocast and set(autocast) == {p.autocast}
    assert {q.dtype for q in model.parameters()} == {dtype}
    assert all(q.grad is None for q in model.parameters())


@pytest.mark.parametrize("strategy, tuning, shards", list(itertools.product(
    P.STRATEGIES, P.TUNINGS, (1, 4))))
def test_printed_code_avoids_the_library_traps(strategy, tuning, shards) -> None:
    """The traps of the lab of mistakes, absent from every plan's code: PEFT's 4-bit helper
    never switches checkpointing on itself (its default runs the reentrant mode), FSDP's
    own activation checkpointing (accelerate's wrapper without the RNG state) is never
    asked for, and no selective policy runs under save_on_cpu."""
    p = _inputs(strategy=strategy, tuning=tuning, shards=shards, offload=shards > 1)
    hf = hf_module.hf_code(p)
    calls = {_name(c): c for c in _calls(hf)}
    if tuning == "qlora":
        kbit = {k.arg: ast.literal_eval(k.value)
                for k in calls["prepare_model_for_kbit_training"].keywords}
        assert kbit.get("use_gradient_checkpointing") is False or kbit.get(
            "gradient_checkpointing_kwargs", {}).get("use_reentrant") is False
    args = {k.arg: k.value for k in calls["TrainingArguments"].keywords}
    if "fsdp_config" in args:
        config = ast.literal_eval(args["fsdp_config"])
        assert not config.get("activation_checkpointing"), config
        if strategy == "every-layer":
            assert "activation_checkpointing_enable" in calls
    for code in (hf, torch_module.torch_code(p)):
        assert not ("save_on_cpu" in code and "create_selective_checkpoint_contexts" in code)
        assert "offload=True" not in code or "create_selective" not in code


def test_the_fsdp_plans_checkpointing_keeps_the_dropout_masks() -> None:
    """What the FSDP plan prints keeps the plain run's gradients on GPT-2 with its dropout
    (0.1), where accelerate's wrapper (checkpoint_wrapper(layer, preserve_rng_state=False),
    the lab's "fsdp-checkpoint-wrapper-rng" case) does not. One process: the checkpointing
    runs inside each FSDP unit the same way (tests/demos/test_planner_fsdp_run.py)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    code = hf_module.hf_code(P.PlannerInputs(PRESETS["gpt2"], strategy="every-layer",
                                             shards=2, batch=1))
    assert "model.activation_checkpointing_enable()" in code
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64,
                                     n_positions=32)
    assert config.resid_pdrop == config.attn_pdrop == 0.1
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))

    def grads(setup) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(config).train()
        setup(model)
        torch.manual_seed(1)
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        return {n: q.grad for n, q in model.named_parameters()
                if q.grad is not None and "_checkpoint_wrapped_module" not in n} | {
            n.replace("_checkpoint_wrapped_module.", ""): q.grad
            for n, q in model.named_parameters() if "_checkpoint_wrapped_module" in n}

    def accelerate_way(model) -> None:
        for i, block in enumerate(model.transformer.h):
            model.transformer.h[i] = checkpoint_wrapper(block, preserve_rng_state=False)

    plain = grads(lambda model: None)
    printed = grads(lambda model: model.activation_checkpointing_enable())
    wrapped = grads(accelerate_way)
    assert plain.keys() == printed.keys() == wrapped.keys()
    assert all(torch.equal(plain[n], printed[n]) for n in plain)
    assert max(float((plain[n] - wrapped[n]).abs().max()) for n in plain) > 1e-3


@pytest.mark.parametrize("lang", ["en", "de", "vi"])
def test_the_chunked_loss_uses_liger_only_for_the_model_types_it_patches(lang) -> None:
    """Liger Kernel (0.8.5) patches a fixed list of model types and leaves any other model
    as it is, saying so only at the info log level: `use_liger_kernel=True` for GPT-2
    would chunk nothing. The Hugging Face code prints it for Llama and says what to do
    instead for GPT-2, and the PyTorch code does not send a GPT-2 plan's chunked loss to
    the Hugging Face code."""
    from i18n import gettext
    from planner.torch_code import left_out_note

    assert "llama" in hf_module.LIGER_MODEL_TYPES and "qwen2" in hf_module.LIGER_MODEL_TYPES
    assert "gpt2" not in hf_module.LIGER_MODEL_TYPES
    llama = P.PlannerInputs(PRESETS["llama-3.1-8b"], chunked_loss=True)
    gpt2 = P.PlannerInputs(PRESETS["gpt2"], chunked_loss=True)
    assert "use_liger_kernel=True" in hf_module.hf_code(llama, lang)
    gpt2_code = hf_module.hf_code(gpt2, lang)
    arguments = {_name(c): {k.arg for k in c.keywords} for c in _calls(gpt2_code)}
    assert "use_liger_kernel" not in arguments["TrainingArguments"]
    said = " ".join(line.strip().lstrip("#").strip() for line in gpt2_code.splitlines())
    assert gettext(lang, "The plan's chunked loss: Liger Kernel has no kernels for {family} "
                         "models, and use_liger_kernel=True would leave the loss as it is. "
                         "Compute the loss a slice of positions at a time in your own "
                         "training loop.", family="gpt2") in said
    assert "use_liger_kernel computes" not in left_out_note(gpt2, "en")
    assert "use_liger_kernel computes" in left_out_note(llama, "en")
