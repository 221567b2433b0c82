"""PyTorch's own strategies, one training step each, measured against the ledger.

Every function runs on every rank of an initialised world of 4 (gloo processes in
``train-ledger verify``, the fake process group in the tests) and returns this rank's
rows: bytes handed to each collective (from the dispatcher, ``meter.CollectiveMeter``)
and resident state after the step, next to what the ledger predicts for the same tiny
model and placement, in fp32 unless the strategy says otherwise.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from ledger.config import ParallelConfig
from ledger.memory import state_bytes
from ledger.placement import Layout, dp_comms, per_gpu_state, pp_comms, tp_comms
from ledger.verify import tiny
from ledger.verify.meter import CollectiveMeter
from ledger.verify.rows import Row, bytes_rows

TORCH = "torchtitan"  # PyTorch's own FSDP2 / DTensor / pipelining: its convention
WORLD = 4


def _framing(ctx):
    """gloo's framing, measured once per process by the runner (None: no wire, as on
    the fake process group)."""
    return getattr(ctx, "framing", None)


def _step(model, opt, x, y):
    loss = tiny.loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _local_bytes(tensors) -> int:
    out = 0
    for t in tensors:
        t = t.to_local() if hasattr(t, "to_local") else t
        out += t.numel() * t.element_size()
    return out


def _state_rows(name, model, opt, predicted, note="") -> list[Row]:
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    moments = [v for s in opt.state.values() for k, v in s.items() if k != "step"]
    got = (_local_bytes(params), _local_bytes(grads), _local_bytes(moments))
    names = ("params", "grads", "optimizer")
    want = (predicted.params_bytes, predicted.grads_bytes, predicted.optim_bytes)
    return [Row("state", name, n, float(w), float(g), 0.0, note) for n, w, g in
            zip(names, want, got)]


def _world_layout(**sizes) -> Layout:
    return Layout(gpus_per_node=8, **sizes)


# ---- data parallel --------------------------------------------------------------------
def ddp(ctx) -> list[Row]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(tiny.TinyLlama())

    def allreduce_hook(state, bucket):  # a Python hook, so the dispatcher sees the bytes
        buf = bucket.buffer()
        dist.all_reduce(buf)
        buf /= WORLD
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut
    model.register_comm_hook(None, allreduce_hook)
    opt = torch.optim.Adam(model.parameters())
    x, y = tiny.batch(ctx.rank)
    with CollectiveMeter() as meter:
        _step(model, opt, x, y)
    spec, cfg = tiny.spec(), ParallelConfig(dp=WORLD, framework=TORCH, precision="fp32")
    st = state_bytes(spec, "fp32", "adam")
    comms = dp_comms(spec, st, cfg, _world_layout(dp=WORLD))
    note = "DDP's C++ reducer bypasses the dispatcher; a Python hook all-reduces each bucket"
    return (bytes_rows("DDP", meter, comms, {"all_reduce": note}, _framing(ctx))
            + _state_rows("DDP", model, opt, per_gpu_state(spec, st, cfg)))


WIDE = 2  # FSDP2 bf16: the tiny Llama twice as wide, so its bf16 per-layer gathers keep
# gloo's framing under 1% of the wire


def _wide_llama():
    """tiny.TinyLlama with hidden and ffn widths x WIDE (tiny's own classes), and its
    ModelSpec."""
    from torch import nn

    from ledger.model import ModelSpec

    h, f = tiny.HIDDEN * WIDE, tiny.FFN * WIDE
    torch.manual_seed(0)
    model = tiny.TinyLlama()
    model.embed = nn.Embedding(tiny.VOCAB, h)
    model.layers = nn.ModuleList(tiny.Block(hidden=h, heads=tiny.HEADS,
                                            kv_heads=tiny.KV_HEADS, ffn=f)
                                 for _ in range(tiny.LAYERS))
    model.norm = tiny.RMSNorm(h)
    model.output = nn.Linear(h, tiny.VOCAB, bias=False)
    model.cos, model.sin = tiny.rotary(tiny.SEQ, h // tiny.HEADS)
    return model, ModelSpec(name=f"tiny-llama x {WIDE}", layers=tiny.LAYERS, hidden=h,
                            heads=tiny.HEADS, kv_heads=tiny.KV_HEADS, ffn_hidden=f,
                            vocab=tiny.VOCAB, seq_len=tiny.SEQ)


def _fsdp(ctx, name, reshard=True, mesh_shape=(WORLD,), mp=None, precision="fp32",
          wide=False):
    from torch.distributed.fsdp import fully_shard

    names = ("replicate", "shard") if len(mesh_shape) == 2 else ("shard",)
    mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    model, spec = _wide_llama() if wide else (tiny.TinyLlama(), tiny.spec())
    kw = {"mesh": mesh, "reshard_after_forward": reshard}
    if mp is not None:
        kw["mp_policy"] = mp
    for layer in model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.Adam(model.parameters())
    x, y = tiny.batch(ctx.rank)
    with CollectiveMeter() as meter:
        _step(model, opt, x, y)
    shard = mesh_shape[-1]
    cfg = ParallelConfig(dp=WORLD, zero_stage=3, reshard_after_forward=reshard,
                         hsdp_shard=shard if len(mesh_shape) == 2 else None,
                         framework=TORCH, precision=precision)
    comms = dp_comms(spec, state_bytes(spec, precision, "adam"), cfg,
                     _world_layout(dp=WORLD, hsdp_shard=cfg.hsdp_shard))
    rows = bytes_rows(name, meter, comms, framing=_framing(ctx))
    if mp is None:  # at rest, after the step, every state is sharded over the shard group
        at_rest = ParallelConfig(dp=WORLD, zero_stage=3, hsdp_shard=cfg.hsdp_shard,
                                 framework=TORCH, precision="fp32")
        rows += _state_rows(name, model, opt,
                            per_gpu_state(spec, state_bytes(spec, "fp32", "adam"), at_rest),
                            "" if reshard else "after the step FSDP2 has resharded; the "
                            "ledger's unsharded params are the forward-to-backward peak")
    return rows


def fsdp2(ctx):
    return _fsdp(ctx, "FSDP2 reshard")


def fsdp2_keep(ctx):
    return _fsdp(ctx, "FSDP2 no reshard", reshard=False)


def fsdp2_bf16(ctx):
    from torch.distributed.fsdp import MixedPrecisionPolicy

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    return _fsdp(ctx, f"FSDP2 bf16, h x {WIDE}", mp=mp, precision="bf16", wide=True)


def hsdp(ctx):
    return _fsdp(ctx, "HSDP 2x2", mesh_shape=(2, 2))


# ---- tensor parallel ------------------------------------------------------------------
TP = 2
TP_BATCH, TP_SEQ = 4, 128  # 128 KiB per all-reduce: gloo framing < 1% of the wire


def _tp(ctx, name, sp):
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (WORLD // TP, TP), mesh_dim_names=("dp", "tp"))["tp"]
    torch.manual_seed(0)
    block = tiny.Block()
    # The block input enters each sub-block once, as a replicated DTensor, so the q/k/v
    # (gate/up) input gradients add up as partial sums and are reduced once - Megatron's f.
    # Without that, DTensor would all-reduce each projection's input gradient separately.
    src = Shard(1) if sp else Replicate()
    plan = {"attn": PrepareModuleInput(input_layouts=(src, None, None),
                                       desired_input_layouts=(Replicate(), None, None),
                                       use_local_output=False),
            "mlp": PrepareModuleInput(input_layouts=(src,), desired_input_layouts=(Replicate(),),
                                      use_local_output=False),
            "attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(),
            "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(output_layouts=src, use_local_output=not sp),
            "mlp.gate": ColwiseParallel(), "mlp.up": ColwiseParallel(),
            "mlp.down": RowwiseParallel(output_layouts=src, use_local_output=not sp)}
    if sp:  # norms run on sequence shards; the linears gather and scatter around them
        plan |= {"attn_norm": SequenceParallel(), "mlp_norm": SequenceParallel()}
    parallelize_module(block, mesh, plan)
    b, s = TP_BATCH, TP_SEQ
    cos, sin = tiny.rotary(s, tiny.HIDDEN // tiny.HEADS)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(b, s, tiny.HIDDEN, generator=g)
    if sp:
        from torch.distributed.tensor import DTensor
        x = DTensor.from_local(x.chunk(TP, 1)[mesh.get_local_rank()], mesh, [Shard(1)])
    x.requires_grad_(True)
    with CollectiveMeter() as meter:
        out = block(x, cos, sin)
        out = out.to_local() if hasattr(out, "to_local") else out
        out.float().pow(2).mean().backward()
    cfg = ParallelConfig(tp=TP, sequence_parallel=sp, act_bytes=4, framework=TORCH)
    comms = tp_comms(cfg, b * s * tiny.HIDDEN * 4, 1, "nvlink")  # one layer, one micro-batch
    note = ("with SP the norms' weight gradients stay partial DTensors until the optimizer "
            "reduces them (not in this measurement)" if sp else "")
    return bytes_rows(name, meter, comms, {"all_gather": note, "reduce_scatter": note},
                      _framing(ctx))


def tp(ctx):
    return _tp(ctx, "DTensor TP", sp=False)


def tp_sp(ctx):
    return _tp(ctx, "DTensor TP + SP", sp=True)


# ---- pipeline -------------------------------------------------------------------------
MICROBATCHES = 4
PP_ROWS = 8  # 32 KiB per boundary tensor: framing < 1% of the wire


def _pipeline(ctx, name, schedule_cls):
    from torch.distributed.pipelining import PipelineStage

    torch.manual_seed(0)
    block = tiny.MLP(tiny.HIDDEN, tiny.FFN)  # one stage per rank
    rows_per_mb, s = PP_ROWS, tiny.SEQ
    stage = PipelineStage(block, ctx.rank, WORLD, torch.device("cpu"))
    sched = schedule_cls(stage, MICROBATCHES, loss_fn=lambda out, tgt: out.pow(2).mean())
    x = torch.randn(rows_per_mb * MICROBATCHES, s, tiny.HIDDEN)

    def step():
        if ctx.rank == 0:
            sched.step(x)
        elif ctx.rank == WORLD - 1:
            sched.step(target=torch.zeros_like(x), losses=[])
        else:
            sched.step()
    step()  # the first step also exchanges shapes (pickled metadata); measure the second
    with CollectiveMeter() as meter:
        step()
    cfg = ParallelConfig(pp=WORLD, num_microbatches=MICROBATCHES, act_bytes=4, framework=TORCH)
    comms = pp_comms(cfg, rows_per_mb * s * tiny.HIDDEN * 4, "ib")
    interior = 0 < ctx.rank < WORLD - 1
    note = "" if interior else "an end stage sends one direction only: half the ledger's"
    rows = bytes_rows(name, meter, comms, framing=_framing(ctx))
    for r in rows:
        if not interior and r.collective == "send_recv":
            r.predicted_bytes /= 2
            r.wire_expected = r.wire_expected and r.wire_expected / 2
            r.note = note
    return rows


def pp_gpipe(ctx):
    from torch.distributed.pipelining import ScheduleGPipe
    return _pipeline(ctx, "pipelining GPipe", ScheduleGPipe)


def pp_1f1b(ctx):
    from torch.distributed.pipelining import Schedule1F1B
    return _pipeline(ctx, "pipelining 1F1B", Schedule1F1B)


# ---- expert parallel ------------------------------------------------------------------
def ep(ctx):
    from ledger.verify.ep import run
    return run(ctx, _framing(ctx), TORCH)


STRATEGIES = {"ddp": ddp, "fsdp2": fsdp2, "fsdp2-keep": fsdp2_keep, "fsdp2-bf16": fsdp2_bf16,
              "hsdp": hsdp, "tp": tp, "tp-sp": tp_sp, "pp-gpipe": pp_gpipe,
              "pp-1f1b": pp_1f1b, "ep": ep}


# ---- activation memory ----------------------------------------------------------------
def activations(ctx) -> list[Row]:
    """A Llama layer's saved bytes against the architecture-aware formula (3% allowed)."""
    from ledger.verify.activations import CASES, measure, predict

    if ctx.rank:  # one process measures; the layer has nothing distributed
        return []
    rows = []
    for heads, kv, hidden, ffn, seq, b in CASES:
        for flash, rc in ((True, "none"), (False, "none"), (False, "selective"),
                          (True, "full")):
            kw = dict(flash=flash, recompute=rc, dtype=torch.bfloat16)
            case = (f"{'flash' if flash else 'materialised'} {rc}: H{heads}/K{kv} h{hidden} "
                    f"f{ffn} s{seq} b{b}")
            rows.append(Row("activations", "Llama layer, bf16", case,
                            predict(heads, kv, hidden, ffn, seq, b, **kw),
                            measure(heads, kv, hidden, ffn, seq, b, **kw), 0.03))
    return rows


STRATEGIES["activations"] = activations


def tp_saved(ctx) -> list[Row]:
    """Per rank, what torchtitan's TP + SP plan keeps for backward (DTensor keeps the
    gathered GEMM inputs) and what loss_parallel holds, against the ledger
    (``ledger.verify.tp_saved``): saved bytes exact, the loss's peaks within 1%."""
    from ledger.verify import tp_saved as ts

    mesh = init_device_mesh("cpu", (WORLD // TP, TP), mesh_dim_names=("dp", "tp"))["tp"]
    name = "DTensor TP + SP saved"
    rows = []
    for case in ts.CASES:
        heads, kv, hidden, ffn, seq, b = case
        for rc in ("none", "full"):
            what = f"block, {rc} AC: H{heads}/K{kv} h{hidden} f{ffn} s{seq} b{b} tp{TP}"
            rows.append(Row("activations", name, what, ts.predict_block(TP, *case, recompute=rc),
                            ts.measure_block(mesh, *case, recompute=rc)))
    rows.append(Row("activations", name, f"head: h64 V{ts.VOCAB} s32 b2 tp{TP}",
                    ts.predict_head(TP, 64, 32, 2), ts.measure_head(mesh, 64, 32, 2)))
    for what, want, got in zip(("loss_parallel forward, B per logit",
                                "loss_parallel backward, B per logit"),
                               ts.predict_loss(), ts.loss_parallel_peaks(mesh)):
        rows.append(Row("loss", name, what, want, got, 0.01,
                        "the CPU allocator's live bytes; DTensor's per-row statistics "
                        "and masks add the rest"))
    return rows


STRATEGIES["tp-saved"] = tp_saved
