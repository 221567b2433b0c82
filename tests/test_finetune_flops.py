"""A fine-tune's FLOPs against torch's own count of a peft model's training step.

The expected value is third-party: ``torch.utils.flop_counter.FlopCounterMode`` (torch
2.13.0) around one forward and backward of transformers 5.23.0's Llama with peft 0.21.2's
adapters (tiny real CPU tensors). It counts what autograd runs: a frozen matrix's forward
and input gradient but no weight gradient, the adapters' six GEMMs, DoRA's B(A(I)) each
forward, peft's fold of B A into fused experts. On CPU it counts the linear layers alone
(the attention core's SDPA kernel is not registered with it: the ops it reports are
checked), so the ledger's side is its
matmul FLOPs - ``finetune_flops_per_token`` less the attention core - and the GEMMs
``ledger.step.tuned`` times, read as FLOPs on a GPU of unit peak and efficiency.

``enable_input_require_grads`` (what peft's prepare_model_for_kbit_training and
transformers' reentrant gradient checkpointing switch on) makes the first layer's input
carry a gradient; without it autograd also skips layer 0's q, k, v input gradients (those
matrices read the frozen embedding's output), by hand below.
"""
import warnings
from dataclasses import replace

import pytest

from ledger.arch import attention_flops_per_token, finetune_flops_per_token
from ledger.config import ParallelConfig
from ledger.finetune import FineTune
from ledger.io import spec_from_dict
from ledger.step import DEFAULT
from ledger.step.tuned import head_wgrad_share, tuned_gemms
from ledger.system import GPUS

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    peft = pytest.importorskip("peft")

TOKENS = 16
CONFIG = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 128, "tie_word_embeddings": False}
# transformers 5's fused experts, run expert by expert ("eager": the grouped kernel is not
# registered with the counter), in bf16 as they train (peft folds B A in by baddbmm then)
MIXTRAL = {**CONFIG, "model_type": "mixtral", "num_local_experts": 4,
           "num_experts_per_tok": 2}
# label -> (peft LoraConfig keywords or the module names a full fine-tune freezes; the
#           ledger's FineTune)
CASES = {
    "lora all-linear": (dict(target_modules="all-linear"),
                        FineTune(method="lora", lora_rank=4, lora_alpha=8,
                                 lora_targets="all-linear")),
    "lora q,v": (dict(target_modules=["q_proj", "v_proj"]),
                 FineTune(method="lora", lora_rank=4, lora_alpha=8,
                          lora_targets=("q_proj", "v_proj"))),
    "dora all-linear": (dict(target_modules="all-linear", use_dora=True),
                        FineTune(method="lora", lora_rank=4, lora_alpha=8,
                                 lora_targets="all-linear", dora=True)),
    "full, attention and output frozen": (("self_attn", "lm_head", "embed_tokens"),
                                          FineTune(freeze=("attention", "output",
                                                           "embedding"))),
    "full, layer 0 frozen": (("layers.0.", "embed_tokens"),
                             FineTune(freeze=("embedding",), freeze_layers=(0, 1))),
    "mixtral full": ((), FineTune()),
    "mixtral lora q,v": (dict(target_modules=["q_proj", "v_proj"]),
                         FineTune(method="lora", lora_rank=4, lora_alpha=8,
                                  lora_targets=("q_proj", "v_proj"))),
    "mixtral lora all-linear": (dict(target_modules="all-linear"),  # experts, router wrapped
                                FineTune(method="lora", lora_rank=4, lora_alpha=8,
                                         lora_targets="all-linear")),
}
WRAPPED = ("dora all-linear", "mixtral lora all-linear")  # FLOPs no token's count holds


def _config(label) -> dict:
    return MIXTRAL if label.startswith("mixtral") else CONFIG


def _model(label, setting):
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = _config(label)
    conf = transformers.AutoConfig.for_model(**cfg, attn_implementation="sdpa",
                                             experts_implementation="eager")
    model = transformers.AutoModelForCausalLM.from_config(conf)
    if cfg is MIXTRAL:
        model = model.to(torch.bfloat16)
    if isinstance(setting, dict):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, **setting))
    for name, p in model.named_parameters():
        p.requires_grad_(not any(part in name for part in setting))
    return model


def _counted(label, setting, input_grads: bool = True) -> int:
    """FLOPs torch counts in one training step of the model."""
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(label, setting)
    if input_grads:
        model.enable_input_require_grads()
    model.train()
    ids = torch.randint(0, CONFIG["vocab_size"], (1, TOKENS))
    counter = FlopCounterMode(display=False)
    with counter:
        model(input_ids=ids).logits.float().sum().backward()
    ops = {str(op) for op in counter.get_flop_counts()["Global"]}
    assert ops <= {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm"}, ops  # no attention
    return counter.get_total_flops()


def _spec(label):
    return spec_from_dict(_config(label)).with_seq(TOKENS)


@pytest.mark.parametrize("label", [k for k in CASES if k not in WRAPPED])
def test_model_flops_are_torch_s_count(label):
    """What MFU counts (``finetune_flops_per_token``) is what autograd runs, matmul by
    matmul, routed experts included; DoRA's once-a-step norm and peft's fold of B A into
    fused experts are not a token's FLOPs (next test)."""
    setting, ft = CASES[label]
    spec = _spec(label)
    matmul = finetune_flops_per_token(spec, ft) - attention_flops_per_token(spec)
    assert matmul * TOKENS == _counted(label, setting)


def _unit_gpu():
    gpu = replace(GPUS["h100-sxm"], bf16_flops=1.0, gemm_efficiency=1.0)
    return gpu, replace(DEFAULT, gemm_half_balance=0.0)  # gemm_s(m, n, k) = 2 m n k


@pytest.mark.parametrize("label", sorted(CASES))
def test_timed_gemms_are_torch_s_count(label):
    """The GEMMs the step time prices (``ledger.step.tuned``: forward, input and weight
    gradients of every layer, and the output head's), as FLOPs."""
    setting, ft = CASES[label]
    spec = _spec(label)
    gpu, cal = _unit_gpu()
    cfg = ParallelConfig(framework="hf", finetune=ft)
    g = tuned_gemms(spec, cfg, TOKENS, gpu, cal)
    head = 2 * TOKENS * spec.vocab * spec.hidden * (2 + head_wgrad_share(spec, ft))
    assert spec.layers * (g.forward + g.dgrad + g.wgrad) + head == _counted(label, setting)


def test_qlora_dequantises_every_nf4_weight_in_each_pass():
    """By hand: a layer's 12,288 attention and 18,432 MLP weights read as NF4 with double
    quantisation (0.5 + 1/64 + 4/16,384 B) and written in bf16 (2 B), in the forward and
    again in the backward's input-gradient pass, at the GPU's HBM bandwidth (here 1 B/s);
    the weight-gradient pass reads none."""
    spec = _spec("qlora")
    gpu, cal = _unit_gpu()
    gpu = replace(gpu, hbm_bytes_per_s=1.0)
    lora, qlora = (tuned_gemms(spec, ParallelConfig(framework="hf", finetune=FineTune(
        method=m, lora_rank=4, lora_alpha=8, lora_targets="all-linear")), TOKENS, gpu, cal)
        for m in ("lora", "qlora"))
    per_pass = (12_288 + 18_432) * (0.5 + 1 / 64 + 4 / 16_384 + 2)
    assert qlora.forward - lora.forward == pytest.approx(per_pass, rel=1e-12)
    assert qlora.dgrad - lora.dgrad == pytest.approx(per_pass, rel=1e-12)
    assert qlora.wgrad == lora.wgrad


def test_without_input_grads_layer_0_skips_q_k_v_input_gradients():
    """By hand: q (64 -> 64), k and v (64 -> 32) of layer 0 read the frozen embedding's
    normed output, so neither they nor their adapters' A (64 -> 4 each) pass a gradient
    back: 2 x 16 tokens x (64 x 128 + 3 x 64 x 4) fewer FLOPs."""
    setting = CASES["lora all-linear"][0]
    skipped = 2 * TOKENS * (64 * (64 + 32 + 32) + 3 * 64 * 4)
    assert _counted("lora", setting, input_grads=False) == _counted("lora", setting) - skipped
