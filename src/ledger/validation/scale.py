"""Published runs at scale, 384 to 3,360 A100s, all prediction rows: the schedules, the
overlap and the collectives of their own time and code.

- Narayanan et al. 2021 (arXiv:2104.04473) Table 2: GPT-3 175B and 530B under ZeRO-3
  (DeepSpeed, no model parallelism) and PTD-P (Megatron, TP 8 x PP 12 or 35), TFLOP/s per
  GPU by their eq. 3, batch 1536 / 2240 (2560 on the starred 640-GPU row), micro-batch
  as printed. Megatron of that time reduced its gradients after the whole backward (local
  DDP, megatron/model/distributed.py L188-195 and training.py L390-403 at f2c35bb0,
  2021-10-01: the megatron convention's --overlap-grad-reduce off) and kept them in fp16
  with --fp16 unless --accumulate-allreduce-grads-in-fp32 was given (arguments.py L593,
  L150-158 at f2c35bb0): precision fp16. DeepSpeed's stage 3 overlapped its
  communication by default (zero/constants.py L59-60 at 11e94e6c, 2021-05). Not printed:
  interleaving (Table 1's rows are held without it, so are these), and the ZeRO-3
  rows' recompute (THE RULE).
- BLOOM-176B (arXiv:2211.05100), its launch bigscience-workshop/bigscience ed196cd2
  train/tr11-176B-ml/tr11-176B-ml.slurm: 384 A100 80 GB, TP 4, PP 12, DP 8, micro-batch
  2, batch 2048, 70 layers, h 14336, 112 heads, vocab 250,880, ALiBi, tied, full
  recompute, bf16 with DeepSpeed's BF16 optimizer (ZeRO-1 over DP, fp32 gradient buffers:
  deepspeed/runtime/bf16_optimizer.py L100, L176-186), its pipeline engine (1F1B, the
  gradients reduced after the last micro-batch), embedding and head counted as layers of
  the split (type:transformer|embedding: the two ends one layer fewer); measured 104.70 s
  per iteration at iteration 85,376 (the repository's README.md L661-663, HEAD 9e64edec).
- Megatron-Turing NLG 530B (arXiv:2201.11990 sec. 2.4, as two secondary sources quote
  it: cli99/llm-analysis d841e40a examples/megatron-turing-nlg/README.md and a dataset
  script citing "PDF p7, s2.4"): 105 layers, h 20480, 128 heads, seq 2048, TP 8, PP 35,
  DP 8 / 10 / 12 on 280 / 350 / 420 DGX A100 80 GB, batch 1920, iteration 60.1 / 50.2 /
  44.4 s; DeepSpeed's pipeline engine with Megatron's TP. Full recompute, as the
  paper's own figures read: its 126 / 121 / 113 TFLOP/s per GPU are Narayanan et al.'s
  eq. 3 over those iteration times (125.7 / 120.4 / 113.5 at V = 51,200), a count with
  the recompute forward in it (eq. 3's 96 = 4 passes x 24; without recompute the same
  times would be 94 / 90 / 85 by its 72), and llm-analysis's replay of the paper
  (examples/megatron-turing-nlg/run_train.sh, --activation_recomputation 2) runs it so.
  Not found: the micro-batch and the ZeRO stage (the pipeline engine runs 0 or 1: THE
  RULE).

The A100 presets stand for Selene's DGX A100 nodes (8 GPUs, NVLink 3, one 200 Gb/s HDR
NIC per GPU; Narayanan et al. sec. 5).
"""
from __future__ import annotations

from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.validation.run import Run, gpt

GPT = {"175B": (96, 12288, 96), "530B": (105, 20480, 128)}
_2021 = dict(sequence_parallel=False, recompute="full", flash_attention=False)


def _table2() -> list[Run]:
    """Narayanan et al. 2021 Table 2 (scheme, model, batch, GPUs, micro-batch, TFLOP/s)."""
    rows = [("ZeRO-3", "175B", 1536, 384, 4, 144), ("ZeRO-3", "175B", 1536, 768, 2, 88),
            ("ZeRO-3", "175B", 1536, 1536, 1, 44), ("ZeRO-3", "530B", 2560, 640, 4, 138),
            ("ZeRO-3", "530B", 2240, 1120, 2, 98), ("ZeRO-3", "530B", 2240, 2240, 1, 48),
            ("PTD-P", "175B", 1536, 384, 1, 153), ("PTD-P", "175B", 1536, 768, 1, 149),
            ("PTD-P", "175B", 1536, 1536, 1, 141), ("PTD-P", "530B", 2240, 560, 1, 171),
            ("PTD-P", "530B", 2240, 1120, 1, 167), ("PTD-P", "530B", 2240, 2240, 1, 159)]
    out = []
    for scheme, name, batch, gpus, mb, tflops in rows:
        model = gpt(f"gpt-{name}", *GPT[name])
        if scheme == "ZeRO-3":
            cfg = ParallelConfig(dp=gpus, zero_stage=3, micro_batch=mb,
                                 num_microbatches=batch // (gpus * mb), framework="deepspeed",
                                 **_2021)
            unknown = ("recompute",)
        else:
            tp, pp = 8, (12 if name == "175B" else 35)
            dp = gpus // (tp * pp)
            cfg = ParallelConfig(tp=tp, pp=pp, dp=dp, micro_batch=mb,
                                 num_microbatches=batch // (dp * mb), precision="fp16", **_2021)
            unknown = ()
        out.append(Run("Narayanan 2021 T2", f"{scheme} {name} on {gpus}", model, cfg,
                       "a100-80gb", "narayanan_tflops_per_gpu", tflops, open=unknown,
                       global_batch=batch))
    return out


def bloom_176b() -> ModelSpec:
    return ModelSpec(name="bloom-176b", layers=70, hidden=14336, heads=112, vocab=250880,
                     seq_len=2048, ffn_hidden=4 * 14336, gated_mlp=False, tied_embeddings=True,
                     qkv_bias=True, out_bias=True, mlp_bias=True, norm="layernorm")


def _bloom() -> list[Run]:
    cfg = ParallelConfig(tp=4, pp=12, dp=8, zero_stage=1, micro_batch=2, num_microbatches=128,
                         framework="deepspeed", precision="bf16-fp32grad", **_2021)
    return [Run("BLOOM 2022", "176B on 384", bloom_176b(), cfg, "a100-80gb", "step_time_s",
                104.70)]


def _mt_nlg() -> list[Run]:
    model = gpt("mt-nlg-530b", *GPT["530B"])
    out = []
    for dp, seconds in ((8, 60.1), (10, 50.2), (12, 44.4)):
        cfg = ParallelConfig(tp=8, pp=35, dp=dp, num_microbatches=1920 // dp,
                             framework="deepspeed", **_2021)
        out.append(Run("MT-NLG 2022", f"530B on {280 * dp}", model, cfg, "a100-80gb",
                       "step_time_s", seconds, open=("micro_batch", "zero_stage"),
                       global_batch=1920))
    return out


def at_scale() -> list[Run]:
    return _table2() + _bloom() + _mt_nlg()
