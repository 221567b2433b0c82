"""Megatron-FSDP's buffers as its source allocates them, by hand (Llama 3 70B's layer and
root units): what the backward holds of the root unit, and the TE buffers gradient-
accumulation fusion makes (ledger.placement.footprint.buffer_bytes,
ledger.placement.buffers)."""
import pytest

from ledger.config import ParallelConfig
from ledger.frameworks import of as framework_of
from ledger.model import llama3_70b
from ledger.placement.footprint import buffer_bytes
from ledger.placement.layers import largest_layer_params
from ledger.placement.per_gpu import root_params

# Llama 3 70B by hand: q (64 x 128) + k, v (8 x 128 each) over h 8192, o, the SwiGLU MLP
# (3 x 8192 x 28672) and two RMSNorm weights; the root: embedding and output layer
# (128256 x 8192 each, untied) and the final norm
LAYER = 8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672 + 2 * 8192
ROOT = 2 * 128256 * 8192 + 8192


def _cfg(framework):
    return ParallelConfig(dp=64, zero_stage=3, framework=framework)


def test_llama3_70b_units_by_hand():
    cfg = _cfg("megatron")
    assert largest_layer_params(llama3_70b(), cfg) == LAYER == 855_654_400
    assert root_params(llama3_70b(), cfg, 0) == ROOT


def test_megatron_fsdp_backward_holds_no_root_gradients():
    """Megatron-FSDP reduce-scatters every parameter's gradient as its module's backward
    ends (megatron_fsdp.py L1137 @d98e8a64), so a layer's backward holds the next layer
    prefetched (2 B), its own unsharded gradient (2 B) and the reduce bucket (4 B: the
    convention's fp32 main grads) - and of
    the root only its gathered params, held throughout; FSDP2 also holds the root's
    unsharded gradients (2 B of the root) until the root's own post-backward."""
    fw = framework_of(_cfg("megatron"))
    throughout, backward = buffer_bytes(_cfg("megatron"), fw, LAYER, 80, ROOT)
    assert throughout == LAYER * 2 + ROOT * 2
    assert backward == LAYER * 2 + LAYER * (2 + 4)
    fsdp2 = framework_of(_cfg("torchtitan"))
    _, held = buffer_bytes(_cfg("torchtitan"), fsdp2, LAYER, 80, ROOT)
    assert held == pytest.approx(LAYER * 2 + LAYER * (2 + 4) + ROOT * 2)

