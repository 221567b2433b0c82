"""Number formats' bytes (``ledger.formats``) by hand and against Transformer Engine's
allocation formulas.

The TE references below are TE's own shape rules transcribed as TE writes them (the
``get_scale_shape`` / ``inner_tensor_specs`` of each quantizer at TransformerEngine
d0067d0d, file and lines named at each): shapes first, bytes = numel x dtype size, so a
mistake in the ledger's generic (block, pad) table shows up as a different product.
"""
import math

import pytest

from ledger.errors import LedgerError
from ledger.formats import FORMATS, bytes_per_element, fmt, nf4_bytes, tensor_bytes


def _up(v, m):  # transformer_engine/pytorch/utils.py L746-751 round_up_to_nearest_multiple
    return ((v + m - 1) // m) * m


def _numel(shape):
    return math.prod(shape)


def te_mxfp8_specs(m, k, rowwise, columnwise):
    """tensor/mxfp8_tensor.py L78-95 (uint8 data and uint8 scale_inv per usage) with
    get_scale_shape L139-176."""
    specs = []
    if rowwise:
        specs += [((m, k), 1), ((_up(m, 128), _up(k // 32, 4)), 1)]
    if columnwise:
        specs += [((m, k), 1), ((_up(m // 32, 4), _up(k, 128)), 1)]
    return specs


def te_nvfp4_specs(m, k, rowwise, columnwise):
    """tensor/nvfp4_tensor.py L368-399: data (shape[:-1], K // 2) uint8 (L336-340),
    E4M3 scales as uint8 (get_scale_shape L273-307), one fp32 amax per usage."""
    specs = []
    if rowwise:
        specs += [((m, k // 2), 1), ((_up(m, 128), _up(math.ceil(k / 16), 4)), 1), ((1,), 4)]
    if columnwise:
        specs += [((k, m // 2), 1), ((_up(k, 128), _up(math.ceil(m / 16), 4)), 1), ((1,), 4)]
    return specs


def te_block_specs(m, k, dim, rowwise, columnwise):
    """tensor/float8_blockwise_tensor.py L89-107 (uint8 data, fp32 scales) with
    get_scale_shape L162-211 (block_len 128, L55)."""
    def scale(columnwise):
        if dim == 2:
            s0, s1 = (m + 127) // 128, (k + 127) // 128
            return (s1, _up(s0, 4)) if columnwise else (s0, _up(s1, 4))
        return ((m + 127) // 128, _up(k, 4)) if columnwise else ((k + 127) // 128, _up(m, 4))
    specs = []
    if rowwise:
        specs += [((m, k), 1), (scale(False), 4)]
    if columnwise:
        specs += [((k, m), 1), (scale(True), 4)]
    return specs


def te_bytes(specs):
    return sum(_numel(shape) * size for shape, size in specs)


USAGE = {"rowwise": (True, False), "columnwise": (False, True), "both": (True, True)}
# Shapes TE quantizes (both dims multiples of 32): square, tall, wide, small, and ones
# whose scale grids need padding (96 rows -> 128; 7168/32 = 224 blocks; 2880 hidden).
SHAPES = [(4096, 4096), (1536, 7168), (7168, 18432), (96, 64), (2880, 2880), (32, 160),
          (128256 // 32 * 32, 4096)]


@pytest.mark.parametrize("m,k", SHAPES)
@pytest.mark.parametrize("usage", USAGE)
def test_mxfp8_bytes_are_transformer_engines(m, k, usage):
    assert tensor_bytes("mxfp8", m, k, usage) == te_bytes(te_mxfp8_specs(m, k, *USAGE[usage]))


@pytest.mark.parametrize("m,k", SHAPES)
@pytest.mark.parametrize("usage", USAGE)
def test_nvfp4_bytes_are_transformer_engines(m, k, usage):
    assert tensor_bytes("nvfp4", m, k, usage) == te_bytes(te_nvfp4_specs(m, k, *USAGE[usage]))


@pytest.mark.parametrize("m,k", SHAPES + [(100, 300)])
@pytest.mark.parametrize("usage", USAGE)
@pytest.mark.parametrize("dim,name", [(1, "fp8-block1x128"), (2, "fp8-block128x128")])
def test_fp8_blockwise_bytes_are_transformer_engines(m, k, usage, dim, name):
    assert tensor_bytes(name, m, k, usage) == te_bytes(te_block_specs(m, k, dim,
                                                                      *USAGE[usage]))


def test_mxfp8_by_hand():
    # 64 x 64 row-wise: 4096 FP8 bytes; 64 rows padded to 128, 2 blocks per row to 4:
    # 512 E8M0 bytes. Column-wise the same counts on the transpose.
    assert tensor_bytes("mxfp8", 64, 64) == 4096 + 128 * 4
    assert tensor_bytes("mxfp8", 64, 64, "both") == 2 * (4096 + 512)
    # unpadded (the OCP spec's own count): one E8M0 per 32 elements
    assert tensor_bytes("mxfp8", 64, 64, te_padding=False) == 4096 + 128
    assert bytes_per_element("mxfp8") == 1 + 1 / 32


def test_nvfp4_by_hand():
    # 128 x 256: 32768 elements at half a byte = 16384; 128 rows x 16 blocks of 16 = 2048
    # E4M3 bytes; one fp32 per-tensor amax
    assert tensor_bytes("nvfp4", 128, 256) == 16384 + 2048 + 4
    assert tensor_bytes("nvfp4", 128, 256, "both") == 2 * (16384 + 2048 + 4)
    assert bytes_per_element("nvfp4") == 0.5 + 1 / 16


def test_per_tensor_and_plain_formats():
    assert tensor_bytes("bf16", 10, 10) == 200 and tensor_bytes("fp32", 3, 5) == 60
    # one fp32 scale_inv shared by the FP8 data and its transpose (float8_tensor.py L426)
    assert tensor_bytes("fp8", 10, 10) == 104 and tensor_bytes("fp8", 10, 10, "both") == 204
    assert tensor_bytes("fp8-channel", 10, 30) == 300 + 10 * 4


def test_deepseek_v3_checkpoint_scales_are_unpadded():
    # DeepSeek-V3 ships weight_scale_inv fp32 of ceil(out/128) x ceil(in/128): the
    # kv_a_proj_with_mqa (576 x 7168) has 5 x 56 scales
    assert tensor_bytes("fp8-block128x128", 576, 7168, te_padding=False) == \
        576 * 7168 + 5 * 56 * 4


def test_mxfp4_is_gpt_oss_checkpoint_layout():
    # gpt-oss-120b down_proj per expert: 2880 x 2880, *_blocks (2880, 90, 16) uint8,
    # *_scales (2880, 90) uint8
    assert tensor_bytes("mxfp4", 2880, 2880) == 2880 * 90 * 16 + 2880 * 90


def test_int4_group_scales_and_zero_points_as_awq_allocates():
    # AWQ (K=in 4096, N=out 11008, g 128): qweight int32 (4096, 11008/8), qzeros int32
    # (32, 11008/8), scales fp16 (32, 11008); the ledger's (rows, cols) = (out, in)
    qweight, qzeros, scales = 4096 * 1376 * 4, 32 * 1376 * 4, 32 * 11008 * 2
    assert tensor_bytes("int4-g128-zp", 11008, 4096) == qweight + qzeros + scales
    assert tensor_bytes("int4-g128", 11008, 4096) == qweight + scales
    assert tensor_bytes("int8-channel", 4096, 4096) == 4096 * 4096 + 4096 * 2


def test_nf4_lives_here_and_finetune_reads_it():
    from ledger.finetune import nf4_bytes as finetune_nf4
    assert finetune_nf4 is nf4_bytes
    assert tensor_bytes("nf4", 4096, 1024) == 2164804 == nf4_bytes(4096 * 1024)


def test_every_format_names_its_source():
    assert all(f.source for f in FORMATS.values())
    assert fmt("int4-g64").source


@pytest.mark.parametrize("name,args,field", [
    ("fp7", (4, 4), "format"), ("int4-g0", (4, 4), "format"), ("bf16", (0, 4), "shape"),
])
def test_bad_input_names_its_field(name, args, field):
    with pytest.raises(LedgerError) as e:
        tensor_bytes(name, *args)
    assert e.value.field == field
