"""A real training step, measured at each of its points: transformers' own Llama and
Mixtral (tiny shapes, bf16, CPU), one AdamW step under each recompute policy and loss,
every allocation and free of the CPU allocator recorded by torch's profiler
(``profile_memory=True``: compiled code's buffers too), held point by point to the
ledger (``ledger.placement.memory_points``).

The step is torchtitan's loop: ``zero_grad()``, forward, the loss, ``del`` the logits,
backward, ``optimizer.step()``. Its points, split by profiler markers: the forward, the
loss forward, the loss backward (until the logits' gradient exists, seen by a tensor
hook), the layers' backward and the optimizer step. The live bytes at each point are
the state the step starts from (parameters, AdamW's moments, the batch - counted from
the tensors) plus the allocator's running balance.

Policies: ``none``; ``full`` (torch.utils.checkpoint around each decoder layer);
``selective``, torchtitan's per-op policy written from its source (parallelize_llama.py
L214-276 @9dec370: save the outputs of mm, SDPA, reduce_scatter, max; every second mm
recomputed; on CPU the SDPA op is ``_scaled_dot_product_flash_attention_for_cpu``);
``layer``, every second layer in full. Losses: ``eager`` (F.cross_entropy on an fp32
copy), ``compiled`` (the same under torch.compile), ``vocab-parallel`` (Megatron-Core's
algorithm on one rank, cross_entropy.py L25-210, written out below); the loss alone also
``vocab-parallel-fused`` (its native fused form, four compiled steps).
"""
from __future__ import annotations

import gc
from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.placement import memory_points

BATCH, SEQ, HIDDEN, HEADS, KV, FFN, VOCAB, LAYERS, EXPERTS, TOP_K = 4, 128, 64, 4, 2, 128, \
    512, 2, 4, 2
POLICIES = ("none", "full", "selective", "layer")
LOSSES = ("eager", "compiled", "vocab-parallel")
POINTS = ("forward", "loss forward", "loss backward", "output backward", "backward",
          "optimizer step")


def _config(kind: str):
    import transformers

    base = dict(hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=KV,
                head_dim=HIDDEN // HEADS, intermediate_size=FFN, vocab_size=VOCAB,
                num_hidden_layers=LAYERS, max_position_embeddings=SEQ, tie_word_embeddings=False)
    if kind == "mixtral":
        return transformers.MixtralConfig(**base, num_local_experts=EXPERTS,
                                          num_experts_per_tok=TOP_K)
    return transformers.LlamaConfig(**base)


def spec(kind: str) -> ModelSpec:
    """The ledger's ModelSpec of the tiny model."""
    moe = dict(num_experts=EXPERTS, top_k=TOP_K) if kind == "mixtral" else {}
    return ModelSpec(name=f"tiny-{kind}", layers=LAYERS, hidden=HIDDEN, heads=HEADS,
                     kv_heads=KV, head_dim=HIDDEN // HEADS, vocab=VOCAB, seq_len=SEQ,
                     ffn_hidden=FFN, **moe)


# ---- torchtitan's op policy, from its source -----------------------------------------------
_SAVE = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
         torch.ops.aten._scaled_dot_product_flash_attention.default,
         torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
         torch.ops._c10d_functional.reduce_scatter_tensor.default,
         torch.ops.aten.max.default}


def _op_context():
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            meta[f"{mode}_mm_count"] += 1
        save = func in _SAVE and not (func == torch.ops.aten.mm.default
                                      and meta[f"{mode}_mm_count"] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


def _wrap(layer, context_fn=None) -> None:
    """Checkpoint one decoder layer (non-reentrant, as torchtitan's ptd_checkpoint_wrapper)."""
    inner = layer.forward
    kw = {"context_fn": context_fn} if context_fn else {}

    def forward(*args, **kwargs):
        return checkpoint(inner, *args, use_reentrant=False, preserve_rng_state=False,
                          **kw, **kwargs)
    layer.forward = forward


def apply_policy(model, policy: str) -> None:
    for i, layer in enumerate(model.model.layers):
        if policy == "full" or (policy == "layer" and i % 2 == 1):
            _wrap(layer)
        elif policy == "selective":
            _wrap(layer, _op_context)


# ---- the losses ------------------------------------------------------------------------
def eager_loss(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))


class _VocabParallelCE(torch.autograd.Function):
    """Megatron-Core's vocab_parallel_cross_entropy on one rank (cross_entropy.py L25-210):
    an fp32 copy, max subtracted in place, exp in place, divided in place into the softmax
    it saves; its backward turns the softmax into the gradient in place and casts it."""

    @staticmethod
    def forward(ctx, logits, target):
        x = logits.float()
        x.sub_(x.max(dim=-1, keepdim=True).values)
        predicted = x.gather(-1, target[..., None]).squeeze(-1)
        x.exp_()
        total = x.sum(dim=-1)
        loss = torch.log(total) - predicted
        x.div_(total[..., None])
        ctx.save_for_backward(x, target)
        ctx.dtype = logits.dtype
        return loss.mean()

    @staticmethod
    def backward(ctx, grad):
        softmax, target = ctx.saved_tensors
        grad_input = softmax  # in place, as Megatron's backward
        rows = torch.arange(target.numel())
        grad_input.view(-1, grad_input.shape[-1])[rows, target.flatten()] -= 1.0
        grad_input.mul_(grad / target.numel())
        return grad_input.to(ctx.dtype), None


def vocab_parallel_loss(logits, labels):
    return _VocabParallelCE.apply(logits.flatten(0, 1), labels.flatten(0, 1))


# Megatron-Core's native fused cross-entropy on one rank (fusions/fused_cross_entropy.py
# L12-84 @d98e8a64): the same steps split into four functions, each under torch.compile
# (jit_fuser, jit.py L16-33), on [s, b, v] logits worked on through [s * b, v] views as
# there (cross_entropy.py L53, L91); a one-rank vocabulary masks no target
def _fused_max(x):
    x = x.float()
    return x, x.max(dim=-1)[0]


def _fused_predicted(x, target, top):
    x -= top.unsqueeze(-1)
    flat = x.view(-1, x.size(-1))
    rows = torch.arange(flat.size(0))
    predicted = flat[rows, target.view(-1)].clone().view_as(target)
    torch.exp(x, out=x)
    return torch.cat((predicted, x.sum(dim=-1))), x


def _fused_loss(x, predicted_total):
    predicted, total = torch.split(predicted_total, predicted_total.size(0) // 2)
    x.div_(total.unsqueeze(-1))
    return x, torch.log(total) - predicted


def _fused_gradient(softmax, grad, mask, target):
    flat = softmax.view(-1, softmax.size(-1))
    rows = torch.arange(flat.size(0))
    flat[rows, target.view(-1)] -= 1.0 - mask.view(-1).float()  # L96, L111
    softmax.mul_(grad.unsqueeze(-1))  # L114
    return softmax.to(torch.bfloat16)  # L82


class _FusedVocabParallelCE(torch.autograd.Function):
    steps: tuple = ()

    @staticmethod
    def forward(ctx, logits, target):
        step = _FusedVocabParallelCE.steps
        x, top = step[0](logits)
        predicted_total, x = step[1](x, target, top)
        x, loss = step[2](x, predicted_total)
        ctx.save_for_backward(x, torch.zeros_like(target, dtype=torch.bool), target)
        return loss.mean()

    @staticmethod
    def backward(ctx, grad):
        softmax, mask, target = ctx.saved_tensors
        grad = (grad / target.numel()).expand(target.shape)
        return _FusedVocabParallelCE.steps[3](softmax, grad, mask, target), None


def vocab_parallel_fused_loss(logits, labels):
    """The tokens as Megatron's [s, b] with b 1: views of the logits, no copy."""
    if not _FusedVocabParallelCE.steps:
        _FusedVocabParallelCE.steps = tuple(torch.compile(f) for f in (
            _fused_max, _fused_predicted, _fused_loss, _fused_gradient))
    return _FusedVocabParallelCE.apply(logits.flatten(0, 1)[:, None],
                                       labels.flatten(0, 1)[:, None])


_COMPILED = {}


def loss_fn(name: str):
    if name == "compiled":
        if "fn" not in _COMPILED:
            _COMPILED["fn"] = torch.compile(eager_loss)
        return _COMPILED["fn"]
    return {"eager": eager_loss, "vocab-parallel": vocab_parallel_loss,
            "vocab-parallel-fused": vocab_parallel_fused_loss}[name]


# ---- one measured step -------------------------------------------------------------------
@dataclass(frozen=True)
class StepMemory:
    """Live bytes at the peak of each point of one step, and the step's state."""

    kind: str
    policy: str
    loss: str
    points: dict[str, float]
    state_bytes: float  # parameters and AdamW's state (moments, step) as the step starts

    @property
    def peak_bytes(self) -> float:
        return max(self.points.values())


def _nbytes(tensors) -> int:
    seen = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _step(model, opt, loss, inputs, labels):
    """One step; markers open each point: the final norm starts the loss forward (the head
    belongs to it), the logits' gradient the output layer's backward, the final norm's
    input gradient the layers' backward."""
    opt.zero_grad(set_to_none=True)
    norm = model.model.norm

    def head(module, args):
        _mark("loss forward")
        if args[0].requires_grad:
            args[0].register_hook(lambda g: _mark("backward"))
    handle = norm.register_forward_pre_hook(head)
    _mark("forward")
    logits = model(input_ids=inputs, use_cache=False).logits
    handle.remove()
    out = loss(logits, labels)
    logits.register_hook(lambda g: _mark("output backward"))
    del logits
    _mark("loss backward")
    out.backward()
    _mark("optimizer step")
    opt.step()


_MARKS = {}  # point -> the odd byte count of its sentinel allocation


def _mark(name: str):
    """Open a point: a sentinel allocation of a byte count no tensor of the step has,
    allocated and freed at once, found again in the allocator's event stream."""
    n = _MARKS.setdefault(name, 999_983 + 2 * len(_MARKS))
    torch.empty(n, dtype=torch.uint8)


def _peaks(prof, base: int) -> dict[str, float]:
    """Live bytes at the peak of each point of the profiled step, in the order the
    allocator reported its events (sentinels left out of the balance)."""
    points = {n: name for name, n in _MARKS.items()}
    out, live, current = {}, base, None
    for e in prof.profiler.kineto_results.events():
        if e.name() != "[memory]":
            continue
        size = e.nbytes()
        if abs(size) in points:
            if size > 0:
                current = points[size]
                out[current] = max(out.get(current, 0.0), float(live))
            continue
        live += size
        if current is not None:
            out[current] = max(out[current], float(live))
    return out


def measure(kind: str, policy: str = "none", loss: str = "eager") -> StepMemory:
    """One warm-up step (AdamW makes its moments), then the measured one."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = _config(kind)
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).train()
    apply_policy(model, policy)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    inputs, labels = _batch()
    fn = loss_fn(loss)
    _step(model, opt, fn, inputs, labels)
    opt.zero_grad(set_to_none=True)
    state = [*model.parameters(),
             *(t for s in opt.state.values() for t in s.values() if torch.is_tensor(t))]
    base = _nbytes([*state, *model.buffers(), inputs, labels])
    gc.collect()  # the warm-up's reference cycles (checkpoint frames) freed first, and no
    gc.disable()  # collection in the middle of the measured step
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            _step(model, opt, fn, inputs, labels)
    finally:
        gc.enable()
    return StepMemory(kind, policy, loss, _peaks(prof, base), float(_nbytes(state)))


def predict(kind: str, policy: str = "none", loss: str = "eager") -> dict[str, float]:
    """The ledger's allocated bytes at each point, for the same step: transformers'
    modules (framework hf), bf16 parameters and moments, no dropout."""
    rc = {"none": ("none", 1), "full": ("full", 1), "selective": ("selective", 1),
          "layer": ("full", 2)}[policy]
    cfg = ParallelConfig(framework="hf", precision="bf16-pure", micro_batch=BATCH,
                         recompute=rc[0], recompute_every=rc[1], loss=loss, dropout=0.0)
    return memory_points(spec(kind), cfg, optimizer="adamw")


# The steps measured: each policy under the eager loss, each loss without recompute
STEPS = tuple((kind, policy, "eager") for kind in ("llama", "mixtral") for policy in POLICIES) \
    + tuple((kind, "none", loss) for kind in ("llama", "mixtral") for loss in LOSSES[1:])
HELD = ("loss forward", "loss backward", "backward", "optimizer step")  # points held


def compare(kind: str, policy: str, loss: str) -> list[tuple[str, float, float]]:
    """(point, measured, ledger) bytes for every point of one step, and its peak."""
    m, p = measure(kind, policy, loss), predict(kind, policy, loss)
    rows = [(name, m.points.get(name, 0.0), p[name]) for name in POINTS]
    return rows + [("peak", m.peak_bytes, max(p.values()))]


def table(steps=STEPS) -> str:
    """One line per step and point, KiB (2^10 B) measured and priced, and the error; the
    forward and the output layer's backward are shown but not held."""
    lines = [f"{'model':<8}{'recompute':<11}{'loss':<16}{'point':<17}{'measured KiB':>13}"
             f"{'ledger KiB':>12}{'error':>8}  held"]
    for kind, policy, loss in steps:
        for name, meas, pred in compare(kind, policy, loss):
            held = "yes" if name in HELD or name == "peak" else "-"
            lines.append(f"{kind:<8}{policy:<11}{loss:<16}{name:<17}{meas / 1024:13,.1f}"
                         f"{pred / 1024:12,.1f}{pred / meas - 1:+8.1%}  {held}")
    return "\n".join(lines)
