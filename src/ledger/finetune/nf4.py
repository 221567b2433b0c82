"""Bytes of a weight matrix quantised to NF4 as bitsandbytes 0.50.2 lays it out
(computed in ``ledger.formats``, the one table of number formats; re-exported here).

``bitsandbytes.functional.quantize_4bit`` (functional.py L884-962) packs two 4-bit codes
per byte and keeps one fp32 absmax per block of 64 elements (``blocksize=None -> 64``,
L917-918) and the 16-entry fp32 code of the data type. Double quantisation
(``compress_statistics=True``, L938-951; QLoRA paper sec. 3) subtracts the absmax' mean
(one fp32 offset) and quantises them blockwise to 8 bits (``quantize_blockwise(...,
blocksize=256)``): one uint8 per block, one fp32 absmax per 256 blocks, and the 256-entry
fp32 code of the 8-bit map. Per parameter that is 0.5 + 4/64 = 0.5625 bytes, or with
double quantisation 0.5 + 1/64 + 4/(64 x 256) = 0.51587 (the paper's 0.127 bits of
constants against 0.5).

>>> nf4_bytes(4096 * 1024), nf4_bytes(4096 * 1024, double_quant=False)
(2164804, 2359360)
"""
from __future__ import annotations

# The bytes themselves live in the one table of number formats (``ledger.formats``).
from ledger.formats import nf4_bytes, nf4_bytes_per_param

__all__ = ["dequantized_bytes", "nf4_bytes", "nf4_bytes_per_param"]


def dequantized_bytes(n: int, compute_bytes: int = 2, block: int = 64,
                      double_quant: bool = True) -> float:
    """What the forward of one quantised linear holds while it runs: the full weight
    dequantised to the compute dtype (bitsandbytes backends/cuda/ops.py L904-917,
    ``_dequant_linear_fallback`` for more than 1,536 tokens: ``torch.empty(shapeB,
    dtype=A.dtype)`` then F.linear) and, double-quantised, the fp32 absmax restored
    first; the backward dequantises again (autograd/_functions.py L384)."""
    return n * compute_bytes + (4 * -(-n // block) if double_quant else 0)
