"""What a language-model loss keeps of the logits, by implementation, as data.

The output layer writes s b / cp tokens x V / tp logits in the activation dtype (``e``
bytes each). A loss then holds, per logit element:

- ``forward_bytes``   at the end of its forward, everything alive: the logits and the
                      copies the loss makes of them
- ``saved_bytes``     what it keeps for its backward, from then until that backward
- ``backward_bytes``  the most alive during its backward (the saved tensors included)
- ``grad_bytes``      the gradient it hands the output layer, alive through that
                      layer's backward
- ``cached_bytes``    reserved but not allocated during its backward: the freed logits

Each figure is a function of ``e`` (the fp32 copy costs nothing when the logits are
already fp32). The model's own logits are counted in ``forward_bytes`` only: after the
loss forward the training loop drops them (torchtitan ``del pred``; Megatron returns the
loss alone) unless a pipeline schedule keeps its outputs (``Framework.pipeline_outputs``).

>>> eager = LOSSES["eager"]
>>> eager.forward_bytes(2), eager.saved_bytes(2), eager.backward_bytes(2), eager.grad_bytes(2)
(10.0, 4.0, 12.0, 2.0)
>>> LOSSES["compiled"].backward_bytes(2), LOSSES["vocab-parallel"].backward_bytes(2)
(4.0, 6.0)
>>> LOSSES["loss-parallel"].forward_bytes(2), LOSSES["loss-parallel"].backward_bytes(2)
(14.0, 16.0)
>>> LOSSES["vocab-parallel-fused"].backward_bytes(2)
10.0
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError


def _copy(e: float) -> float:
    """An fp32 copy of the logits: 4 B, or nothing when they are fp32 already."""
    return 0.0 if e == 4 else 4.0


@dataclass(frozen=True)
class Loss:
    """One loss implementation; bytes per logit element as functions of the logits'
    dtype size ``e``. ``source``: where each figure was read or measured."""

    name: str
    summary: str
    source: str
    kind: str  # "eager" | "eager-held" | "loss-parallel" | "compiled" | "vocab-parallel"
    #            | "vocab-parallel-compiled" | "in-place" | "none"

    def forward_bytes(self, e: float) -> float:
        if self.kind in ("eager", "eager-held"):  # logits, the fp32 copy, the log-softmax
            return e + _copy(e) + 4.0
        if self.kind == "loss-parallel":  # logits, the fp32 copy, shifted, exp(shifted)
            return e + _copy(e) + 8.0
        if self.kind == "compiled":  # the logits; the fused kernels keep per-row stats only
            return float(e)
        if self.kind in VOCAB_PARALLEL:  # logits and one fp32 copy, worked on in place
            return e + _copy(e)
        if self.kind == "in-place":  # the logits, overwritten by their own gradient
            return float(e)
        return 0.0

    def saved_bytes(self, e: float) -> float:
        if self.kind in ("compiled", "in-place"):  # the logits (in place: their gradient)
            return float(e)
        if self.kind == "eager-held":  # the loop's fp32 logits and the log-softmax
            return 4.0 + 4.0
        return 4.0 if self.kind in ("eager", "loss-parallel", *VOCAB_PARALLEL) else 0.0

    def backward_bytes(self, e: float) -> float:
        if self.kind == "eager":  # saved log-softmax, nll's gradient, log-softmax's gradient
            return 12.0
        if self.kind == "eager-held":  # the same, and the fp32 logits the loop still holds
            return 16.0
        if self.kind == "loss-parallel":  # saved log-softmax, zeros + exp + their sum
            return 16.0
        if self.kind == "compiled":  # the saved logits and the gradient, in their dtype
            return 2.0 * e
        if self.kind == "in-place":  # the saved gradient, scaled in place
            return float(e)
        if self.kind == "vocab-parallel":  # the softmax turned into the gradient in place,
            return 4.0 + (e if e != 4 else 0.0)  # and its copy in the logits' dtype
        if self.kind == "vocab-parallel-compiled":  # the saved softmax, the fp32 buffer the
            return 4.0 + 4.0 + 2.0  # compiled backward writes the gradient into, its bf16 cast
        return 0.0

    def traffic_bytes(self, e: float) -> tuple[float, float]:
        """HBM bytes the loss reads and writes per logit element, (forward, backward) - what
        its passes over the logits cost in time (``ledger.step.timing``). Counted from
        the source for Megatron-Core's vocab-parallel loss (``VOCAB_PARALLEL_PASSES``) and
        Transformer Engine's in-place parallel loss (``IN_PLACE_PASSES``); the other
        implementations' passes are not counted yet (0: their time is not priced)."""
        if self.kind == "in-place":
            return (e * sum(IN_PLACE_PASSES["forward"].values()),
                    e * sum(IN_PLACE_PASSES["backward"].values()))
        if self.kind not in VOCAB_PARALLEL:  # the compiled loss's passes counted as the
            return 0.0, 0.0  # unfused one's (Inductor's fusion of them not priced)
        fwd = e + sum(VOCAB_PARALLEL_PASSES["forward"].values())
        bwd = sum(VOCAB_PARALLEL_PASSES["backward"].values()) + (4.0 + e if e != 4 else 0.0)
        return fwd, bwd

    def grad_bytes(self, e: float) -> float:
        """The gradient it hands the output layer, in the logits' dtype."""
        return 0.0 if self.kind == "none" else float(e)

    def cached_bytes(self, e: float) -> float:
        """Bytes per logit the caching allocator keeps reserved, not allocated, through
        the loss backward: the model's logits, freed after the loss forward, are a block
        smaller than every fp32 buffer the backward asks for, so none of them can reuse
        it (CUDACachingAllocator serves a request from a free block at least its size);
        the output layer's gradient, e bytes per logit, takes it back afterwards. The
        compiled loss keeps the logits, so nothing is freed."""
        return float(e) if self.kind in ("eager", "eager-held", "loss-parallel",
                                         *VOCAB_PARALLEL) and e < 4 else 0.0


VOCAB_PARALLEL = ("vocab-parallel", "vocab-parallel-compiled")  # Megatron-Core's algorithm


# Megatron-Core's vocab-parallel cross-entropy, pass by pass over the logits (Megatron-LM
# d98e8a64 megatron/core/tensor_parallel/cross_entropy.py; the same passes at f2e5db402c),
# fp32 bytes read + written per logit: the .float() copy written (L27; its read of the
# logits, e bytes, is added apart), max read (L29), x -= max in place (L42), exp in place
# (L63), its sum read (L64), softmax = exp / sum in place (L77); backward: grad *=
# grad_output in place (L113), then autograd's cast of the fp32 gradient back to the
# logits' dtype (4 read + e written, none when the logits are fp32). The predicted-logit
# gather and the target update touch one element a row (not counted).
VOCAB_PARALLEL_PASSES = {"forward": {"float copy": 4.0, "max": 4.0, "subtract max": 8.0,
                                     "exp": 8.0, "sum": 4.0, "divide": 8.0},
                         "backward": {"times grad_output": 8.0}}


# Transformer Engine's parallel cross-entropy at 71bbefbf (the TE the Bridge releases pin),
# in elements of the logits' dtype read + written per logit: the online softmax reads the
# logits (transformer_engine/common/triton/cross_entropy.py L72), the loss kernel reads them
# again and writes each gradient over its logit (L177, L190); the backward scales it in place
# (L261-262) unless grad_output is the scalar 1 (pytorch/triton/cross_entropy.py L119-136),
# which Megatron's per-token loss is not
IN_PLACE_PASSES = {"forward": {"online softmax": 1.0, "loss and gradient": 2.0},
                   "backward": {"times grad_output": 2.0}}


LOSSES = {loss.name: loss for loss in (
    Loss(name="eager", kind="eager",
         summary="torch F.cross_entropy(logits.float()): an fp32 copy, an fp32 log-softmax "
                 "kept for backward",
         source="torchtitan 9dec370 train.py L131-134 and e7c0cae torchtitan/components/"
                "loss.py L18-22 (F.cross_entropy(pred.flatten(0, 1).float(), labels)); "
                "transformers loss_utils ForCausalLMLoss (logits.float()); aten "
                "log_softmax saves its output, nll_loss_backward and "
                "_log_softmax_backward_data each write a full fp32 tensor. Measured on "
                "torch 2.13 (CPU allocator, tests/test_memory_measured.py): 12 B per bf16 "
                "logit at the peak of forward + backward"),
    Loss(name="eager-held", kind="eager-held",
         summary="torchtitan's loss of April 2024: the model returns fp32 logits "
                 "(output(h).float()) and the training loop holds them through the backward",
         source="torchtitan 395a5262 torchtitan/models/llama/model.py L436 (output = "
                "self.output(h).float()), train.py L163-164, L290-293 (loss = loss_fn(pred, "
                "labels); loss.backward() with pred still referenced)"),
    Loss(name="loss-parallel", kind="loss-parallel",
         summary="the eager loss on vocab-sharded DTensor logits (torch loss_parallel): "
                 "log-softmax and nll written out per shard, the backward fused",
         source="torch 2.13 torch/distributed/tensor/parallel/loss.py L197-221 (_log_softmax: "
                "an fp32 copy, shifted = x - max, exp(shifted), result), L451-517 "
                "(_nll_loss_and_log_softmax_backward: zeros_like(x), exp(x), their sum, "
                "times the gradient); torchtitan runs it under TP by default "
                "(disable_loss_parallel False, config_manager.py L283-286 @9dec370): 14 B "
                "per bf16 logit forward, 16 B backward"),
    Loss(name="compiled", kind="compiled",
         summary="the same loss under torch.compile: fused kernels keep the logits and "
                 "per-row statistics, the gradient is written in the logits' dtype",
         source="torchtitan bbb1b616 (#1033, 2025-04-02: the loss compiled with "
                "training.compile), e7c0cae torchtitan/components/loss.py L25-30; measured "
                "on torch 2.13 Inductor (CPU, tests/test_memory_measured.py): 4 B per bf16 "
                "logit at the peak"),
    Loss(name="vocab-parallel", kind="vocab-parallel",
         summary="Megatron-Core's vocab-parallel cross-entropy: one fp32 copy, max, exp and "
                 "softmax in place, the fp32 softmax kept and turned into the gradient",
         source="Megatron-LM d98e8a64 megatron/core/tensor_parallel/cross_entropy.py L25 "
                "(.float() copy), L42, L61-62, L77 (in place), L181 (save_for_backward "
                "exp_logits), L186-210 (gradient in place, cast to the logits' dtype); the "
                "default: cross_entropy_loss_fusion False, cross_entropy_fusion_impl "
                "'native' (model_parallel_config.py L320, L325)"),
    Loss(name="vocab-parallel-fused", kind="vocab-parallel-compiled",
         summary="Megatron-Core's native fused cross-entropy (cross_entropy_loss_fusion, "
                 "cross_entropy_fusion_impl 'native'): the same algorithm in four "
                 "torch.compile'd steps; the compiled backward writes the gradient into a "
                 "new fp32 buffer beside the saved softmax, then casts it to bf16",
         source="Megatron-LM d98e8a64 megatron/core/fusions/fused_cross_entropy.py L12-84 "
                "(calculate_logits_max, calculate_predicted_logits, "
                "calculate_cross_entropy_loss, calculate_gradients under @jit_fuser; L82 "
                "grad_input.to(torch.bfloat16)), L119 (save_for_backward the softmax), "
                "megatron/core/jit.py L16-33 (jit_fuser = torch.compile on torch >= 2.2); "
                "language_module.py L197-198 (impl 'native', the default: "
                "model_parallel_config.py L325). Measured on torch 2.13 Inductor (CPU, "
                "tests/test_memory_measured.py, the steps written out in "
                "ledger.verify.steps): 10 B per bf16 logit at the backward's peak against "
                "6 unfused - the in-place index_put and mul_ on the saved softmax, an input "
                "of the compiled graph, are not done in place; on the GPU (Inductor's "
                "Triton backend) the same functionalisation is assumed, not measured. "
                "--disable-jit-fuser leaves it compiled (jit.py L27-29 rebinds the name "
                "after fused_cross_entropy.py's decorators ran at import, pretrain_gpt.py "
                "L45; global_vars.py L178-179)"),
    Loss(name="te-parallel", kind="in-place",
         summary="Transformer Engine's parallel cross-entropy (Megatron "
                 "cross_entropy_loss_fusion with cross_entropy_fusion_impl 'te'): Triton "
                 "kernels write each logit's gradient over the logit itself, in its dtype, "
                 "and keep that tensor for the backward",
         source="Megatron-LM d98e8a64 megatron/core/models/common/language_module/"
                "language_module.py L173-194 (te_parallel_cross_entropy under "
                "cross_entropy_loss_fusion and cross_entropy_fusion_impl 'te'); "
                "TransformerEngine 71bbefbf (the TE Megatron-Bridge v0.4.1 pins, uv.lock "
                "L4880-4882) transformer_engine/pytorch/triton/cross_entropy.py L111 "
                "(cross_entropy_forward returns the input, its gradient written in place), "
                "L130-140 (the backward scales it in place) and pytorch/cross_entropy.py L62 "
                "(save_for_backward(inp.detach())). The same at every TE Megatron-Bridge v0.2.0-v0.6.0 pins (70f53666, "
                "5671fd36, 71bbefbf, 4220403e, b9d690e0, 4329ff84); TE 01bbe3ee (2026-07-09, "
                "#3193) moved the gradient to a separate fp32 tensor, not priced here"),
    Loss(name="none", kind="none", summary="no loss priced (the seed's accounting)",
         source="the seed's ledger counts state and layer activations only"),
)}


def loss(name: str) -> Loss:
    """A loss implementation by name; an unknown name lists the known ones."""
    if name not in LOSSES:
        raise LedgerError("loss", f"unknown loss {name!r}; known: {', '.join(LOSSES)}")
    return LOSSES[name]
