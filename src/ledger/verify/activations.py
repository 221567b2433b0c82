"""What a Llama decoder layer saves for backward, measured: saved-tensor hooks record
every tensor autograd keeps during the forward, deduplicated by storage, leaving out
the weights and the rotary tables (not activations)."""
from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from ledger.memory import llama_activation_bytes_per_layer
from ledger.verify import tiny

# (heads, kv_heads, hidden, ffn, seq, batch): MHA, GQA 2:1 and 4:1, MQA, ffn 2h and 3.5h
CASES = [(4, 4, 64, 128, 16, 2), (4, 2, 64, 128, 16, 2), (8, 2, 64, 224, 32, 1),
         (8, 1, 128, 448, 24, 2), (4, 2, 64, 256, 64, 1)]


def measure(heads, kv_heads, hidden, ffn, seq, batch, flash=True, recompute="none",
            dtype=torch.float32) -> int:
    torch.manual_seed(0)
    block = tiny.Block(hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn, flash=flash)
    block = block.to(dtype)
    block.attn.selective = recompute == "selective"
    cos, sin = (t.to(dtype) for t in tiny.rotary(seq, hidden // heads))
    x = torch.randn(batch, seq, hidden, dtype=dtype, requires_grad=True)
    skip = {p.untyped_storage().data_ptr() for p in block.parameters()}
    skip |= {cos.untyped_storage().data_ptr(), sin.untyped_storage().data_ptr()}
    kept: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            kept.setdefault(ptr, t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if recompute == "full":
            checkpoint(block, x, cos, sin, use_reentrant=False)
        else:
            block(x, cos, sin)
    return sum(kept.values())


def predict(heads, kv_heads, hidden, ffn, seq, batch, flash=True, recompute="none",
            dtype=torch.float32) -> float:
    return llama_activation_bytes_per_layer(
        seq_len=seq, micro_batch=batch, hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=hidden // heads, ffn_hidden=ffn, flash=flash, recompute=recompute,
        act_bytes=torch.tensor([], dtype=dtype).element_size())
