"""The flag groups of what one training step keeps and overlaps: recompute, offload, state
dtypes, loss, compile, CUDA graphs (``--recompute-*``, ``--*-dtype``, ``--cuda-graph-scope``)
and the overlap switches (``--overlap-*``). ``ledger.cli.args`` adds them to its parsers;
``step_flags`` and ``plan_facts`` turn them into ParallelConfig fields.
"""
from __future__ import annotations

import argparse

from ledger.config import (EP_BACKENDS, GRAPH_SCOPES, MEGATRON_RECOMPUTE_MODULES,
                           OFFLOAD_MODULES, RECOMPUTE_MODULES, UNPRICED_RECOMPUTE_MODULES)
from ledger.frameworks.dtypes import STATE_DTYPES
from ledger.frameworks.dsa_loss import INDEXER_LOSSES
from ledger.errors import LedgerError
from ledger.frameworks import LOSSES
from ledger.io import MAX_DROPOUT, MAX_LAYERS, count, real
from ledger.cli.graph_flags import graph_scopes, parse_scopes
from ledger.cli.megatron_only import fsdp_double_buffer
from ledger.io.environment import cublas_bytes


def _modules(text: str) -> tuple[str, ...]:
    """--recompute-modules: comma-separated names Megatron accepts
    (MEGATRON_RECOMPUTE_MODULES; those not priced are named by ``unpriced_flags``)."""
    mods = tuple(m for m in text.split(",") if m)
    odd = [m for m in mods if m not in MEGATRON_RECOMPUTE_MODULES]
    if odd or not mods:
        raise argparse.ArgumentTypeError(f"{text!r}: not among "
                                         f"{', '.join(MEGATRON_RECOMPUTE_MODULES)}")
    return mods


def unpriced_flags(a: argparse.Namespace) -> list[str]:
    """What the typed flags set that the ledger does not price, for stderr (one line) and
    the approximate mark: of --recompute-modules, GatedDeltaProduct's modules, whose mixer
    the ledger does not model, and the HyperConnections', whose recompute it does not
    (ledger.frameworks.recompute_modules); --fp8-output-proj's MXFP8 copies of the LM
    head's input and weight. The Bridge rows name the last alike (render.bridge).
    (mla_up_proj on DeepSeek-V4's attention is priced: ledger.step.recompute.CSA_UP.)"""
    given = getattr(a, "recompute_modules", None) or ()
    mods = [m for m in given if m in UNPRICED_RECOMPUTE_MODULES]
    out = [f"--recompute-modules {','.join(mods)} (GatedDeltaProduct / HyperConnections' "
           f"recompute, not modelled: priced as not recomputed)"] if mods else []
    if getattr(a, "fp8_output_proj", False):  # its GEMMs priced (ledger.frameworks.fp8_head)
        out.append("--fp8-output-proj (the LM head's MXFP8 input and weight copies, not "
                   "modelled: its memory priced as the BF16 head's)")
    return out


def _refuse_unless(a: argparse.Namespace, field: str, applies, what: str,
                   recipes: str) -> None:
    """A typed flag (namespace ``field``) that ``applies(a)`` finds changing nothing for this
    run is refused in one line: ``what`` it does, under which Megatron FP8 ``recipes``, and
    what was given."""
    if getattr(a, field, False) and not applies(a):
        raise LedgerError(field, f"{what} under --framework megatron, --precision fp8, "
                                 f"--fp8-recipe {recipes}; got --framework {a.framework}, "
                                 f"--precision {a.precision or 'default'}")


def check_fp8_attention(a: argparse.Namespace) -> None:
    """--fp8-dot-product-attention typed where it changes nothing is refused, as
    --fp8-recipe without --precision fp8 is: Megatron hands it to TE only under the
    delayed, tensorwise and mxfp8 recipes (ledger.frameworks.fp8_attention)."""
    from ledger.frameworks.fp8_attention import FP8_ATTENTION_RECIPES, fp8_attention

    _refuse_unless(a, "fp8_attention", fp8_attention, "--fp8-dot-product-attention runs the "
                   "attention core in FP8", "/".join(FP8_ATTENTION_RECIPES))


def check_fp8_output_proj(a: argparse.Namespace) -> None:
    """--fp8-output-proj outside Megatron's MXFP8 recipe is refused, as Megatron-Core
    refuses fp8_output_proj without fp8 and the mxfp8 recipe (transformer_config.py
    L1569-1575 @d98e8a64; ledger.frameworks.fp8_head)."""
    from ledger.frameworks.fp8_head import fp8_head

    _refuse_unless(a, "fp8_output_proj", fp8_head, "--fp8-output-proj runs the LM head in "
                   "MXFP8", "mxfp8")


MAX_EP_SMS = 1024  # the parse's bound; ``check_ep_sms`` holds it to the GPU's own count


def check_ep_sms(a: argparse.Namespace, sysm) -> None:
    """--ep-sms (or a launch's --moe-flex-dispatcher-num-sms) and a typed
    --moe-flex-dispatcher-backend need the flex dispatcher; the count at most the GPU's SMs, and
    even under DeepEP, which asserts it (deepseek-ai/DeepEP 030cdf0a deep_ep/buffer.py
    L150, the Buffer.set_num_sms Megatron calls: token_dispatcher.py L1288 @d98e8a64)."""
    sms = getattr(a, "ep_sms", None)
    if sms is not None and not 1 <= sms <= sysm.gpu.sms:
        raise LedgerError("ep_sms", f"{sms} SMs for the flex dispatcher: must be 1 to the "
                                    f"{sysm.gpu.name}'s {sysm.gpu.sms}")
    dispatcher = getattr(a, "moe_dispatcher", None) or _framework_dispatcher(a)
    if sms is not None and dispatcher != "flex":  # a launch's is applied under flex only
        raise LedgerError("ep_sms", f"--ep-sms {sms} needs --moe-token-dispatcher-type flex "
                                    f"(DeepEP / HybridEP); the {dispatcher} dispatcher takes "
                                    f"no SMs of its own")
    backend = getattr(a, "ep_backend", None)  # a launch's is set under flex only
    if backend is not None and dispatcher != "flex":
        raise LedgerError("ep_backend", f"--moe-flex-dispatcher-backend {backend} needs "
                                        f"--moe-token-dispatcher-type flex; the {dispatcher} "
                                        f"dispatcher runs no DeepEP / HybridEP kernels")
    if getattr(a, "hybridep_permute_fusion", False) and not (
            dispatcher == "flex" and getattr(a, "ep_backend", None) == "hybridep"):
        raise LedgerError("hybridep_permute_fusion", "--moe-permute-fusion-into-hybridep "
                          "needs --moe-token-dispatcher-type flex --moe-flex-dispatcher-"
                          "backend hybridep (only HybridEP reads it: token_dispatcher.py "
                          "L1163, L1194 @d98e8a64)")
    from ledger.step.ep_sms import ep_backend

    deepep = dispatcher == "flex" and ep_backend(a) == "deepep"
    if sms is not None and deepep and sms % 2:  # deep_ep/buffer.py L150 @030cdf0a
        raise LedgerError("ep_sms", f"{sms} SMs for DeepEP: its Buffer.set_num_sms takes an "
                                    f"even count (one channel per 2 SMs)")


def _framework_dispatcher(a: argparse.Namespace) -> str:
    from ledger.frameworks import get

    return get(getattr(a, "framework", None) or "megatron").moe_dispatcher


def check_shared_overlap(a: argparse.Namespace, model) -> None:
    """--moe-shared-expert-overlap typed for a model without shared experts runs nothing
    beside the dispatch (Megatron accepts it so: transformer_config.py L1813-1826
    @d98e8a64): refused, as --ep-overlap on a dense model is. A launch file's is accepted
    silently (it changes no priced number)."""
    launch = getattr(a, "launch", None)
    if not getattr(a, "shared_expert_overlap", False) or (
            launch is not None and "shared_expert_overlap" in launch.flags):
        return
    if not (model.is_moe and model.shared_experts):
        raise LedgerError("shared_expert_overlap", f"--moe-shared-expert-overlap: "
                                                   f"{model.name} has no shared experts to "
                                                   f"run beside the dispatch")


def _add_step_flags(p: argparse.ArgumentParser) -> None:
    """What a step keeps beyond its layers (docs/memory.md): each at the framework's
    default unless given."""
    g = p.add_argument_group("what the step keeps (default: the framework's)")
    g.add_argument("--recompute-every", type=count(MAX_LAYERS), default=1,
                   help="with --recompute full: every n-th layer only (torchtitan's "
                        "selective layer AC, selective_ac_option = n; default 1)")
    g.add_argument("--recompute-modules", type=_modules,
                   help="with --recompute selective: the modules run again, comma-separated "
                        f"({', '.join(RECOMPUTE_MODULES)}; Megatron --recompute-modules; "
                        "default core_attn; Megatron's "
                        f"{', '.join(UNPRICED_RECOMPUTE_MODULES)} are named as not priced)")
    g.add_argument("--recompute-method", choices=("block", "uniform"),
                   help="with --recompute full: block recomputes the first "
                        "--recompute-num-layers layers of each model chunk, uniform "
                        "checkpoints groups of that many (Megatron)")
    g.add_argument("--recompute-num-layers", type=count(MAX_LAYERS),
                   help="layers of --recompute-method (Megatron; default 1)")
    g.add_argument("--cpu-offloading-num-layers", type=count(MAX_LAYERS), default=0,
                   help="layers whose activations Megatron offloads to the host (TE's CPU "
                        "offload; no PP, no recompute)")
    g.add_argument("--grad-dtype", choices=("fp32", "bf16"),
                   help="the gradient buffer's dtype (Megatron --grad-reduce-in-bf16: bf16; "
                        "default: the framework's)")
    for flag, what in (("--main-params-dtype", "main (master) params"),
                       ("--exp-avg-dtype", "Adam's first moment"),
                       ("--exp-avg-sq-dtype", "Adam's second moment")):
        g.add_argument(flag, choices=tuple(STATE_DTYPES),
                       dest={"--main-params-dtype": "master_dtype"}.get(flag),
                       help=f"{what} (Megatron --use-precision-aware-optimizer {flag}; "
                            f"default: the framework's)")
    g.add_argument("--dropout", type=real(MAX_DROPOUT, 0.0, closed_low=True),
                   help="hidden and attention dropout (Megatron --hidden-dropout; default: "
                        "the framework's, megatron 0.1, torchtitan 0)")
    g.add_argument("--loss", choices=tuple(LOSSES),
                   help="the loss implementation (default: the framework's; "
                        "docs/memory.md lists what each keeps)")
    g.add_argument("--compile", action="store_true",
                   help="torch.compile (torchtitan --training.compile): the compiled loss "
                        "where the framework compiles it, compiled-code fragmentation")
    g.add_argument("--cuda-graph-scope", type=parse_scopes, metavar="SCOPE[,SCOPE]",
                   help="blocks captured in CUDA graphs, their kernels launched without the "
                        f"host (Megatron --cuda-graph-scope; {', '.join(GRAPH_SCOPES)}; "
                        "comma-separated; default none: every kernel launched eagerly; "
                        "megatron only, not with --recompute full but full_iteration; alone, "
                        "TE's graphs, where a Megatron launch needs --cuda-graph-impl)")
    g.add_argument("--cublas-workspace-config", dest="cublas_workspace_bytes", type=cublas_bytes,
                   metavar=":SIZE:COUNT", help="PyTorch's cuBLAS workspace (CUBLAS_WORKSPACE_"
                   "CONFIG; default PyTorch's for the GPU): two where torch runs GEMMs")
    g.add_argument("--transformer-impl", choices=("transformer_engine", "local"), help="Megatron's "
                   "layers (default TE's); local: its own, scores kept, no TE workspace")
    g.add_argument("--cuda-graph-impl", choices=("transformer_engine", "local"),
                   help="whose graphs capture --cuda-graph-scope (default transformer_engine: "
                        "its router graph keeps the pre-MLP norm); alone: whole layers")
    g.add_argument("--moe-flex-dispatcher-backend", dest="ep_backend", choices=EP_BACKENDS,
                   help="the flex dispatcher's kernels (default deepep)")
    g.add_argument("--moe-permute-fusion-into-hybridep", dest="hybridep_permute_fusion",
                   action="store_true",
                   help="HybridEP permutes inside its dispatch / combine kernels (Megatron-Core"
                        "'s flag; default off: its standalone permute and unpermute kernels, "
                        "priced as DeepEP's)")
    g.add_argument("--ep-sms", type=count(MAX_EP_SMS), metavar="N",
                   help="the SMs the flex dispatcher's kernels take (Megatron "
                        "--moe-flex-dispatcher-num-sms; at most the GPU's; default: the "
                        "backend's, DeepEP 20, HybridEP 24 in one NVLink domain, 8 across)")
    g.add_argument("--offload-modules", type=_offload_modules, metavar="MODULE[,MODULE]",
                   help="modules whose saved inputs go to the host in the forward and come "
                        "back for their backward (Megatron --fine-grained-activation-offloading"
                        f" --offload-modules; {', '.join(OFFLOAD_MODULES)}; all: every saved "
                        "tensor but the last layer's, torchtitan graph_trainer's cpu_offload_all)")
    g.add_argument("--activation-offload-fraction", type=real(1.0, 0.0, closed_low=True),
                   default=1.0, help="with --offload-modules: the share of each chunk's "
                   "offload groups offloaded, first in forward order (Megatron; default 1)")
    g.add_argument("--optimizer-offload-fraction", type=real(1.0, 0.0, closed_low=True),
                   default=0.0, help="Megatron's optimizer CPU offload (--optimizer-cpu-offload): "
                   "this share of the optimizer's elements, their main params and moments on "
                   "the host (default 0: none)")
    g.add_argument("--overlap-cpu-optimizer-d2h-h2d", dest="overlap_cpu_optimizer",
                   action="store_true", help="with --optimizer-offload-fraction: the "
                   "gradient and parameter copies overlap the CPU optimizer step (Megatron)")
    g.add_argument("--nccl-nvls", action=argparse.BooleanOptionalAction, default=None,
                   help="NCCL_NVLS_ENABLE: NVLS buffers for the TP and data-parallel groups "
                        "inside one NVLink domain (default: NCCL's, on where the system's "
                        "switches multicast; --no-nccl-nvls as Megatron-Bridge launches)")
    g.add_argument("--fp8-dot-product-attention", dest="fp8_attention", action="store_true",
                   help="the attention core in FP8, at cuDNN's measured FP8 kernel rate where "
                        "one is published, else the FP8 peak (Megatron-Core's "
                        "fp8_dot_product_attention as Megatron-Bridge recipes set it, TE "
                        "fp8_dpa; under the delayed, tensorwise and mxfp8 recipes; default off)")
    g.add_argument("--fp8-output-proj", dest="fp8_output_proj", action="store_true",
                   help="the LM head's GEMMs (and an MTP depth's logits) in MXFP8 (Megatron-"
                        "Core's fp8_output_proj as Megatron-Bridge recipes set it; under "
                        "the mxfp8 recipe only; default off: the head in BF16)")
    g.add_argument("--moe-shared-expert-overlap", dest="shared_expert_overlap",
                   action="store_true",
                   help="run the shared experts beside the dispatcher's all-to-alls "
                        "(Megatron; alltoall / flex, not with the combined 1F1B; default off)")
    g.add_argument("--fused-grouped-mlp", dest="fused_grouped_mlp", action="store_true",
                   help="the routed experts as Megatron-Core's TE op fuser with TE's CuTe "
                        "DSL kernels (use_transformer_engine_op_fuser with "
                        "NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): the activation in the grouped "
                        "GEMMs' epilogues on B200 / B300 / GB200 / GB300 under MXFP8 / NVFP4 "
                        "at ETP 1; elsewhere it changes nothing (default off)")
    g.add_argument("--ddp-bucket-size", dest="dp_bucket_params", type=count(1 << 40),
                   help="parameters per DP gradient bucket when the reduction overlaps the "
                        "backward (Megatron; default: the framework's, megatron max(40M, "
                        "1M x dp))")
    g.add_argument("--dsa-indexer-loss", dest="indexer_loss", choices=INDEXER_LOSSES,
                   default="none",
                   help="DeepSeek-V4's indexer KL loss (Megatron only; dsa_indexer_loss_coeff > 0: "
                        "sparse over the top-k, dense over every causal compressed entry; "
                        "default none, Megatron's): its target and the indexer's backward "
                        "priced in the forward; without it the indexer has no backward")
    g.add_argument("--delay-wgrad-compute", dest="delay_wgrad", action="store_true",
                   help="with --overlap-moe-expert-parallel-comm: the experts' weight "
                        "gradients run apart, under the backward's dispatch (Megatron; "
                        "default off)")
    g.add_argument("--no-gradient-accumulation-fusion", dest="grad_accumulation_fusion",
                   action="store_false", default=None,
                   help="TE returns each weight gradient to autograd: no dummy wgrads "
                        "(Megatron; default: fused)")
    g.add_argument("--fsdp-double-buffer", dest="fsdp_double_buffer", action="store_true",
                   help="Megatron-FSDP's persistent double buffers: two layers' gathered "
                        "params and two layers' gradient buckets kept for the run, at ZeRO-3 "
                        "(Megatron --fsdp-double-buffer, set by --use-nccl-ub; default off)")
    g.add_argument("--expandable-segments", action="store_true",
                   help="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the allocator "
                        "unmaps empty pages before failing, so the fit verdict counts no "
                        "fragmentation")


def _offload_modules(text: str) -> tuple[str, ...]:
    """--offload-modules: comma-separated names of OFFLOAD_MODULES."""
    mods = tuple(m for m in text.split(",") if m)
    odd = [m for m in mods if m not in OFFLOAD_MODULES]
    if odd or not mods:
        raise argparse.ArgumentTypeError(f"{text!r}: not among {', '.join(OFFLOAD_MODULES)}")
    return mods


def _add_overlap_flags(g) -> None:
    """The overlap switches a launch sets (default: the framework's for its ZeRO stage)."""
    on_off = argparse.BooleanOptionalAction
    g.add_argument("--overlap-grad-reduce", action=on_off, default=None,
                   help="overlap the DP gradient reduction with the backward (Megatron "
                        "--overlap-grad-reduce, DeepSpeed overlap_comm; default: the "
                        "framework's: megatron off below ZeRO-2, deepspeed at ZeRO-3, FSDP2 "
                        "always)")
    g.add_argument("--overlap-param-gather", action=on_off, default=None,
                   help="overlap the parameter all-gather with compute (Megatron "
                        "--overlap-param-gather; needs --overlap-grad-reduce)")
    g.add_argument("--overlap-moe-expert-parallel-comm", "--ep-overlap", dest="ep_overlap",
                   action=on_off, default=None,
                   help="hide EP all-to-alls under another micro-batch's compute (Megatron's "
                        "combined 1F1B, interleaved or no pipeline; DualPipe's pairs under "
                        "--framework deepseek, its default there)")


def library_flags(a: argparse.Namespace) -> dict:
    """NCCL's NVLS setting and Megatron's own offloads as ParallelConfig fields (issue 31);
    the optimizer offload's host bytes are CPU Adam's (placement.optim_offload)."""
    f, opt = getattr(a, "optimizer_offload_fraction", 0.0) or 0.0, getattr(a, "optimizer", "adam")
    if f and opt != "adam":
        raise LedgerError("optimizer_offload_fraction", f"{f:g} is priced for Adam's state on the "
                          f"host (fp32 param, grad and two moments); got --optimizer {opt}")
    return dict(nccl_nvls=getattr(a, "nccl_nvls", None),
                optimizer_offload_fraction=getattr(a, "optimizer_offload_fraction", 0.0) or 0.0,
                overlap_cpu_optimizer=bool(getattr(a, "overlap_cpu_optimizer", False)),
                offload_modules=tuple(getattr(a, "offload_modules", None) or ()),
                activation_offload_fraction=getattr(a, "activation_offload_fraction", 1.0))


def no_plan_offload(a: argparse.Namespace) -> tuple[str, ...]:
    """The offload fields the planner leaves out; refused when given (it searches none)."""
    for flag, dest in (("--offload-modules", "offload_modules"),
                       ("--optimizer-offload-fraction", "optimizer_offload_fraction")):
        v = getattr(a, dest, None)
        if v:
            shown = ",".join(v) if isinstance(v, tuple) else f"{v:g}"
            raise LedgerError(dest, f"plan searches no Megatron offload; drop {flag} {shown}")
    return ("offload_modules", "activation_offload_fraction", "optimizer_offload_fraction",
            "overlap_cpu_optimizer")


# -- what the step keeps (issue 21) ------------------------------------------------------
def step_flags(a: argparse.Namespace) -> dict:
    """--recompute-every, --dropout, --loss, --compile as ParallelConfig fields; dropout
    on a framework whose modules keep no dropout masks is refused."""
    from ledger.arch import table
    from ledger.frameworks import get

    check_fp8_attention(a)
    check_fp8_output_proj(a)
    if a.dropout:
        t = table(get(a.framework).activations)
        if not (t.residual_dropout_masks or t.eager_dropout):
            raise LedgerError("dropout", f"{a.framework}'s modules have no dropout "
                                         f"(saved-tensor table {t.name}); drop --dropout "
                                         f"{a.dropout:g}")
    dtypes = {f: getattr(a, f, None) for f in ("grad_dtype", "master_dtype", "exp_avg_dtype",
                                                "exp_avg_sq_dtype")}
    return dict(recompute_every=a.recompute_every, dropout=a.dropout, loss=a.loss,
                compile=a.compile, cuda_graph=graph_scopes(a),
                cuda_graph_local=getattr(a, "cuda_graph_impl", None) == "local",
                cublas_workspace_bytes=getattr(a, "cublas_workspace_bytes", None),
                te_layers=getattr(a, "transformer_impl", None) != "local",
                ep_backend=a.ep_backend, ep_sms=getattr(a, "ep_sms", None),
                hybridep_permute_fusion=bool(getattr(a, "hybridep_permute_fusion", False)),
                shared_expert_overlap=bool(getattr(a, "shared_expert_overlap", False)),
                fp8_attention=bool(getattr(a, "fp8_attention", False)),
                fp8_output_proj=bool(getattr(a, "fp8_output_proj", False)),
                fused_grouped_mlp=bool(getattr(a, "fused_grouped_mlp", False)),
                indexer_loss=getattr(a, "indexer_loss", None) or "none",
                paged_stash=getattr(a, "paged_stash", None),  # a launch file's (inputs)
                delay_wgrad=bool(getattr(a, "delay_wgrad", False)),
                dp_bucket_params=getattr(a, "dp_bucket_params", None),
                wgrad_deferral=getattr(a, "wgrad_deferral", None),
                expandable_segments=bool(getattr(a, "expandable_segments", False)),
                fsdp_double_buffer=fsdp_double_buffer(a),
                grad_accumulation_fusion=getattr(a, "grad_accumulation_fusion", True)
                is not False,
                offload_activation_layers=getattr(a, "cpu_offloading_num_layers", 0) or 0) \
        | recompute_flags(a) | dtypes | library_flags(a)


def recompute_flags(a: argparse.Namespace) -> dict:
    """Megatron's --recompute-modules / --recompute-method / --recompute-num-layers as
    ParallelConfig fields."""
    n, method = getattr(a, "recompute_num_layers", None), getattr(a, "recompute_method", None)
    if n is not None and method is None:
        raise LedgerError("recompute_num_layers", f"--recompute-num-layers {n} needs "
                                                  f"--recompute-method block or uniform")
    mods = getattr(a, "recompute_modules", None)
    out = {"recompute_modules": tuple(mods) if mods is not None else None}
    if method == "block":
        out["recompute_layers"] = n or 1
    elif method == "uniform":
        out["recompute_group"] = n or 1
    return out


def plan_facts(a: argparse.Namespace) -> dict:
    """The step flags the planner holds fixed (Megatron's CPU activation offload among them:
    ``ledger.plan.search.offload_pins``), and the run's expert TP and token dispatcher
    (``ledger.plan.search.EXPERT_FACTS``); it searches every-layer recompute only."""
    if a.recompute_every != 1:
        raise LedgerError("recompute_every", f"plan searches recompute of every layer or "
                                             f"none; drop --recompute-every "
                                             f"{a.recompute_every}")
    if getattr(a, "recompute_method", None) is not None:
        raise LedgerError("recompute_method", f"plan searches recompute of every layer or "
                                              f"none; drop --recompute-method "
                                              f"{a.recompute_method}")
    return {k: v for k, v in step_flags(a).items()
            if k not in ("recompute_every", *no_plan_offload(a))} \
        | {"etp": getattr(a, "etp", None), "moe_dispatcher": getattr(a, "moe_dispatcher", None)}
