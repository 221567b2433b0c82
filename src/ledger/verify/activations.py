"""What a decoder layer saves for backward, measured: saved-tensor hooks record every
tensor autograd keeps during the forward, once per storage (data_ptr, size: a view of a
kept tensor does not count twice), leaving out the weights and the layer's shared inputs
(rotary tables, an attention mask built once per model). Predictions come from
``ledger.arch.activations.layer_activations`` with the implementation's saved-tensor table."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from ledger.arch import PLAIN, SavedTensors, layer_activations
from ledger.model import ModelSpec
from ledger.verify import tiny

# (heads, kv_heads, hidden, ffn, seq, batch): MHA, GQA 2:1 and 4:1, MQA, ffn 2h and 3.5h
CASES = [(4, 4, 64, 128, 16, 2), (4, 2, 64, 128, 16, 2), (8, 2, 64, 224, 32, 1),
         (8, 1, 128, 448, 24, 2), (4, 2, 64, 256, 64, 1)]


@dataclass(frozen=True)
class Saved:
    """One storage autograd keeps: its bytes, and the shape/dtype it was saved as."""

    nbytes: int
    shape: tuple[int, ...]
    dtype: torch.dtype


def saved_tensors(forward, skip=()) -> list[Saved]:
    """Run ``forward()`` under saved-tensor hooks and list the storages it keeps, each
    once, except those of ``skip`` (parameters, inputs shared by every layer)."""
    skipped = {(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in skip}
    kept: dict[tuple[int, int], Saved] = {}

    def pack(t):
        st = t.untyped_storage()
        key = (st.data_ptr(), st.nbytes())
        if key not in skipped and key not in kept:
            kept[key] = Saved(st.nbytes(), tuple(t.shape), t.dtype)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    (out[0] if isinstance(out, tuple) else out).float().sum().backward()
    return list(kept.values())


def measure(heads, kv_heads, hidden, ffn, seq, batch, flash=True, recompute="none",
            dtype=torch.float32, norm=tiny.RMSNorm) -> int:
    """Bytes tiny.Block (``norm=nn.RMSNorm``: torchtitan's block) keeps for backward."""
    torch.manual_seed(0)
    block = tiny.Block(hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn, flash=flash,
                       norm=norm).to(dtype)
    block.attn.selective = recompute == "selective"
    cos, sin = (t.to(dtype) for t in tiny.rotary(seq, hidden // heads))
    x = torch.randn(batch, seq, hidden, dtype=dtype, requires_grad=True)

    def forward():
        if recompute == "full":
            return checkpoint(block, x, cos, sin, use_reentrant=False)
        return block(x, cos, sin)

    return sum(s.nbytes for s in saved_tensors(forward, [*block.parameters(), cos, sin]))


def predict(heads, kv_heads, hidden, ffn, seq, batch, flash=True, recompute="none",
            dtype=torch.float32, table: SavedTensors = PLAIN) -> float:
    spec = ModelSpec(name="case", layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads,
                     vocab=1, seq_len=seq, ffn_hidden=ffn)
    return layer_activations(spec, micro_batch=batch, flash=flash, recompute=recompute,
                             act_bytes=torch.tensor([], dtype=dtype).element_size(),
                             table=table).total_bytes

