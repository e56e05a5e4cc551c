"""The Hugging Face script the planner prints, run as printed on tiny random-init models of
the matching family (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM built from small
configs; nothing is downloaded): `from_pretrained` is the only call replaced (it returns the
tiny model with the dtype and attention kernel the script asks for). The Trainer trains
for real on the CPU, and the test measures the effect: which decoder layers recompute
(their MLP runs twice per micro-batch), which optimizer the Trainer built, where the
adapters sit, and in pure bf16 and mixed precision the bytes each decoder layer keeps for
backward during the Trainer's step (against the planner's layer) and the gradients' and
optimizer state's bytes (against the planner's state).

Not run here, and replaced by recorders that check what is asked of them: bitsandbytes'
4-bit loading (measured on its own in tests/real_libraries, which load the model in 4-bit
as printed; bitsandbytes' 8-bit AdamW does run here, on the CPU), Liger Kernel (CUDA
only) and FSDP (it needs several processes: here its arguments are checked by building
accelerate's plugin from them; tests/demos/test_planner_fsdp_run.py launches the printed
FSDP script for real, two processes on the CPU over gloo, and checks that each decoder
layer is its own FSDP unit, checkpointed by its own switch, with half the parameters
on each rank). `bf16=True` is allowed on the CPU (transformers refuses it without a bf16
GPU; the CPU runs bf16 autocast).
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import transformers
from transformers import LlamaConfig, TrainingArguments
from transformers import trainer_optimizer as optimizers

from memory import footprint as P
from memory.architectures import PRESETS
from planner import hf_code as hf_module
from tests.demos.class_fixtures import FAMILIES
from tests.demos.tiny_hf import SEQ, TINY, decoder_layers

torch.set_num_threads(1)

PRESET_OF = {"gpt2": "gpt2", "llama": "llama-3.2-1b", "qwen2": "qwen2.5-7b"}



class Run:
    """What the printed script did: the model it built, the kwargs of from_pretrained, the
    Trainer, MLP calls per decoder layer, and the recorders' findings."""

    def __init__(self) -> None:
        self.loaded: dict = {}
        self.model = None
        self.trainer = None
        self.mlp_calls: list[int] = []
        self.forwards = 0  # micro-batches run forward (the embedding's calls)
        self.liger = False
        self.eight_bit: str | None = None
        self.fsdp_args: TrainingArguments | None = None


def run_script(code: str, family: str, monkeypatch, tmp_path, batch: int, accumulation: int,
               fsdp: bool = False, config=None, real_8bit: bool = False) -> Run:
    """`config`: the model's config (default TINY[family]()); `real_8bit`: bitsandbytes'
    own 8-bit AdamW (it runs on the CPU), not the recorder."""
    run = Run()

    def from_pretrained(name, dtype=None, attn_implementation=None, **kwargs):
        run.loaded = {"name": name, "dtype": dtype, "attn": attn_implementation, **kwargs}
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(
            config or TINY[family](), dtype=dtype, attn_implementation=attn_implementation)
        run.model = model
        run.mlp_calls = [0] * len(decoder_layers(model))
        for index, layer in enumerate(decoder_layers(model)):
            def count(module, args, index=index):
                run.mlp_calls[index] += 1
            layer.mlp.register_forward_pre_hook(count)

        def forward(module, args):
            run.forwards += 1

        model.get_input_embeddings().register_forward_pre_hook(forward)
        return model

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(transformers.trainer, "apply_liger_kernel",
                        lambda model, config: setattr(run, "liger", True))
    adamw = optimizers._OPTIMIZER_HANDLERS[optimizers.OptimizerNames.ADAMW_TORCH]

    def eight_bit(ctx):
        run.eight_bit = ctx.args.optim
        return adamw(ctx)

    if not real_8bit:
        monkeypatch.setitem(optimizers._OPTIMIZER_HANDLERS,
                            optimizers.OptimizerNames.ADAMW_8BIT, eight_bit)
    if fsdp:
        def init(self, model, args, train_dataset) -> None:
            run.fsdp_args = args

        monkeypatch.setattr(transformers.trainer.Trainer, "__init__", init)
        monkeypatch.setattr(transformers.trainer.Trainer, "train", lambda self: None)
    # bf16=True is refused without a bf16 GPU; the CPU runs bf16 autocast all the same
    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available",
                        lambda: True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_DISABLED", "true")
    torch.manual_seed(1)
    ids = torch.randint(0, 128, (batch * accumulation, SEQ))
    dataset = [{"input_ids": row, "labels": row} for row in ids]
    namespace: dict = {"train_dataset": dataset}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "<plan>", "exec"), namespace)  # noqa: S102 - our own snippet
    run.model = namespace["model"]
    run.trainer = namespace["trainer"]
    return run


def _state_bytes_per_param(trainer) -> float:
    """The optimizer's state after the run, bytes per trained parameter (per-parameter
    tensors only: AdamW's step counters are scalars)."""
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    params = [q for group in optimizer.param_groups for q in group["params"]]
    state = sum(t.numel() * t.element_size() for q in params
                for t in optimizer.state[q].values()
                if isinstance(t, torch.Tensor) and t.numel() == q.numel())
    return state / sum(q.numel() for q in params)


def _inputs(family: str, **changes) -> P.PlannerInputs:
    return P.PlannerInputs(PRESETS[PRESET_OF[family]], batch=1, accumulation=2, **changes)


def _checkpointed(run: Run) -> list[bool]:
    """Which layers recomputed: their MLP ran twice per micro-batch, the others once."""
    assert run.forwards > 0
    assert all(calls in (run.forwards, 2 * run.forwards) for calls in run.mlp_calls)
    return [calls == 2 * run.forwards for calls in run.mlp_calls]


@pytest.mark.parametrize("family", list(TINY))
def test_every_layer_through_the_trainer(family, monkeypatch, tmp_path) -> None:
    p = _inputs(family, strategy="every-layer", precision="fp32")
    run = run_script(hf_module.hf_code(p), family, monkeypatch, tmp_path, 1, 2)
    assert run.trainer.args.activation_checkpointing
    assert all(layer.gradient_checkpointing for layer in decoder_layers(run.model))
    assert _checkpointed(run) == [True] * 4
    assert type(run.trainer.optimizer.optimizer if hasattr(run.trainer.optimizer, "optimizer")
                else run.trainer.optimizer).__name__ == "AdamW"
    from memory.precisions import OPTIMIZERS

    assert _state_bytes_per_param(run.trainer) == OPTIMIZERS["adamw"].state_bytes
    assert run.loaded["dtype"] == torch.float32 and run.loaded["attn"] == "sdpa"


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_only_the_first_k_layers_recompute(family, monkeypatch, tmp_path) -> None:
    p = _inputs(family, strategy="some-layers", some_layers=3, precision="fp32")
    code = hf_module.hf_code(p)
    assert "checkpoint(layer" not in code
    run = run_script(code, family, monkeypatch, tmp_path, 1, 2)
    flags = [layer.gradient_checkpointing for layer in decoder_layers(run.model)]
    assert flags == [True] * 3 + [False]
    assert _checkpointed(run) == [True, True, True, False]


def test_no_checkpointing_recomputes_nothing(monkeypatch, tmp_path) -> None:
    p = _inputs("llama", strategy="none", precision="fp32")
    run = run_script(hf_module.hf_code(p), "llama", monkeypatch, tmp_path, 1, 2)
    assert not run.trainer.args.activation_checkpointing
    assert _checkpointed(run) == [False] * 4


def test_selective_switches_to_the_fused_kernel(monkeypatch, tmp_path) -> None:
    """The selective step on an eager-attention plan: the fused kernel (SDPA), which
    recomputes the scores in its backward; no layer is checkpointed."""
    p = _inputs("llama", strategy="selective", fused=False, precision="fp32")
    run = run_script(hf_module.hf_code(p), "llama", monkeypatch, tmp_path, 1, 2)
    assert run.loaded["attn"] == "sdpa"
    assert run.model.config._attn_implementation == "sdpa"
    assert _checkpointed(run) == [False] * 4
    eager = _inputs("llama", strategy="none", fused=False, precision="fp32")
    assert 'attn_implementation="eager"' in hf_module.hf_code(eager)


def test_sgd_with_momentum_is_what_the_trainer_builds(monkeypatch, tmp_path) -> None:
    p = _inputs("qwen2", strategy="every-layer", optimizer="sgd-momentum", precision="fp32")
    run = run_script(hf_module.hf_code(p), "qwen2", monkeypatch, tmp_path, 1, 2)
    optimizer = run.trainer.optimizer
    optimizer = getattr(optimizer, "optimizer", optimizer)
    assert isinstance(optimizer, torch.optim.SGD)
    assert optimizer.param_groups[0]["momentum"] == 0.9
    from memory.precisions import OPTIMIZERS

    # one fp32 momentum buffer per parameter: the state the plan counts
    assert _state_bytes_per_param(run.trainer) == OPTIMIZERS["sgd-momentum"].state_bytes


@pytest.mark.parametrize("family,targets", [("llama", "all-linear"), ("qwen2", "attention"),
                                             ("gpt2", "attention")])
def test_lora_adapters_on_the_plans_layers(family, targets, monkeypatch, tmp_path) -> None:
    p = _inputs(family, tuning="lora", lora_targets=targets, lora_rank=4,
                strategy="some-layers", some_layers=2, chunked_loss=True,
                optimizer="adamw-8bit", precision="mixed")
    run = run_script(hf_module.hf_code(p), family, monkeypatch, tmp_path, 1, 2)
    from peft import PeftModel

    assert isinstance(run.model, PeftModel)
    adapted = {name.rsplit(".lora_A", 1)[0].rsplit(".", 1)[-1]
               for name, _ in run.model.named_modules() if name.endswith("lora_A")}
    expected = {("llama", "all-linear"): {"q_proj", "k_proj", "v_proj", "o_proj",
                                          "gate_proj", "up_proj", "down_proj"},
                ("qwen2", "attention"): {"q_proj", "k_proj", "v_proj", "o_proj"},
                ("gpt2", "attention"): {"c_attn", "c_proj"}}[(family, targets)]
    assert adapted == expected
    trained = [n for n, q in run.model.named_parameters() if q.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    assert _checkpointed(run) == [True, True, False, False]
    # the chunked loss: Liger's fused linear + cross-entropy, for the model types it patches
    assert run.liger is (family in hf_module.LIGER_MODEL_TYPES)
    assert run.eight_bit == "adamw_8bit"  # the Trainer asked bitsandbytes for 8-bit AdamW
    assert run.loaded["dtype"] == torch.bfloat16 and run.trainer.args.bf16


def test_8bit_adamw_keeps_the_state_the_plan_counts(monkeypatch, tmp_path) -> None:
    """bitsandbytes' own 8-bit AdamW (0.50.2 runs it on the CPU) under the printed Trainer
    arguments: one byte per moment, two per parameter, for every tensor of at least 4,096
    numbers (its `min_8bit_size`; smaller ones, the norms, keep 32-bit moments: a rounding
    error in a real model, where every matrix is far larger)."""
    import bitsandbytes as bnb

    from memory.precisions import OPTIMIZERS

    p = _inputs("llama", strategy="every-layer", optimizer="adamw-8bit", precision="fp32")
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
    run = run_script(hf_module.hf_code(p), "llama", monkeypatch, tmp_path, 1, 2,
                     config=config, real_8bit=True)
    optimizer = getattr(run.trainer.optimizer, "optimizer", run.trainer.optimizer)
    assert isinstance(optimizer, bnb.optim.optimizer.Optimizer8bit)
    table = run.model.get_input_embeddings().weight
    big = small = 0
    for group in optimizer.param_groups:
        for q in group["params"]:
            moments = [t for t in optimizer.state[q].values()
                       if isinstance(t, torch.Tensor) and t.numel() == q.numel()]
            per_param = sum(t.element_size() for t in moments)
            if q is table:  # the Trainer keeps embeddings in 32 bits, as the plan counts
                assert per_param == OPTIMIZERS["adamw"].state_bytes
            elif q.numel() >= 4096:
                big += 1
                assert per_param == OPTIMIZERS["adamw-8bit"].state_bytes, q.shape
            else:
                small += 1
                assert per_param == 8, q.shape
    assert big >= 2 * 5 + 1 and small >= 1  # q, o and the MLP per layer, the head
    # the plan: 2 bytes per parameter, 8 for the token table (Llama 3.1 8B: 128,256 × 4,096)
    arch = p.arch
    table_params = arch.vocab * arch.hidden
    state = P.state_bytes(p)["optimizer"]
    assert state == pytest.approx(2 * arch.params() + 6 * table_params)


def test_qlora_script_runs_with_the_quantisation_left_out(monkeypatch, tmp_path) -> None:
    """bitsandbytes is not installed: the 4-bit load is not run (from_pretrained is
    replaced); the config is built and passed, and the rest runs as printed."""
    p = _inputs("llama", tuning="qlora", strategy="every-layer", precision="mixed")
    code = hf_module.hf_code(p)
    run = run_script(code, "llama", monkeypatch, tmp_path, 1, 2)
    config = run.loaded["quantization_config"]
    assert isinstance(config, transformers.BitsAndBytesConfig)
    assert config.load_in_4bit and config.bnb_4bit_quant_type == "nf4"
    assert config.bnb_4bit_use_double_quant
    assert "prepare_model_for_kbit_training" in code
    assert _checkpointed(run) == [True] * 4


@pytest.mark.parametrize("family,layer", [("llama", "LlamaDecoderLayer"),
                                          ("gpt2", "GPT2Block")])
def test_fsdp_wraps_each_decoder_layer_and_checkpoints_with_the_models_switch(
        family, layer, monkeypatch, tmp_path) -> None:
    from accelerate.utils import FullyShardedDataParallelPlugin

    p = _inputs(family, strategy="every-layer", shards=4, precision="mixed")
    code = hf_module.hf_code(p)
    run = run_script(code, family, monkeypatch, tmp_path, 1, 2, fsdp=True)
    args = run.fsdp_args
    assert args is not None and args.fsdp
    # the model's own switch (torch's checkpoint keeps the RNG state); neither the
    # training argument nor FSDP's own (accelerate's wrapper drops the RNG state)
    assert not args.activation_checkpointing
    assert not args.fsdp_config.get("activation_checkpointing")
    assert all(layer.gradient_checkpointing for layer in decoder_layers(run.model))
    assert args.fsdp_config["transformer_layer_cls_to_wrap"] == [layer]
    assert type(decoder_layers(run.model)[0]).__name__ == layer
    assert layer in run.model._no_split_modules
    plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    assert not plugin.activation_checkpointing and plugin.fsdp_version == 2
    assert "--num_processes 4" in code


def _kept_by_one_layer(attn: str, batch: int, seq: int) -> int:
    """Bytes the second decoder layer of a tiny LlamaForCausalLM (fp32) saves for backward,
    each storage once; the weights and the rotary cos/sin (made once, shared by every
    layer) left out."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(TINY["llama"](),
                                                          attn_implementation=attn)
    model.train()
    layer = decoder_layers(model)[1]
    skip = {q.untyped_storage().data_ptr() for q in model.parameters()}
    on, kept = [False], {}

    def start(module, args, kwargs) -> None:
        on[0] = True
        skip.update(t.untyped_storage().data_ptr() for t in kwargs["position_embeddings"])

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if on[0] and storage.data_ptr() not in skip:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    layer.register_forward_pre_hook(start, with_kwargs=True)
    layer.register_forward_hook(lambda *a: on.__setitem__(0, False))
    ids = torch.randint(0, 128, (batch, seq))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return sum(kept.values())


def test_the_selective_row_is_what_the_printed_switch_keeps() -> None:
    """An eager-attention plan's selective row keeps, per layer, exactly what the real
    Llama layer keeps once the printed code switches it to SDPA; the plain eager layer
    keeps the scores on top (both measured, fp32, CPU)."""
    from memory.hf_config import architecture
    from memory.layer import layer_bytes

    batch, seq = 2, 32
    arch = architecture(TINY["llama"]().to_json_string())
    eager = P.PlannerInputs(arch, seq=seq, batch=batch, precision="fp32", device="cpu",
                            fused=False)
    sdpa_bytes = _kept_by_one_layer("sdpa", batch, seq)
    assert P.activations(eager, "selective").kept == arch.layers * sdpa_bytes
    assert layer_bytes(eager.with_(fused=True).tensors()) == sdpa_bytes
    eager_bytes = _kept_by_one_layer("eager", batch, seq)
    assert P.activations(eager, "none").kept == arch.layers * eager_bytes > arch.layers * sdpa_bytes
    code = hf_module.hf_code(eager.with_(strategy="selective"))
    assert 'attn_implementation="sdpa"' in code


def test_qlora_over_fsdp_stores_the_4bit_weights_as_bf16(monkeypatch, tmp_path) -> None:
    p = _inputs("qwen2", tuning="qlora", strategy="every-layer", shards=2, precision="mixed")
    run = run_script(hf_module.hf_code(p), "qwen2", monkeypatch, tmp_path, 1, 2, fsdp=True)
    assert run.loaded["quantization_config"].bnb_4bit_quant_storage == torch.bfloat16
    assert run.fsdp_args.fsdp_config["transformer_layer_cls_to_wrap"] == ["Qwen2DecoderLayer"]


# ---------------------------------------------------------------- the precision it runs in


def _kept_in_the_trainer_step(run: Run) -> list[int]:
    """Bytes each decoder layer saved for backward during the Trainer's first step, each storage
    once, attributed to the layer running when it was first saved; parameters, autocast's
    16-bit copies of trainable weights (the planner counts them with the weights) and what
    is made outside the layers and passed to each (rotary cos/sin, masks) left out."""
    from memory.saved_weights import is_weight_copy

    layers = decoder_layers(run.model)
    state: dict = {"layer": None, "shared": set()}
    kept: dict[int, tuple[int, int]] = {}

    calls = [0] * len(layers)

    def pre(module, args, kwargs, i) -> None:
        calls[i] += 1  # the first step only (the Trainer runs three epochs by default)
        state["layer"] = i if calls[i] == 1 else None
        for t in [*args[1:], *kwargs.values()]:
            for u in (t if isinstance(t, tuple) else (t,)):
                if isinstance(u, torch.Tensor) and u is not kwargs.get("hidden_states"):
                    state["shared"].add(u.untyped_storage().data_ptr())

    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda m, a, k, i=i: pre(m, a, k, i), with_kwargs=True)
        layer.register_forward_hook(lambda *a: state.__setitem__("layer", None))
    params = {q.untyped_storage().data_ptr() for q in run.model.parameters()}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if (state["layer"] is not None and key not in kept and key not in params
                and key not in state["shared"] and storage.nbytes() and not is_weight_copy(t)):
            kept[key] = (state["layer"], storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run.trainer.train()
    per_layer = [0] * len(layers)
    for layer, nbytes in kept.values():
        per_layer[layer] += nbytes
    return per_layer


@pytest.mark.parametrize("tuning", ["full", "lora"])
@pytest.mark.parametrize("precision", ["bf16", "mixed"])
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_the_printed_precision_keeps_the_plans_bytes(family, precision, tuning, monkeypatch,
                                                     tmp_path) -> None:
    """The printed script, its Trainer step measured: every decoder layer keeps for backward
    what the planner's layer keeps at the same shapes and precision (pure bf16: bf16
    weights, no autocast; mixed: autocast over fp32 weights, or over a bf16 base under
    LoRA), and the Trainer's optimizer, gradients and adapters take the planner's bytes
    per trained parameter."""
    from demos.real_models import sdpa_fused
    from memory.hf_config import architecture
    from memory.layer import layer_bytes

    batch = 2
    arch = architecture(TINY[family]().to_json_string())
    p = P.PlannerInputs(arch, seq=SEQ, batch=batch, accumulation=1, precision=precision,
                        tuning=tuning, lora_rank=4, lora_targets="all-linear",
                        strategy="none", device="cpu", fused=sdpa_fused(arch))
    code = hf_module.hf_code(p)
    assert ("\n    bf16=True," in code) == (precision == "mixed")
    # the script is run with train() held back, so that the step can be measured
    trainer_train = transformers.Trainer.train
    monkeypatch.setattr(transformers.Trainer, "train", lambda self: None)
    run = run_script(code, family, monkeypatch, tmp_path, batch, 1)
    monkeypatch.setattr(transformers.Trainer, "train", trainer_train)
    assert run.trainer.args.bf16 == (precision == "mixed")
    weights = {q.dtype for q in run.model.parameters() if not q.requires_grad or tuning == "full"}
    assert weights == {torch.float32 if precision == "mixed" and tuning == "full"
                       else torch.bfloat16}
    kept = _kept_in_the_trainer_step(run)
    assert _checkpointed(run) == [False] * 4
    lora = tuning == "lora"  # the first layer's input needs no gradient (frozen embedding)
    expected = [layer_bytes(p.tensors(input_grad=i > 0 or not lora)) for i in range(4)]
    assert kept == expected
    trained = [q for q in run.model.parameters() if q.requires_grad]
    n = sum(q.numel() for q in trained)
    state = P.state_bytes(p)
    assert state["trainable"] == n
    # gradients take the trained parameters' dtype: fp32 adapters under LoRA
    assert sum(q.element_size() * q.numel() for q in trained) == state["gradients"]
    assert _state_bytes_per_param(run.trainer) * n == state["optimizer"]


# LoRA on the attention only, by the class's own names (fused qkv_proj, query_key_value)
ATTENTION_LORA = ("mixtral-8x7b", "phi-3-mini-4k", "falcon-7b", "pythia-1b")


@pytest.mark.parametrize("name", FAMILIES)
def test_the_printed_script_runs_for_every_family(name, monkeypatch, tmp_path) -> None:
    """A pasted config.json of each family (its keys at a tiny size), planned on its class:
    the script it prints trains the tiny model of that class with every layer
    checkpointed; Gemma 2 (no SDPA in its class) loads with eager attention; a
    mixture-of-experts model gets LoRA on its linear layers (its experts, 3-D
    parameters, stay frozen)."""
    from model_classes.causal_lm_config import hf_config
    from planner.class_cache import from_config_json
    from tests.demos.class_fixtures import load, tiny

    cfg = tiny(load(name))
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    arch, source = from_config_json(json.dumps(cfg))
    moe = any(key in cfg for key in ("num_experts", "num_local_experts"))
    p = P.PlannerInputs(arch, batch=1, accumulation=2, strategy="every-layer",
                        precision="fp32", source=source,
                        fused="sdpa" in source.kernels,
                        tuning="lora" if moe or name in ATTENTION_LORA else "full",
                        lora_rank=4,
                        lora_targets="attention" if name in ATTENTION_LORA else "all-linear")
    code = hf_module.hf_code(p)
    run = run_script(code, "", monkeypatch, tmp_path, 1, 2, config=hf_config(cfg))
    assert all(layer.gradient_checkpointing for layer in decoder_layers(run.model))
    assert _checkpointed(run) == [True] * len(decoder_layers(run.model))
    assert run.loaded["attn"] == ("eager" if name == "gemma-2-9b" else "sdpa")
    if p.tuning == "lora":
        trained = {n for n, q in run.model.named_parameters() if q.requires_grad}
        assert trained and all("lora_" in n for n in trained)
        if name in ATTENTION_LORA:  # the class's own attention names (fused qkv ...)
            assert all(any(part in n for part in ("attn", "attention")) for n in trained)
