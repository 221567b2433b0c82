"""Number formats: the bytes of one tensor stored in each, scales and padding included.

One table (``FORMATS``) for training (``ledger.frameworks``) and serving (``ledger.serve``)
alike. A format is its elements' width and how scales are shared: per tensor, per row
(channel), or per block of ``block`` = (rows, cols) elements, each block scale of
``scale_bytes``, each group's zero point of ``zero_bits``. ``tensor_bytes(fmt, rows, cols)``
gives a (rows x cols) tensor's bytes as the allocating library lays it out: Transformer
Engine pads its scale tensors for its GEMMs' swizzled layout (``pad``: the non-blocked
dimension and the count of blocks along the blocked one rounded up to these multiples,
``transformer_engine/pytorch/tensor/*_tensor.py`` ``get_scale_shape``); a checkpoint or
the OCP spec keeps one scale per block, no padding (``te_padding=False``).

A TE quantized tensor may hold two copies (``usage``): row-wise (blocks along each row,
read by the forward GEMM) and column-wise (blocks along each column, read by the
backward's transposed GEMMs), each with its own scales - MXFP8 and NVFP4 quantize both
from the high-precision input (TE recipe/__init__.py L346-352, L499-505).

Large-tensor rates (bytes per element, ``bytes_per_element``): bf16 2, fp8 1, MXFP8
1 + 1/32, NVFP4 0.5 + 1/16, MXFP4 0.5 + 1/32, INT4 with fp16 scales per 128 0.5 + 2/128.

>>> tensor_bytes("mxfp8", 4096, 4096, "both")   # two FP8 copies + two E8M0 scale grids
34603008
>>> tensor_bytes("nvfp4", 4096, 4096)           # packed E2M1 + E4M3 per 16 + fp32 amax
9437188
>>> bytes_per_element("int4-g128-zp")  # 0.5 + (2 + 0.5) / 128
0.51953125
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.errors import LedgerError

TE = "TransformerEngine d0067d0d transformer_engine/pytorch"
USAGES = ("rowwise", "columnwise", "both")


@dataclass(frozen=True, kw_only=True)
class Format:
    """One number format. ``block`` (rows, cols) of elements share one scale in the
    row-wise layout (None in a place: the whole dimension; ``block`` None: one scale per
    tensor); the column-wise copy swaps them."""

    name: str
    element_bits: int  # bits of one stored element (packed two per byte below 8)
    block: tuple[int | None, int | None] | None = None
    scale_bytes: int = 0  # one block's scale
    zero_bits: int = 0  # one block's zero point (asymmetric integer formats)
    tensor_scale_bytes: int = 0  # per copy: fp32 scale_inv / amax of the whole tensor
    pad: tuple[int, int] = (1, 1)  # TE: (non-blocked dim, blocks along the blocked dim)
    copies_share_tensor_scale: bool = False  # one per-tensor scale for both copies
    source: str = ""


def _fp(name: str, bits: int, src: str) -> Format:
    return Format(name=name, element_bits=bits, source=src)


FORMATS: dict[str, Format] = {f.name: f for f in (
    _fp("fp32", 32, "IEEE 754 binary32"),
    _fp("fp16", 16, "IEEE 754 binary16"),
    _fp("bf16", 16, "bfloat16: 8 exponent, 7 mantissa bits"),
    Format(name="fp8", element_bits=8, tensor_scale_bytes=4, copies_share_tensor_scale=True,
           source=f"{TE}/tensor/float8_tensor.py L414-431 (Float8CurrentScalingQuantizer."
                  "inner_tensor_specs: uint8 _data, uint8 _transpose (not on Blackwell: "
                  "one buffer serves both), one fp32 _scale_inv); delayed scaling likewise"),
    Format(name="fp8-channel", element_bits=8, block=(1, None), scale_bytes=4,
           source="torchao float8 rowwise (torchao/float8/config.py L141-160: per-row "
                  "fp32 scales); vLLM FP8 per-channel weight_scale fp32 (out, 1)"),
    Format(name="fp8-block1x128", element_bits=8, block=(1, 128), scale_bytes=4, pad=(4, 1),
           source=f"{TE}/tensor/float8_blockwise_tensor.py L162-211 (get_scale_shape, "
                  "block_scaling_dim 1: (ceil(K/128), roundup(M, 4))), L89-107 (fp32 "
                  "scales, column-wise data transposed), block_len 128 L55"),
    Format(name="fp8-block128x128", element_bits=8, block=(128, 128), scale_bytes=4,
           pad=(1, 4),
           source=f"{TE}/tensor/float8_blockwise_tensor.py L194-200 (block_scaling_dim 2: "
                  "(ceil(M/128), roundup(ceil(K/128), 4))); DeepSeek-V3 checkpoint "
                  "weight_scale_inv fp32 (ceil(out/128), ceil(in/128)), unpadded"),
    Format(name="mxfp8", element_bits=8, block=(1, 32), scale_bytes=1, pad=(128, 4),
           source=f"OCP Microscaling Formats (MX) v1.0 sec. 5 (E4M3/E5M2 elements, k=32, "
                  f"E8M0 scale); {TE}/constants.py L175 (MXFP8_BLOCK_SCALING_SIZE 32), "
                  "tensor/mxfp8_tensor.py L139-176 (get_scale_shape: rowwise (roundup(M, "
                  "128), roundup(K/32, 4)), columnwise (roundup(M/32, 4), roundup(K, 128))), "
                  "L78-95 (uint8 data and scales for each usage)"),
    Format(name="mxfp4", element_bits=4, block=(1, 32), scale_bytes=1,
           source="OCP Microscaling Formats (MX) v1.0 sec. 5 (E2M1 elements, k=32, E8M0 "
                  "scale); gpt-oss checkpoints: *_blocks uint8 (..., K/32, 16), *_scales "
                  "uint8 (..., K/32)"),
    Format(name="nvfp4", element_bits=4, block=(1, 16), scale_bytes=1, tensor_scale_bytes=4,
           pad=(128, 4),
           source=f"{TE}/constants.py L177 (NVFP4_BLOCK_SCALING_SIZE 16), "
                  "tensor/nvfp4_tensor.py L273-307 (get_scale_shape: (roundup(M, 128), "
                  "roundup(ceil(K/16), 4)), columnwise on the transpose), L336-340 (two "
                  "values per byte), L368-399 (uint8 E4M3 scales, one fp32 amax per "
                  "usage); common/recipe/__init__.py L489-505 (E4M3 block scale + fp32 "
                  "per-tensor scale). The recipe's 16x16 weight blocks (L600-604) are "
                  "written into the same 1x16 scale tensor: bytes unchanged"),
    Format(name="nf4", element_bits=4, block=(1, 64), scale_bytes=4,
           source="bitsandbytes 0.50.2 functional.py L884-962 (quantize_4bit: packed codes, "
                  "fp32 absmax per 64, double quantisation) - ``nf4_bytes``"),
)}

# bitsandbytes' NF4 constants (QLoRA's layout; functional.py L884-962)
NF4_CODE_BYTES = 16 * 4  # the NF4 code: 16 fp32 values
NF4_CODE2_BYTES = 256 * 4  # the 8-bit map of the double-quantised absmax
NF4_OFFSET_BYTES = 4  # their fp32 mean
NF4_BLOCK2 = 256  # absmax values per second-level block

_INT = re.compile(r"^int(4|8)-(g(\d+)|channel)(-zp)?$")
_INT_SOURCE = ("vLLM awq.py AWQLinearMethod.create_weights (commit 000796ac: qweight int32 "
               "(K, N/8), scales params_dtype (K/g, N), qzeros int32 (K/g, N/8)); GPTQ "
               "the same with K packed; compressed-tensors W4A16 symmetric: no zero points")


def fmt(name: str) -> Format:
    """The format ``name`` names: a table entry, or ``int4-g128`` / ``int8-channel``
    (``-zp``: with zero points) - integer weights with fp16/bf16 scales per group."""
    if name in FORMATS:
        return FORMATS[name]
    m = _INT.match(name)
    if m is None:
        raise LedgerError("format", f"unknown number format {name!r}; known: "
                                    f"{', '.join(FORMATS)}, int4-g<group>[-zp], "
                                    f"int8-g<group>[-zp], int4-channel, int8-channel")
    bits, group = int(m.group(1)), (int(m.group(3)) if m.group(3) else None)
    if group is not None and group < 1:
        raise LedgerError("format", f"{name}: group size {group} must be >= 1")
    return Format(name=name, element_bits=bits, block=(1, group), scale_bytes=2,
                  zero_bits=bits if m.group(4) else 0, source=_INT_SOURCE)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _up(a: int, m: int) -> int:
    return _cdiv(a, m) * m


def scale_count(f: Format, rows: int, cols: int, columnwise: bool = False,
                te_padding: bool = True) -> int:
    """Block scales of one copy of a (rows x cols) tensor. Row-wise, blocks run along
    each row (the last dimension, K); column-wise along each column, i.e. the same
    grid on the transpose. With TE padding the non-blocked dimension's count and the
    block count along the blocked one are rounded up to ``pad``."""
    if f.block is None:
        return 0
    a, b = (cols, rows) if columnwise else (rows, cols)
    ba, bb = f.block
    na, nb = _cdiv(a, ba or a), _cdiv(b, bb or b)
    if te_padding:
        na, nb = _up(na, f.pad[0]), _up(nb, f.pad[1])
    return na * nb


def copy_bytes(f: Format, rows: int, cols: int, columnwise: bool = False,
               te_padding: bool = True) -> int:
    """One copy: packed elements, block scales, zero points (packed), no per-tensor
    scale."""
    data = _cdiv(rows * cols * f.element_bits, 8)
    n = scale_count(f, rows, cols, columnwise, te_padding)
    return data + n * f.scale_bytes + _cdiv(n * f.zero_bits, 8)


def tensor_bytes(name: str, rows: int, cols: int, usage: str = "rowwise",
                 te_padding: bool = True, double_quant: bool = True) -> int:
    """Bytes of a (rows x cols) tensor in format ``name``: the copies ``usage`` asks for
    (rowwise, columnwise, both) with their scales, and the per-tensor scales.
    NF4 is bitsandbytes' layout (``nf4_bytes``; one copy).

    >>> tensor_bytes("fp8-block128x128", 1536, 7168, te_padding=False)  # DeepSeek-V3 q_a_proj
    11012736
    >>> tensor_bytes("int4-g128", 4096, 4096)
    8650752
    """
    if usage not in USAGES:
        raise LedgerError("usage", f"usage is one of {', '.join(USAGES)}, got {usage!r}")
    if rows < 1 or cols < 1:
        raise LedgerError("shape", f"a tensor is at least 1 x 1, got {rows} x {cols}")
    f = fmt(name)
    if f.name == "nf4":
        return nf4_bytes(rows * cols, double_quant=double_quant)
    sides = {"rowwise": (False,), "columnwise": (True,), "both": (False, True)}[usage]
    total = sum(copy_bytes(f, rows, cols, c, te_padding) for c in sides)
    per_tensor = 1 if f.copies_share_tensor_scale else len(sides)
    return total + per_tensor * f.tensor_scale_bytes


def bytes_per_element(name: str, double_quant: bool = True) -> float:
    """The large-tensor rate of one copy: element bytes + its share of a block's scale
    and zero point (per-tensor and per-row scales and padding vanish in the limit)."""
    f = fmt(name)
    if f.name == "nf4":
        return nf4_bytes_per_param(double_quant=double_quant)
    rate = f.element_bits / 8
    if f.block is None or None in f.block:
        return rate
    return rate + (f.scale_bytes + f.zero_bits / 8) / (f.block[0] * f.block[1])


def nf4_bytes(n: int, block: int = 64, double_quant: bool = True) -> int:
    """Bytes of one tensor of ``n`` elements in NF4 as bitsandbytes 0.50.2 lays it out.

    ``quantize_4bit`` (functional.py L884-962) packs two 4-bit codes per byte and keeps
    one fp32 absmax per block of 64 (``blocksize=None -> 64``, L917-918) and the 16-entry
    fp32 code. Double quantisation (``compress_statistics=True``, L938-951; QLoRA paper
    sec. 3) subtracts the absmax' mean (one fp32 offset) and quantises them blockwise to
    8 bits (``quantize_blockwise(..., blocksize=256)``): one uint8 per block, one fp32
    absmax per 256 blocks, and the 256-entry fp32 code of the 8-bit map.

    >>> nf4_bytes(4096 * 1024), nf4_bytes(4096 * 1024, double_quant=False)
    (2164804, 2359360)
    """
    blocks = _cdiv(n, block)
    packed = _cdiv(n, 2)
    if not double_quant:
        return packed + 4 * blocks + NF4_CODE_BYTES
    return packed + blocks + 4 * _cdiv(blocks, NF4_BLOCK2) + NF4_CODE2_BYTES \
        + NF4_OFFSET_BYTES + NF4_CODE_BYTES


def nf4_bytes_per_param(block: int = 64, double_quant: bool = True) -> float:
    """NF4's large-tensor rate, constants left out: 0.5 + 4/64 = 0.5625 bytes, or double
    quantised 0.5 + 1/64 + 4/(64 x 256) = 0.515869 (the paper's 0.127 bits of constants)."""
    return 0.5 + (1 / block + 4 / (block * NF4_BLOCK2) if double_quant else 4 / block)
