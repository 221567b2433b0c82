"""The placement flag group: parallel sizes and layout, micro-batches, precision and FP8/FP4
recipes, schedule, ZeRO (Megatron spellings accepted), and ``--framework``.
``ledger.cli.args`` adds it to report and estimate.
"""
from __future__ import annotations

import argparse

from ledger.config import RECOMPUTE
from ledger.frameworks import RECIPES
from ledger.io import (MAX_CAPACITY_FACTOR, MAX_GLOBAL_BATCH, MAX_GPUS, MAX_GPUS_PER_DOMAIN,
                       MAX_GPUS_PER_NODE, MAX_LAYERS, MAX_MICRO_BATCH, MAX_MICROBATCHES,
                       MAX_VP, count, natural, real)
from ledger.memory import OPTIMIZERS, PRECISIONS
from ledger.cli.step_flags import _add_overlap_flags, _add_step_flags
from ledger.pipeline import KINDS as SCHEDULES


GPUS = count(MAX_GPUS)
FP8_RECIPES = tuple(dict.fromkeys(n for family in RECIPES.values() for n, r in family.items()
                                   if r.gemm_format == "fp8"))
FP4_RECIPES = tuple(dict.fromkeys(n for family in RECIPES.values() for n, r in family.items()
                                  if r.gemm_format == "fp4"))


def _layer_ends(text: str) -> tuple[int, int]:
    """argparse type: "FIRST,LAST", two layer counts (--bf16-layers 1,14)."""
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) \
            or max(int(p) for p in parts) > MAX_LAYERS:
        raise argparse.ArgumentTypeError(f"FIRST,LAST: two layer counts in 0..{MAX_LAYERS}, "
                                         f"got {text!r}")
    return int(parts[0]), int(parts[1])


def _add_parallel_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("placement (Megatron spellings accepted)")
    g.add_argument("--tp", "--tensor-model-parallel-size", type=GPUS, default=1,
                   help="tensor-parallel GPUs (default 1)")
    g.add_argument("--pp", "--pipeline-model-parallel-size", type=GPUS, default=1,
                   help="pipeline stages (default 1)")
    g.add_argument("--dp", "--data-parallel-size", type=GPUS,
                   help="data-parallel replicas (default: what --gpus leaves after "
                        "tp*cp*pp, else 1)")
    g.add_argument("--cp", "--context-parallel-size", type=GPUS, default=1,
                   help="context-parallel GPUs (default 1)")
    g.add_argument("--ep", "--expert-model-parallel-size", type=GPUS, default=1,
                   help="expert-parallel GPUs, inside tp*cp*dp/etp (default 1)")
    g.add_argument("--etp", "--expert-tensor-parallel-size", type=GPUS,
                   help="expert tensor-parallel GPUs (default: --tp, as Megatron-LM)")
    g.add_argument("--moe-token-dispatcher-type", dest="moe_dispatcher",
                   choices=("alltoall", "allgather", "flex"),
                   help="MoE token dispatcher (default: the framework's; megatron alltoall)")
    g.add_argument("--moe-imbalance", type=real(MAX_CAPACITY_FACTOR, 1.0, closed_low=True),
                   default=1.0, help="busiest EP rank's routed rows / the mean (default "
                                     "1.0: even routing)")
    g.add_argument("--zero", type=natural(3), default=0, help="ZeRO stage 0..3 (3 = FSDP)")
    g.add_argument("--use-distributed-optimizer", action="store_true",
                   help="Megatron's distributed optimizer: ZeRO-1")
    r = g.add_mutually_exclusive_group()
    r.add_argument("--no-reshard", action="store_true",
                   help="ZeRO-3 keeps params gathered between forward and backward")
    r.add_argument("--reshard", action="store_true",
                   help="ZeRO-3 reshards params after forward even under PP (default: "
                        "the framework's; torchtitan keeps them gathered when pp > 1)")
    g.add_argument("--hsdp-shard", type=GPUS, help="HSDP shard group size, GPUs")
    g.add_argument("--num-distributed-optimizer-instances", type=GPUS,
                   help="Megatron's distributed optimizer sharded within dp x cp / N ranks "
                        "and replicated N times (default 1)")
    g.add_argument("--no-sp", action="store_true", help="TP without sequence parallelism")
    g.add_argument("--cp-kind", choices=("ring", "ulysses"), default="ring",
                   help="context parallelism kind (default ring)")
    g.add_argument("--micro-batch", "--micro-batch-size", type=count(MAX_MICRO_BATCH),
                   default=1, help="sequences per micro-batch (default 1)")
    g.add_argument("--microbatches", type=count(MAX_MICROBATCHES),
                   help="micro-batches per step per pipeline (default 1)")
    g.add_argument("--global-batch", "--global-batch-size", type=count(MAX_GLOBAL_BATCH),
                   help="sequences per step; sets microbatches = B / (dp * micro_batch)")
    g.add_argument("--vp", type=count(MAX_VP),
                   help="virtual stages per PP rank (default 1; 2 for zb-v, dualpipe, dualpipev)")
    g.add_argument("--wgrad-deferral", type=natural(1 << 20), metavar="N",
                   help="Megatron --defer-embedding-wgrad-compute with "
                        "--wgrad-deferral-limit N: the output layer's first N calls (0: all) "
                        "keep their input and logits' gradient to the pipeline flush "
                        "(default off)")
    g.add_argument("--vp-group", type=count(MAX_MICROBATCHES), metavar="N",
                   help="micro-batches per round of the interleaved schedule's chunks "
                        "(Megatron --microbatch-group-size-per-virtual-pipeline-stage; "
                        "default pp)")
    g.add_argument("--schedule", choices=SCHEDULES,
                   help="pipeline schedule (default 1f1b, interleaved when --vp > 1)")
    g.add_argument("--capacity-factor", type=real(MAX_CAPACITY_FACTOR), default=1.0,
                   help="MoE routed payload as a multiple of the even share (default 1.0)")
    g.add_argument("--moe-pad-expert-input-to-capacity", dest="pad_to_capacity",
                   action="store_true",
                   help="every expert's input padded to its capacity (Megatron's flag; "
                        "token-drop runs): static shapes, the host never waits for the "
                        "token counts")
    g.add_argument("--gpus", type=GPUS, help="world size to check the placement against")
    g.add_argument("--gpus-per-node", type=count(MAX_GPUS_PER_NODE),
                   help="GPUs per node (default 8, or the --system file's)")
    g.add_argument("--gpus-per-domain", type=count(MAX_GPUS_PER_DOMAIN),
                   help="GPUs per NVLink (scale-up) domain, whole nodes (default: the "
                        "--gpu preset's, 72 for gb200 / gb300, else one node)")
    g.add_argument("--precision", choices=(*PRECISIONS, "fp8", "fp4"),
                   help="bytes per state as this table says (default: the framework's); "
                        "fp8 / fp4: the framework's state, its linear layers' GEMMs in FP8 "
                        "/ FP4")
    g.add_argument("--fp8-recipe", choices=FP8_RECIPES,
                   help="with --precision fp8: Megatron-LM's --fp8-recipe (delayed, the "
                        "default; tensorwise; blockwise; mxfp8), torchao's (tensorwise, the "
                        "default; rowwise; mxfp8: the MX converter), or deepseek-v3 (its "
                        "report, sec. 3.3)")
    g.add_argument("--fp8-param-gather", action="store_true",
                   help="with --precision fp8: GEMM weights kept in FP8 and all-gathered in "
                        "FP8 (Megatron --fp8-param-gather, torchao "
                        "enable_fsdp_float8_all_gather)")
    g.add_argument("--fp4-recipe", choices=FP4_RECIPES,
                   help="with --precision fp4: Megatron-LM's --fp4-recipe (nvfp4, the default)")
    g.add_argument("--fp4-param-gather", action="store_true",
                   help="with --precision fp4: GEMM weights kept in NVFP4 and all-gathered "
                        "packed (Megatron --fp4-param-gather)")
    g.add_argument("--bf16-layers", type=_layer_ends, metavar="FIRST,LAST",
                   help="with --precision fp8 / fp4: the first FIRST and last LAST layers "
                        "kept in BF16 (Megatron --first-last-layers-bf16 with "
                        "--num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16)")
    g.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adam",
                   help="optimizer (default adam): adam(w), sgd(-momentum), lion, "
                        "bitsandbytes' block-wise adam8bit / paged-adam8bit / lion8bit, "
                        "adafactor (factored), muon (Megatron's: one momentum per matrix, "
                        "Adam for the rest; Newton-Schulz by one owner per matrix under "
                        "--zero 1), muon-moonlight (Moonlight / Kimi K2's Distributed "
                        "Muon); master weights off: --precision bf16-pure")
    g.add_argument("--recompute", choices=RECOMPUTE, default="none",
                   help="activation recompute (Megatron's --recompute-granularity)")
    g.add_argument("--no-flash", action="store_true", help="materialised attention scores")
    g.add_argument("--grad-accumulation", choices=("sharded", "unsharded"),
                   help="ZeRO-2/3: reduce-scatter every micro-batch (sharded) or accumulate "
                        "the full gradient and reduce once (unsharded); default: the "
                        "framework's")
    _add_overlap_flags(g)
    g.add_argument("--overlap-p2p-comm", dest="overlap_p2p",
                   action=argparse.BooleanOptionalAction, default=None,
                   help="overlap the pipeline's sends and receives with the next chunk "
                        "(Megatron's overlap_p2p_comm; default: the framework's, megatron "
                        "on with the interleaved schedule)")
    g.add_argument("--pipeline-model-parallel-layout", dest="pipeline_layout", metavar="LAYOUT",
                   help="Megatron's stage layout, e.g. 'Et|(tt|)*30mL' (E embedding, t layer, "
                        "m MTP layer, L loss; stage i on rank i %% pp); sets vp")
    g.add_argument("--decoder-first-pipeline-num-layers", dest="decoder_first",
                   type=natural(MAX_LAYERS), help="layers on the first PP rank (Megatron)")
    g.add_argument("--decoder-last-pipeline-num-layers", dest="decoder_last",
                   type=natural(MAX_LAYERS), help="layers on the last PP rank (Megatron)")
    _add_framework_flag(g)
    _add_step_flags(p)


def _add_framework_flag(g) -> None:
    from ledger.frameworks import DEFAULT, FRAMEWORKS

    g.add_argument("--framework", choices=tuple(FRAMEWORKS), default=DEFAULT,
                   help="whose conventions: bytes per state, when collectives run, what "
                        f"layers save (default {DEFAULT}; 'ideal' is the seed's accounting)")
