"""What DTensor tensor + sequence parallelism keeps for backward under torchtitan's plan,
measured per rank, against the ledger's ``torch`` saved-tensor table.

torchtitan's plan (pytorch/torchtitan@9dec370a torchtitan/parallelisms/parallelize_llama.py
L129-144 for the head, L175-193 for each block; the same plan at b5bcd76c): the norms run
``SequenceParallel`` on sequence shards, ``PrepareModuleInput`` redistributes each
sub-block's input from ``Shard(1)`` to ``Replicate()`` (an all-gather), the q/k/v and
w1/w3 projections are ``ColwiseParallel`` and wo/w2 ``RowwiseParallel`` with
``Shard(1)`` outputs (a reduce-scatter); the output layer is ``ColwiseParallel`` from
``Shard(1)`` to vocab-sharded logits for ``loss_parallel``. Autograd then keeps the
all-gathered (full-sequence) input of the column-parallel GEMMs - unlike Megatron-Core,
which keeps the sequence shard and all-gathers it again in the backward
(``SavedTensors.sp_gemm_input_shard``). Counted with saved-tensor hooks, once per storage
of the DTensors' local tensors, weights and rotary tables left out
(``ledger.verify.activations.saved_tensors``' rule).

The loss under ``loss_parallel`` is held by the CPU allocator's own byte count (torch's
profiler), bytes per local logit at its forward's and backward's peak, against
``ledger.frameworks.losses.LOSSES["loss-parallel"]``.

CPU note: torch's CPU RMSNorm is the composite (an fp32 upcast input and an fp32 x_hat
kept), where CUDA runs aten::_fused_rms_norm (the TORCH table); ``CPU_TORCH`` is that one
named difference (tests/test_activations.py measures it on the unsharded block).
"""
from __future__ import annotations

import gc
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from ledger.arch import head_bytes, layer_activations
from ledger.arch.activations import recompute_working_bytes
from ledger.arch.saved_tensors import TORCH
from ledger.frameworks.losses import LOSSES
from ledger.model import ModelSpec
from ledger.verify import tiny

CPU_TORCH = replace(TORCH, name="torch-cpu", norm_input="fp32", norm_xhat="fp32")
# (heads, kv_heads, hidden, ffn, seq, batch): heads and K/V heads split over TP 2
CASES = [(4, 2, 64, 128, 16, 2), (8, 4, 64, 224, 32, 1)]
VOCAB = 256
LOSS_VOCAB = 4096  # wide rows, so the per-row statistics are a small share of the logits


def block_plan():
    """torchtitan's per-block plan (parallelize_llama.py L175-193 @9dec370a), on the tiny
    block's module names (attention_norm -> attn_norm, feed_forward.w1/w3/w2 ->
    mlp.gate/up/down)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel)

    return {"attn_norm": SequenceParallel(),
            "attn": PrepareModuleInput(input_layouts=(Shard(1), None, None),
                                       desired_input_layouts=(Replicate(), None, None)),
            "attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(),
            "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(output_layouts=Shard(1)),
            "mlp_norm": SequenceParallel(),
            "mlp": PrepareModuleInput(input_layouts=(Shard(1),),
                                      desired_input_layouts=(Replicate(),)),
            "mlp.gate": ColwiseParallel(), "mlp.up": ColwiseParallel(),
            "mlp.down": RowwiseParallel(output_layouts=Shard(1))}


class Head(nn.Module):
    """The final norm and the output projection (torchtitan's ``norm`` and ``output``)."""

    def __init__(self, hidden: int, vocab: int):
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=1e-6)
        self.output = nn.Linear(hidden, vocab, bias=False)

    def forward(self, x):
        return self.output(self.norm(x))


def head_plan():
    """parallelize_llama.py L129-144 @9dec370a with loss_parallel on."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, SequenceParallel

    return {"norm": SequenceParallel(),
            "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1),
                                      use_local_output=False)}


def _local(t):
    return t._local_tensor if hasattr(t, "_local_tensor") else t


def saved_bytes(forward, skip=()) -> int:
    """Bytes of the storages autograd keeps while ``forward()`` runs (a DTensor counted
    by its local tensor), each once, those of ``skip`` left out."""
    skipped = {_local(t).untyped_storage().data_ptr() for t in skip}
    kept: dict[tuple[int, int], int] = {}

    def pack(t):
        st = _local(t).untyped_storage()
        if st.data_ptr() not in skipped:
            kept[(st.data_ptr(), st.nbytes())] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return sum(kept.values())


def _spec(heads, kv_heads, hidden, ffn, seq) -> ModelSpec:
    return ModelSpec(name="case", layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads,
                     vocab=VOCAB, seq_len=seq, ffn_hidden=ffn)


def measure_block(mesh, heads, kv_heads, hidden, ffn, seq, batch, dtype=torch.bfloat16,
                  recompute="none") -> int:
    """One rank's saved bytes of torchtitan's block under ``mesh`` (its TP group); the
    input is this rank's sequence shard, as the previous block's reduce-scatter leaves
    it."""
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    block = tiny.Block(hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                       norm=nn.RMSNorm).to(dtype)
    parallelize_module(block, mesh, block_plan())
    cos, sin = (t.to(dtype) for t in tiny.rotary(seq, hidden // heads))
    x = torch.randn(batch, seq // mesh.size(), hidden, dtype=dtype, requires_grad=True)
    if recompute == "full":  # torchtitan's ptd_checkpoint_wrapper: non-reentrant
        return saved_bytes(lambda: checkpoint(block, x, cos, sin, use_reentrant=False),
                           [*block.parameters(), cos, sin])
    return saved_bytes(lambda: block(x, cos, sin), [*block.parameters(), cos, sin])


def predict_block(tp, heads, kv_heads, hidden, ffn, seq, batch, dtype=torch.bfloat16,
                  recompute="none", table=CPU_TORCH) -> float:
    e = torch.tensor([], dtype=dtype).element_size()
    return layer_activations(_spec(heads, kv_heads, hidden, ffn, seq), micro_batch=batch,
                             tp=tp, sequence_parallel=True, act_bytes=e, table=table,
                             recompute=recompute).total_bytes


def recompute_working(mesh, heads, kv_heads, hidden, ffn, seq, batch,
                      dtype=torch.bfloat16) -> int:
    """What one fully recomputed block's backward holds beyond its saved input, under
    ``mesh``: the CPU allocator's peak live bytes in the backward above its live bytes when
    the backward starts - the recomputed forward's tensors and the backward's own. Each
    weight's gradient is dropped as soon as it is accumulated (it is the state's, not the
    layer's)."""
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    block = tiny.Block(hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                       norm=nn.RMSNorm).to(dtype)
    parallelize_module(block, mesh, block_plan())
    cos, sin = (t.to(dtype) for t in tiny.rotary(seq, hidden // heads))
    for p in block.parameters():
        p.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
    x = torch.randn(batch, seq // mesh.size(), hidden, dtype=dtype, requires_grad=True)
    grad = torch.randn_like(x)
    out = checkpoint(block, x, cos, sin, use_reentrant=False)
    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("backward"):
            out.backward(grad)
    return int(_phase_peaks(prof, ("backward",), 1, rise=True)[0])


def predict_working(tp, heads, kv_heads, hidden, ffn, seq, batch, dtype=torch.bfloat16,
                    table=CPU_TORCH) -> float:
    e = torch.tensor([], dtype=dtype).element_size()
    return recompute_working_bytes(_spec(heads, kv_heads, hidden, ffn, seq),
                                   micro_batch=batch, tp=tp, sequence_parallel=True,
                                   act_bytes=e, table=table, recompute="full")


def measure_head(mesh, hidden, seq, batch, dtype=torch.bfloat16) -> int:
    from torch.distributed.tensor.parallel import parallelize_module

    torch.manual_seed(0)
    head = Head(hidden, VOCAB).to(dtype)
    parallelize_module(head, mesh, head_plan())
    x = torch.randn(batch, seq // mesh.size(), hidden, dtype=dtype, requires_grad=True)
    return saved_bytes(lambda: head(x), list(head.parameters()))


def predict_head(tp, hidden, seq, batch, dtype=torch.bfloat16, table=CPU_TORCH) -> float:
    e = torch.tensor([], dtype=dtype).element_size()
    return head_bytes(_spec(4, 4, hidden, 4 * hidden, seq), micro_batch=batch, tp=tp,
                      sequence_parallel=True, act_bytes=e, table=table)


def loss_parallel_peaks(mesh, rows: int = 64, dtype=torch.bfloat16) -> tuple[float, float]:
    """(forward, backward) peak bytes per local logit of torchtitan's loss
    (``cross_entropy(pred.flatten(0, 1).float(), labels)``, train.py L131-134 @9dec370a)
    under ``loss_parallel`` on vocab-sharded logits, the model's logits dropped before
    the backward (``del pred``, L307): live bytes of the CPU allocator, from torch's
    profiler. Garbage is collected first: a block allocated before the profile and freed
    inside it would count as a negative allocation."""

    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import loss_parallel
    from torch.profiler import ProfilerActivity, profile, record_function

    g = torch.Generator().manual_seed(0)
    local = torch.randn(rows, LOSS_VOCAB // mesh.size(), dtype=dtype, generator=g)
    target = torch.randint(0, LOSS_VOCAB, (rows,), generator=g)
    w = DTensor.from_local(local, mesh, [Shard(-1)]).requires_grad_(True)
    gc.collect()
    with loss_parallel(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("forward"):
            pred = w * 1.0  # the model's logits, made inside the measurement
            loss = F.cross_entropy(pred.float(), target)
            del pred
        with record_function("backward"):
            loss.backward()
    return _phase_peaks(prof, ("forward", "backward"), local.numel())


def _phase_peaks(prof, phases, per, rise=False) -> tuple[float, ...]:
    """Peak live bytes / ``per`` inside each named ``record_function`` range (``rise``:
    above the live bytes when the range starts)."""
    events = prof.profiler.kineto_results.events()
    spans = {e.name(): (e.start_ns(), e.end_ns()) for e in events if e.name() in phases}
    live, peaks, start = 0, dict.fromkeys(phases, 0), {}
    for e in sorted(events, key=lambda e: e.start_ns()):
        if e.name() != "[memory]":
            continue
        for name, (a, b) in spans.items():
            if a <= e.start_ns() <= b:
                start.setdefault(name, live if rise else 0)
        live += e.nbytes()
        for name, (a, b) in spans.items():
            if a <= e.start_ns() <= b:
                peaks[name] = max(peaks[name], live - start[name])
    return tuple(peaks[p] / per for p in phases)


def predict_loss(dtype=torch.bfloat16) -> tuple[float, float]:
    e = torch.tensor([], dtype=dtype).element_size()
    loss = LOSSES["loss-parallel"]
    return loss.forward_bytes(e), loss.backward_bytes(e)
