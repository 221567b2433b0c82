"""NF4 and optimizer-state bytes against the libraries that define them, on the CPU.

Third-party: bitsandbytes 0.50.2 quantises a small tensor to NF4 (its CPU library) and
its 8-bit optimizers step once on the CPU; torch's Adam/Adafactor-free state and
transformers' Adafactor are counted from the state dicts they build. Nothing here
computes an expected value with the ledger's own formulas.
"""
import warnings

import pytest

from ledger.finetune import nf4_bytes
from ledger.memory import OPTIMIZERS, factored_bytes, optimizer_state_per_param

torch = pytest.importorskip("torch")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # bitsandbytes notes its optional 'kernels' package
    bnb = pytest.importorskip("bitsandbytes")


def _bnb_nf4_bytes(shape, double_quant):
    w = torch.randn(*shape, dtype=torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        packed, state = bnb.functional.quantize_4bit(w, blocksize=64, quant_type="nf4",
                                                     compress_statistics=double_quant)
    total = packed.numel() * packed.element_size() + state.code.numel() * 4
    total += state.absmax.numel() * state.absmax.element_size()
    if double_quant:
        s2 = state.state2
        total += s2.absmax.numel() * 4 + s2.code.numel() * 4 + state.offset.numel() * 4
    return total


@pytest.mark.parametrize("shape", [(4096, 1024), (1000, 64), (333, 7)])
@pytest.mark.parametrize("double_quant", [True, False])
def test_nf4_bytes_match_bitsandbytes(shape, double_quant):
    n = shape[0] * shape[1]
    assert nf4_bytes(n, 64, double_quant) == _bnb_nf4_bytes(shape, double_quant)


def _bnb_state_bytes(cls, numel):
    p = torch.nn.Parameter(torch.randn(numel))
    opt = cls([p], lr=1e-3)
    p.grad = torch.randn(numel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # paged optimizers fall back on the CPU
        opt.step()
    state = opt.state[p]
    return sum(v.numel() * v.element_size() for k, v in state.items()
               if torch.is_tensor(v) and k not in ("qmap1", "qmap2") and v.numel() > 1)


@pytest.mark.parametrize("name,cls", [("adam8bit", "AdamW8bit"), ("lion8bit", "Lion8bit"),
                                      ("paged-adam8bit", "PagedAdamW8bit"), ("lion", "Lion")])
def test_optimizer_state_matches_bitsandbytes(name, cls):
    numel = 256 * 64  # above min_8bit_size, whole 256-element blocks
    want = _bnb_state_bytes(getattr(bnb.optim, cls), numel) / numel
    assert optimizer_state_per_param(name, master=0, moment=4) == want


def test_adam_state_in_the_param_dtype():
    """torch AdamW keeps two moments in the param dtype: 8 B fp32, 4 B bf16 (master off)."""
    for dtype, moment in ((torch.float32, 4), (torch.bfloat16, 2)):
        p = torch.nn.Parameter(torch.randn(64, 64, dtype=dtype))
        opt = torch.optim.AdamW([p])
        p.grad = torch.randn_like(p)
        opt.step()
        got = sum(v.numel() * v.element_size() for k, v in opt.state[p].items()
                  if k != "step") / p.numel()
        assert optimizer_state_per_param("adamw", 0, moment) == got


def test_adafactor_factored_state_matches_transformers():
    transformers = pytest.importorskip("transformers")
    p = torch.nn.Parameter(torch.randn(96, 40))
    opt = transformers.optimization.Adafactor([p], lr=1e-3, relative_step=False,
                                              scale_parameter=False, warmup_init=False)
    p.grad = torch.randn_like(p)
    opt.step()
    got = sum(v.numel() * v.element_size() for k, v in opt.state[p].items()
              if torch.is_tensor(v) and v.dim() > 0)
    assert factored_bytes(96, 40) == got == 4 * (96 + 40)
    assert OPTIMIZERS["adafactor"].factored


def test_nf4_rate_is_the_qlora_papers():
    """QLoRA sec. 3: 32/64 = 0.5 bits of constants per parameter without double
    quantisation, 8/64 + 32/(64 x 256) = 0.127 with it, on top of 4 bits."""
    n = 64 * 256 * 1024
    assert nf4_bytes(n, 64, False) * 8 / n == pytest.approx(4 + 0.5, abs=1e-3)
    assert nf4_bytes(n, 64, True) * 8 / n == pytest.approx(4 + 0.127, abs=1e-3)
