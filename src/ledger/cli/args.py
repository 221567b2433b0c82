"""The command line's grammar: every subcommand, flag, default, unit and limit.

``ledger.cli`` parses with ``build_parser()`` and runs; this module only declares. Each
number is parsed by a type from ``ledger.io.limits``, which refuses non-finite, non-positive
and absurd values with the flag's name and the limit.
"""
from __future__ import annotations

import argparse

from ledger import __version__
from ledger.config import RECOMPUTE
from ledger.io import (MAX_GLOBAL_BATCH, MAX_GPU_MEMORY_GIB, MAX_GPUS_PER_DOMAIN,
                       MAX_GPUS_PER_NODE, MAX_HEADROOM_GIB, MAX_MICRO_BATCH, MAX_MICROBATCHES,
                       MAX_TIME, MAX_TOP, MAX_VP, MIN_TIME, OneLineParser, count, natural, real)
from ledger.memory import OPTIMIZERS, PRECISIONS
from ledger.cli.placement_flags import (FP8_RECIPES, GPUS, _add_framework_flag,
                                        _add_parallel_flags)
from ledger.cli.runs import add_run_flags
from ledger.cli.step_flags import _add_overlap_flags, _add_step_flags
from ledger.pipeline import KINDS as SCHEDULES

MAX_CONTEXT = 1 << 24  # tokens of one sequence (the model-size limit of ledger.io)


def prefill_chunk(text: str) -> int:
    """argparse type of SGLang's --chunked-prefill-size: tokens in 1..MAX_CONTEXT, or -1,
    chunked prefill off (its flag's help, server_args.py at sglang 0a6356ae)."""
    if text.strip() == "-1":
        return -1
    try:
        return count(MAX_CONTEXT)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be -1 (chunked prefill off) or an integer in "
                                         f"1..{MAX_CONTEXT:,}, got {text[:40]!r}") from None
MAX_BATCH = 1 << 20  # sequences decoded together
MAX_KV_BYTES = 1 << 50  # 1 PiB per GPU
MAX_BLOCK = 1 << 16  # tokens per KV block


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    """One flag per ModelSpec field (``ledger.cli.model_flags.FLAGS``)."""
    from ledger.cli.model_flags import add_model_flags

    add_model_flags(p)


def _add_source_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and placement from a launch config")
    g.add_argument("--from-megatron", metavar="FILE",
                   help="a Megatron-LM launch script or file of pretrain_gpt.py arguments; "
                        "or a command line: 'VAR=value ... script.sh ARGS'")
    g.add_argument("--from-torchtitan", metavar="FILE", help="a torchtitan job TOML")
    g.add_argument("--verbose", action="store_true",
                   help="also list what the file sets that was applied, and what changes no "
                        "priced number")


def _add_gpu_memory_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu-memory", type=real(MAX_GPU_MEMORY_GIB),
                   help="the GPU's memory, GiB, in place of the preset's (a GPU outside "
                        "the presets: GH200 144 GB, ...); with estimate, plan and serve "
                        "it needs --gpu or --system, whose peaks it keeps")


MAX_LORA_RANK = 1 << 16


def _layer_range(text: str) -> tuple[int, int]:
    """START:STOP, the layers [START, STOP)."""
    start, sep, stop = text.partition(":")
    if not sep or not start.strip().isdigit() or not stop.strip().isdigit():
        raise argparse.ArgumentTypeError(f"must be START:STOP (layers START..STOP-1), got "
                                         f"{text!r}")
    return int(start), int(stop)


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def add_finetune_flags(p: argparse.ArgumentParser, plan: bool = False) -> None:
    """What trains (``ledger.finetune.FineTune``) and where the state lives."""
    g = p.add_argument_group("fine-tuning (peft / bitsandbytes names)")
    g.add_argument("--finetune", choices=("full", "lora", "qlora"),
                   help="fine-tune: full (everything, less --freeze), lora (adapters on a "
                        "frozen base), qlora (on an NF4 base); default: pre-training")
    g.add_argument("--lora-rank", type=count(MAX_LORA_RANK), help="LoRA r (peft default 8)")
    g.add_argument("--lora-alpha", type=real(1e6), help="LoRA alpha (peft default 8)")
    g.add_argument("--lora-targets", type=_names,
                   help="comma-separated module names (q_proj,v_proj,...) or all-linear "
                        "(default: peft's for the family)")
    g.add_argument("--lora-dropout", type=real(1.0, 0.0, closed_low=True),
                   help="LoRA dropout (default 0)")
    g.add_argument("--dora", action="store_true", help="DoRA: a magnitude vector per matrix")
    g.add_argument("--freeze", type=_names,
                   help="--finetune full: module kinds kept frozen (embedding, attention, "
                        "mlp, experts, shared_experts, router, norms, output, positions)")
    g.add_argument("--freeze-layers", type=_layer_range,
                   help="START:STOP: layers that train nothing")
    g.add_argument("--no-double-quant", action="store_true",
                   help="qlora: fp32 absmax (bnb_4bit_use_double_quant False)")
    g.add_argument("--kbit-upcast", action="store_true",
                   help="qlora: peft's prepare_model_for_kbit_training (unquantised "
                        "params in fp32)")
    if not plan:
        g.add_argument("--offload", choices=("none", "optimizer", "params"), default="none",
                       help="CPU offload: optimizer (DeepSpeed ZeRO-Offload) or params "
                            "(all state: FSDP2 CPUOffloadPolicy, DeepSpeed offload_param)")


def _add_system_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", help="GPU preset (see 'gpus'; default h100-sxm)")
    p.add_argument("--system", metavar="FILE",
                   help="a custom system, JSON or TOML with units in the keys")
    _add_gpu_memory_flag(p)


def _add_outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")


def _report_parsers(sub) -> None:
    r = sub.add_parser("report", help="the ledger of one placement")
    _add_model_flags(r)
    _add_source_flags(r)
    _add_parallel_flags(r)
    r.add_argument("--gpu", help="GPU preset to hold the memory against (see 'gpus'; "
                                 "default h100-sxm)")
    add_finetune_flags(r)
    r.add_argument("--system", metavar="FILE",
                   help="a custom system, JSON or TOML with units in the keys (its GPU)")
    _add_gpu_memory_flag(r)
    _add_outputs(r)
    e = sub.add_parser("estimate", help="step time, MFU and where the time goes")
    _add_model_flags(e)
    _add_source_flags(e)
    _add_parallel_flags(e)
    _add_system_flags(e)
    e.add_argument("--tp-overlap", action="store_true", help="overlap TP comm with GEMMs")
    e.add_argument("--batch", metavar="FILE", help="size many placements in one process: "
                                                   "a line of flags each (docs/api.md)")
    add_finetune_flags(e)
    add_run_flags(e)
    _add_outputs(e)


def _plan_parser(sub) -> None:
    pl = sub.add_parser("plan", help="search every placement, rank by step time")
    _add_model_flags(pl)
    _add_source_flags(pl)
    pl.add_argument("--gpus", type=GPUS, help="world size, GPUs (or --min-gpus)")
    pl.add_argument("--min-gpus", action="store_true",
                    help="the smallest number of GPUs on which a placement fits (up to "
                         "--max-gpus)")
    pl.add_argument("--max-gpus", type=GPUS, default=1024,
                    help="with --min-gpus: the largest world tried (default 1,024)")
    pl.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adam",
                    help="optimizer (default adam; see report --help)")
    pl.add_argument("--precision", choices=(*PRECISIONS, "fp8"),
                    help="bytes per state (default: the framework's); fp8: its linear "
                         "layers' GEMMs in FP8 (--fp8-recipe)")
    pl.add_argument("--fp8-recipe", choices=FP8_RECIPES,
                    help="with --precision fp8: the recipe (as estimate --help says)")
    add_finetune_flags(pl, plan=True)
    _add_system_flags(pl)
    pl.add_argument("--gpus-per-node", type=count(MAX_GPUS_PER_NODE),
                    help="GPUs per node (default 8, or the --system file's)")
    pl.add_argument("--gpus-per-domain", type=count(MAX_GPUS_PER_DOMAIN),
                    help="GPUs per NVLink (scale-up) domain, whole nodes (default: the "
                         "--gpu preset's, 72 for gb200 / gb300, else one node)")
    pl.add_argument("--global-batch", "--global-batch-size", type=count(MAX_GLOBAL_BATCH),
                    help="sequences per step (required)")
    pl.add_argument("--top", type=count(MAX_TOP), default=10, help="plans listed (default 10)")
    for axis in ("tp", "pp", "cp", "dp", "ep"):
        pl.add_argument(f"--{axis}", type=GPUS, help=f"pin {axis}, GPUs")
    pl.add_argument("--vp", type=count(MAX_VP), help="pin virtual stages per PP rank")
    pl.add_argument("--etp", "--expert-tensor-parallel-size", type=GPUS,
                    help="hold expert tensor-parallel GPUs in every placement (default: each "
                         "placement's tp, as Megatron-LM)")
    pl.add_argument("--moe-token-dispatcher-type", dest="moe_dispatcher",
                    choices=("alltoall", "allgather", "flex"),
                    help="hold the MoE token dispatcher (default: the framework's; megatron "
                         "alltoall); flex runs at expert TP 1")
    pl.add_argument("--zero", type=natural(3), help="pin the ZeRO stage 0..3")
    pl.add_argument("--micro-batch", type=count(MAX_MICRO_BATCH),
                    help="pin the micro-batch size, sequences")
    pl.add_argument("--recompute", choices=RECOMPUTE, help="pin the recompute mode")
    pl.add_argument("--schedule", choices=SCHEDULES, help="pin the pipeline schedule")
    pl.add_argument("--max-tp", type=GPUS, help="largest tp searched, GPUs")
    pl.add_argument("--max-pp", type=GPUS, help="largest pp searched, stages")
    pl.add_argument("--no-cp", action="store_true", help="search no context parallelism")
    pl.add_argument("--no-hsdp", action="store_true", help="search no HSDP")
    pl.add_argument("--no-flash", action="store_true", help="materialised attention scores")
    _add_overlap_flags(pl)
    _add_framework_flag(pl)
    _add_step_flags(pl)
    pl.add_argument("--headroom", type=real(MAX_HEADROOM_GIB, 0.0, closed_low=True),
                    default=2.0, help="GiB kept free below the usable capacity (default 2)")
    pl.add_argument("--baseline", help='a shape to compare with, e.g. "tp=8,cp=1,pp=16,dp=128" '
                                       "(keys: tp cp pp dp ep vp zero mb recompute schedule)")
    add_run_flags(pl, phases=False)
    _add_outputs(pl)


def _serve_parser(sub) -> None:
    from ledger.serve import GPU_MEMORY_UTILIZATION, KV_DTYPES
    from ledger.serve.quant import ALIASES, METHODS
    from ledger.serve.state import STATE_DTYPES

    QUANT_FLAGS = (*METHODS, *ALIASES, "none")

    s = sub.add_parser("serve", help="serving with vLLM: weights, KV cache, concurrency, "
                                     "prefill and decode time")
    _add_model_flags(s)
    _add_source_flags(s)
    g = s.add_argument_group("serving layout and engine (vLLM's spellings accepted)")
    g.add_argument("--tp", "--tensor-parallel-size", type=GPUS, default=1,
                   help="tensor-parallel GPUs (default 1)")
    g.add_argument("--pp", "--pipeline-parallel-size", type=GPUS, default=1,
                   help="pipeline stages (default 1)")
    g.add_argument("--dp", "--data-parallel-size", type=GPUS, default=1,
                   help="engine replicas; an MoE's experts span them (default 1)")
    g.add_argument("--ep", type=GPUS, default=1,
                   help="expert parallel GPUs: 1, or tp x dp (vLLM's EP puts whole experts "
                        "on every GPU of a stage)")
    g.add_argument("--enable-expert-parallel", action="store_true",
                   help="vLLM's flag: ep = tp x dp")
    g.add_argument("--context", "--max-model-len", type=count(MAX_CONTEXT), required=True,
                   help="tokens a sequence may reach (vLLM's max_model_len)")
    g.add_argument("--batch", type=count(MAX_BATCH), default=1,
                   help="sequences decoded together, for the time per token (default 1)")
    g.add_argument("--quantization", "-q", choices=QUANT_FLAGS,
                   help="the weights' format, over the checkpoint's (default: its "
                        "config.json's quantization_config; a preset's published one): the "
                        "same method or one of its kernels; fp8 / bitsandbytes on a bf16 "
                        "checkpoint quantize at load")
    g.add_argument("--engine", choices=("vllm", "sglang"), default="vllm",
                   help="whose memory plan: vLLM's (default) or SGLang's static fraction "
                        "and token pool")
    g.add_argument("--mem-fraction-static", type=real(1.0),
                   help="SGLang's share of the GPU for weights and the token pool "
                        "(default: SGLang's for the GPU; --engine sglang)")
    g.add_argument("--mxfp4-backend", choices=("triton", "marlin", "flashinfer"),
                   help="vLLM's MXFP4 MoE kernels (default: vLLM's for the GPU; marlin is "
                        "VLLM_MXFP4_USE_MARLIN=1)")
    g.add_argument("--sampler", choices=("flashinfer", "native", "sort"),
                   help="top-k/top-p kernels of vLLM's profile sampler pass (default "
                        "flashinfer, vLLM's since PR #40376; native is its Triton kernel, "
                        "VLLM_USE_FLASHINFER_SAMPLER=0; sort is the PyTorch sort of vLLM "
                        "before PR #33538, as in its 0.10-0.11 start-ups)")
    g.add_argument("--kv-dtype", "--kv-cache-dtype", choices=tuple(KV_DTYPES),
                   help="KV cache dtype (default vLLM's auto: the KV cache a ModelOpt "
                        "checkpoint declares, else bf16, the model's)")
    g.add_argument("--gpu-memory-utilization", type=real(1.0),
                   help=f"share of the GPU vLLM takes (default {GPU_MEMORY_UTILIZATION:g}, "
                        f"vLLM's)")
    g.add_argument("--kv-cache-memory-bytes", type=count(MAX_KV_BYTES),
                   help="bytes for the KV cache per GPU, as vLLM's flag (skips the profile)")
    g.add_argument("--block-size", type=count(MAX_BLOCK), help="tokens per KV block (default 16)")
    g.add_argument("--max-num-batched-tokens", type=count(MAX_CONTEXT),
                   help="tokens per step (default: vLLM's for the GPU)")
    g.add_argument("--chunked-prefill-size", type=prefill_chunk,
                   help="SGLang's tokens per prefill chunk, -1 for none (--engine sglang; "
                        "default: SGLang's for the GPU)")
    g.add_argument("--max-num-seqs", type=count(MAX_BATCH),
                   help="sequences per step (default: vLLM's for the GPU)")
    g.add_argument("--hybrid-kv-cache-manager", choices=("on", "off"),
                   help="per-kind KV groups for local layers (default: vLLM's; off for "
                        "chunked attention)")
    for flag, what in (("--mamba-cache-dtype", "recurrent states (conv and ssm)"),
                       ("--mamba-ssm-cache-dtype", "the ssm part of recurrent states")):
        g.add_argument(flag, choices=tuple(STATE_DTYPES),
                       help=f"dtype of {what} (default auto: vLLM's, the model's bf16; "
                            f"Nemotron-H's ssm state float32)")
    gib = real(MAX_HEADROOM_GIB, 0.0, closed_low=True)
    g.add_argument("--non-torch-gib", type=gib,
                   help="non-torch memory vLLM measures at start-up, GiB (default: one "
                        "logged on the same GPU and tensor-parallel size, else 0)")
    eager = g.add_mutually_exclusive_group()
    eager.add_argument("--cudagraph-gib", type=gib,
                   help="CUDA-graph memory vLLM estimates at start-up, GiB (default: the "
                        "ledger's model of vLLM's estimate; 0 for vLLM before 0.21 or "
                        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)")
    eager.add_argument("--enforce-eager", action="store_true",
                   help="vLLM's --enforce-eager: no CUDA graphs, no estimate subtracted")
    _add_system_flags(s)
    s.add_argument("--gpus-per-node", type=count(MAX_GPUS_PER_NODE),
                   help="GPUs per node (default 8, or the --system file's)")
    s.add_argument("--gpus-per-domain", type=count(MAX_GPUS_PER_DOMAIN),
                   help="GPUs per NVLink (scale-up) domain, whole nodes (default: the "
                        "--gpu preset's, 72 for gb200 / gb300, else one node)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")


def _small_parsers(sub) -> None:
    lay = sub.add_parser("layout", help="rank <-> coordinates and which groups cross nodes")
    for axis in ("tp", "cp", "ep", "dp", "pp"):
        lay.add_argument(f"--{axis}", type=GPUS, default=1, help=f"{axis} size, GPUs")
    lay.add_argument("--etp", "--expert-tensor-parallel-size", type=GPUS,
                     help="expert tensor parallel size (default: --tp)")
    lay.add_argument("--order", default="tp-cp-ep-dp-pp",
                     help="axis order, fastest first (default tp-cp-ep-dp-pp)")
    lay.add_argument("--gpus-per-node", type=count(MAX_GPUS_PER_NODE),
                     help="GPUs per node (host; default 8, or the --gpu preset's)")
    lay.add_argument("--gpus-per-domain", type=count(MAX_GPUS_PER_DOMAIN),
                     help="GPUs per NVLink domain (default: one node, or the --gpu "
                          "preset's: 72 for gb200 / gb300)")
    lay.add_argument("--gpu", help="a GPU preset whose system gives the node and NVLink "
                                   "domain sizes (see 'gpus')")
    lay.add_argument("--system", metavar="FILE",
                     help="a system file whose node and NVLink domain sizes apply "
                          "(docs/systems.md)")
    lay.add_argument("--json", action="store_true", help="print JSON instead of text")
    time = real(MAX_TIME, MIN_TIME, closed_low=True)
    s = sub.add_parser("schedule", help="simulate a pipeline schedule and draw it")
    s.add_argument("kind", nargs="?", choices=SCHEDULES, help="the schedule (or --schedule)")
    s.add_argument("--schedule", choices=SCHEDULES, help="the schedule, as every command "
                                                         "names it")
    s.add_argument("--pp", type=GPUS, required=True, help="pipeline ranks")
    s.add_argument("--microbatches", type=count(MAX_MICROBATCHES), required=True,
                   help="micro-batches per step")
    s.add_argument("--vp", type=count(MAX_VP), help="stages per rank (interleaved; zb-v and dualpipe(v) are 2)")
    s.add_argument("--tf", type=time, default=1.0,
                   help="forward time per stage, any unit (default 1)")
    s.add_argument("--tb", type=time, help="full backward time per stage (default 2)")
    s.add_argument("--tB", dest="t_in", type=time,
                   help="input-gradient time of a split backward (default tb/2)")
    s.add_argument("--tW", dest="t_w", type=time,
                   help="weight-gradient time of a split backward (default tb - tB)")
    s.add_argument("--p2p", type=real(MAX_TIME, 0.0, closed_low=True), default=0.0,
                   help="latency of a cross-rank hop, same unit (default 0)")
    s.add_argument("--svg", metavar="FILE", help="also write the time line as an SVG file")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the text time line (default auto: on a terminal)")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="train-ledger", description="Parallel training as state placement.")
    p.add_argument("--version", action="version", version=f"train-ledger {__version__}")
    sub = p.add_subparsers(dest="cmd", parser_class=OneLineParser)
    sub.add_parser("seed", help="the seed's six placements (the default)")
    m = sub.add_parser("models", help="presets with exact parameter counts")
    m.add_argument("--json", action="store_true", help="print JSON instead of text")
    g = sub.add_parser("gpus", help="GPU presets with their figures")
    g.add_argument("--json", action="store_true", help="print JSON instead of text")
    w = sub.add_parser("whole-runs", help="published whole runs (GPU-hours, failures, "
                                          "checkpoints) against the run model")
    w.add_argument("--json", action="store_true", help="print JSON instead of text")
    sub.add_parser("toys", help="each mechanism on real torch.distributed (torch extra)",
                   add_help=False)
    sub.add_parser("verify", help="PyTorch's FSDP2 / DTensor TP / pipelining vs the ledger",
                   add_help=False)
    _report_parsers(sub)
    _plan_parser(sub)
    _serve_parser(sub)
    _small_parsers(sub)
    return p
