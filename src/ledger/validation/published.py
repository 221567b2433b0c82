"""Published training runs the time model is held against, split into a declared
calibration set (the only rows constants are fitted on) and prediction rows.

Calibration, two declared sets fitted in sequence by one script (benchmarks/fit.py):
1. Korthikanti et al. 2022, Table 4 (A100 80 GB, Selene): iteration time in seconds,
   full recompute and SP + selective recompute; every setting is published. Fits
   ``gemm_half_balance`` and ``elementwise_traffic`` (``fit``).
2. Megatron-LM's H100 weak-scaling table (below): fits the H100's sustained bf16 GEMM
   share, ``system.GPUS["h100-sxm"].gemm_efficiency``, given set 1's constants
   (``fit_gemm_share``) - no published measurement of it was found to cite. H800 and
   H200 share the H100's GH100 die and clocks (989 TFLOP/s dense) and take the same
   figure. These rows are calibration rows, not predictions.
Predictions:
- Narayanan et al. 2021, Table 1 (A100 80 GB): TFLOP/s per GPU by their eq. 3; fp16
  gradients reduced after the backward, as the Megatron of that time ran
  (ledger.validation.scale).
- ledger.validation.scale: Narayanan et al. 2021 Table 2 (ZeRO-3 against PTD-P), BLOOM,
  Megatron-Turing NLG.
- DeepSeek-V3 (DualPipe on 2,048 H800).
- Dubey et al. 2024, Llama 3, Table 4 (H100 SXM): TFLOP/s per GPU.
Calibration set 2:
- Megatron-LM's H100 weak-scaling table (README, images/model_table.png, added in
  commit f2e5db402c, 2024-07-15): TFLOP/s per GPU counted by that commit's
  megatron/training/training.py:73 num_floating_point_operations (all s keys); vocab
  131,072, seq 4,096; --tp-comm-overlap, --overlap-grad-reduce, --overlap-param-gather.
- torchtitan docs/performance.md at 041336434916bdc0f88c1f89fda176fd3c2092e4: FSDP2 (1D)
  on 64 A100 80 GB, tokens/s/GPU (their WPS); Llama 3 at seq 8192, Llama 2 at 4096.

THE RULE for what a publication leaves open (micro-batch, interleaving depth, recompute,
TP overlap): the run takes the value this model prices fastest among the values listed
in its ``open`` field that fit in memory - the teams tuned these runs for throughput.
It is applied to every row alike, never chosen per row, and never looks at the measured
figure. Mapping stated once: torchtitan's "selective layer" and "selective op" AC are
priced as the ledger's ``selective``, its "full" as ``full``; its FSDP2 as ZeRO-3 with
parameters resharded after forward.
"""
from __future__ import annotations

from dataclasses import fields, replace
from functools import lru_cache
from itertools import product

from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.model import (ModelSpec, deepseek_v3, llama2_13b, llama2_70b, llama3_8b, llama3_70b,
                          llama3_405b)
from ledger.pipeline import check as check_schedule
from ledger.validation.run import MICRO_BATCHES, RECOMPUTES, Run, gpt
from ledger.validation.scale import at_scale

def _korthikanti() -> list[Run]:
    rows = [("22B", 48, 6144, 64, 8, 1, 4, 4, 1, 1.42, 1.10),
            ("175B", 96, 12288, 96, 8, 8, 64, 1, 3, 18.13, 13.75),
            ("530B", 105, 20480, 128, 8, 35, 280, 1, 3, 49.05, 37.83),
            ("1T", 128, 25600, 160, 8, 64, 512, 1, 1, 94.42, 71.49)]
    out = []
    for name, l, h, a, tp, pp, batch, mb, vp, t_full, t_sel in rows:
        model = gpt(f"gpt-{name}", l, h, a)
        # Megatron of 2022 sent the pipeline's tensors blocking: overlap_p2p_comm came with
        # NVIDIA/Megatron-LM f9283c5a8a (2023-05-31, "Add option to overlap p2p communication")
        base = dict(tp=tp, pp=pp, dp=1, micro_batch=mb, num_microbatches=batch // mb, vp=vp,
                    flash_attention=False, overlap_p2p=False)
        for label, sp, rc, t in (("full recompute", False, "full", t_full),
                                 ("SP + selective", True, "selective", t_sel)):
            out.append(Run("Korthikanti 2022", f"{name} {label}", model,
                           ParallelConfig(**base, sequence_parallel=sp, recompute=rc),
                           "a100-80gb", "step_time_s", t, role="calibration"))
    return out


def _narayanan() -> list[Run]:
    rows = [("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137), ("3.6B", 30, 3072, 32, 2, 1, 64, 512, 138),
            ("7.5B", 36, 4096, 32, 4, 1, 128, 512, 142), ("18B", 40, 6144, 48, 8, 1, 256, 1024, 135),
            ("39B", 48, 8192, 64, 8, 2, 512, 1536, 138), ("76B", 60, 10240, 80, 8, 4, 1024, 1792, 140),
            ("145B", 80, 12288, 96, 8, 8, 1536, 2304, 148),
            ("310B", 96, 16384, 128, 8, 16, 1920, 2160, 155),
            ("530B", 105, 20480, 128, 8, 35, 2520, 2520, 163),
            ("1T", 128, 25600, 160, 8, 64, 3072, 3072, 163)]
    out = []
    for name, l, h, a, tp, pp, gpus, batch, tflops in rows:
        dp = gpus // (tp * pp)
        cfg = ParallelConfig(tp=tp, pp=pp, dp=dp, num_microbatches=batch // dp,
                             sequence_parallel=False, recompute="full", flash_attention=False,
                             precision="fp16")
        out.append(Run("Narayanan 2021", f"{name} on {gpus}", gpt(f"gpt-{name}", l, h, a), cfg,
                       "a100-80gb", "narayanan_tflops_per_gpu", tflops,
                       open=("micro_batch",), global_batch=batch))
    return out


def _llama3() -> list[Run]:
    """Settings from Llama 3 sec. 3.3.2: FSDP over dp x cp sharding optimizer states and
    gradients, parameters not resharded after forward - ZeRO-2, its gradients reduce-
    scattered after every micro-batch (fp32 accumulation and fp32 reduce-scatter, as the
    megatron convention's fp32 grads); 8K pre-training without activation checkpointing
    (recompute none; the 128K row's recompute is not published: THE RULE); interleaved
    1F1B (depth not published: THE RULE) with one layer removed from the first and the
    last stage, so 126 layers + embedding + output fill 128 chunk slots; 16M-token
    batches (Table 4's batch size per DP: 32, 16, 16 sequences); no dropout (Llama 3's
    model, meta-llama/llama-models, has none)."""
    m405 = llama3_405b()
    rows = [("8K GPUs, 8K seq", m405, 8, 1, 16, 64, 430.0, "none"),
            ("16K GPUs, 8K seq", m405, 8, 1, 16, 128, 400.0, "none"),
            ("16K GPUs, 128K seq", m405.with_seq(131072), 8, 16, 16, 8, 380.0, None)]
    out = []
    for label, model, tp, cp, pp, dp, tflops, rc in rows:
        seqs = 16 * 2**20 // model.seq_len
        cfg = ParallelConfig(tp=tp, cp=cp, pp=pp, dp=dp, zero_stage=2, recompute=rc or "none",
                             num_microbatches=seqs // dp, dropout=0.0)
        settings = ("micro_batch", "vp", "tp_overlap") + (() if rc else ("recompute",))
        out.append(Run("Llama 3 2024", label, model, cfg, "h100-sxm", "tflops_per_gpu", tflops,
                       open=settings, global_batch=seqs, chunk_slots=model.layers + 2))
    return out


def _megatron_h100() -> list[Run]:
    """name, heads, hidden, layers, tp, pp, dp, batch, TFLOP/s per GPU (model_table.png)."""
    rows = [("1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8),
            ("7.1B", 32, 4096, 30, 2, 1, 48, 192, 465.9),
            ("16B", 48, 6144, 32, 4, 1, 48, 192, 489.1),
            ("32B", 56, 7168, 48, 8, 1, 48, 192, 459.6),
            ("70B", 64, 8192, 84, 8, 2, 48, 384, 419.7),
            ("119B", 80, 10240, 92, 8, 4, 48, 768, 420.5),
            ("177B", 96, 12288, 96, 8, 6, 48, 1152, 432.8),
            ("314B", 128, 16384, 96, 8, 8, 48, 1536, 474.4),
            ("462B", 144, 18432, 112, 8, 16, 48, 3072, 459.9)]
    out = []
    for name, a, h, l, tp, pp, dp, batch, tflops in rows:
        model = gpt(f"megatron-{name}", l, h, a, vocab=131072, seq=4096, tied=False)
        cfg = ParallelConfig(tp=tp, pp=pp, dp=dp, zero_stage=1, sequence_parallel=True,
                             num_microbatches=batch // dp, overlap_grad_reduce=True,
                             overlap_param_gather=True)
        out.append(Run("Megatron-LM H100", f"{name} on {tp * pp * dp}", model, cfg, "h100-sxm",
                       "megatron_tflops_per_gpu", tflops, role="calibration", tp_overlap=True,
                       open=("micro_batch", "vp", "recompute"), global_batch=batch))
    return out


def _torchtitan() -> list[Run]:
    """Local batch, AC mode, WPS (tokens/s/GPU) from docs/performance.md's two tables."""
    ac = {"no": "none", "selective layer": "selective", "selective op": "selective",
          "full": "full"}
    rows = [(llama3_8b(), 1, "selective layer", 2904), (llama3_8b(), 1, "selective op", 2973),
            (llama3_70b(), 1, "full", 331),
            (llama2_13b(), 2, "no", 2162), (llama2_13b(), 2, "selective layer", 1914),
            (llama2_13b(), 2, "selective op", 1904),
            (llama2_70b(), 1, "selective op", 355), (llama2_70b(), 2, "full", 353)]
    extra = {"framework": "torchtitan"} if "framework" in _cfg_fields() else {}
    out = []
    for model, mb, mode, wps in rows:
        cfg = ParallelConfig(dp=64, zero_stage=3, micro_batch=mb, recompute=ac[mode], **extra)
        out.append(Run("torchtitan FSDP2", f"{model.name} b{mb} {mode}", model, cfg,
                       "a100-80gb", "tokens_per_s_per_gpu", wps))
    return out


def _deepseek_v3() -> list[Run]:
    """DeepSeek-V3 technical report (arXiv:2412.19437): 2048 H800 (sec. 3.1), PP 16,
    EP 64 over 8 nodes, ZeRO-1 DP, no TP (sec. 3.2), 15,360 sequences of 4,096 tokens
    (sec. 4.2), its own FP8 recipe (sec. 3.3), DeepEP-style node-limited dispatch (at
    most 4 nodes per token, sec. 2.1.2 / 3.2.2); 180K H800 GPU-hours per trillion tokens
    (sec. 1, Table 1): 1e12 / (180,000 x 3,600 s) = 1,543.2 tokens/s/GPU. DualPipe on its
    16 PP ranks (sec. 3.2.1), each forward-backward pair's all-to-alls hidden under the
    other pass (the deepseek framework's default there). Its layer assignment is not
    published: the framework's rule. The micro-batch is not published: THE RULE. No
    dropout (DeepSeek-V3's model has none). RMSNorm and MLA's up-projections recomputed in
    the backward (sec. 3.2.3), as ledger.validation.memory's outcome row of the same run
    prices them: without it the ledger would judge the run out of memory."""
    cfg = ParallelConfig(pp=16, vp=2, dp=128, ep=64, zero_stage=1, num_microbatches=120,
                         moe_dispatcher="flex", precision="fp8-deepseek-v3",
                         framework="deepseek", schedule="dualpipe", dropout=0.0,
                         recompute="selective", recompute_modules=("layernorm", "mla_up_proj"))
    return [Run("DeepSeek-V3 2024", "671B on 2048 H800", deepseek_v3().with_seq(4096), cfg,
                "h800", "tokens_per_s_per_gpu", 1e12 / (180e3 * 3600), open=("micro_batch",),
                global_batch=15360)]


def _cfg_fields() -> set[str]:
    return {f.name for f in fields(ParallelConfig)}


def narayanan_flops(model: ModelSpec, sequences: int) -> float:
    """Narayanan et al. 2021 eq. 3, the FLOPs their TFLOP/s counts (full recompute, all s
    keys): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))."""
    b, s, l, h, v = sequences, model.seq_len, model.layers, model.hidden, model.vocab
    return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def predicted(run: Run, est, cfg: ParallelConfig | None = None) -> float:
    """The run's metric from an estimate, in the run's own definition."""
    from ledger.arch import model_flops_per_token

    cfg = cfg or run.cfg
    seqs = cfg.dp * cfg.num_microbatches * cfg.micro_batch
    if run.metric == "narayanan_tflops_per_gpu":
        return narayanan_flops(run.model, seqs) / cfg.world / est.step_time_s / 1e12
    if run.metric == "megatron_tflops_per_gpu":
        flops = model_flops_per_token(run.model, causal=False) * seqs * run.model.seq_len
        return flops / cfg.world / est.step_time_s / 1e12
    return getattr(est, run.metric)


PIPELINE_ZERO = (0, 1)


def candidates(run: Run):
    """(cfg, tp_overlap) for every combination of the run's open settings."""
    cfg, m = run.cfg, run.model
    mbs = [b for b in MICRO_BATCHES if run.global_batch % (cfg.dp * b) == 0] \
        if "micro_batch" in run.open else [cfg.micro_batch]
    slots = run.chunk_slots or m.layers
    vps = range(1, slots // cfg.pp + 1) if "vp" in run.open and cfg.pp > 1 \
        else [cfg.vp]
    rcs = RECOMPUTES if "recompute" in run.open else [cfg.recompute]
    ovs = (False, True) if "tp_overlap" in run.open else (run.tp_overlap,)
    # DeepSpeed's pipeline engine shards no more than ZeRO-1 (SOURCES["deepspeed"])
    zeros = PIPELINE_ZERO if "zero_stage" in run.open else (cfg.zero_stage,)
    derived = cfg.schedule in ("1f1b", "interleaved")  # else the run names its schedule
    for mb, vp, rc, ov, zero in product(mbs, vps, rcs, ovs, zeros):
        n = run.global_batch // (cfg.dp * mb) if "micro_batch" in run.open \
            else cfg.num_microbatches
        if derived and vp > 1 and (n % cfg.pp or slots % (cfg.pp * vp)):
            continue  # interleaving needs m % pp == 0 and even virtual stages
        if not derived and check_schedule_problem(cfg.schedule, cfg.pp, n, vp):
            continue
        yield replace(cfg, micro_batch=mb, num_microbatches=n, vp=vp, recompute=rc,
                      zero_stage=zero, schedule=None if derived else cfg.schedule), ov


def check_schedule_problem(schedule: str, pp: int, m: int, vp: int) -> bool:
    """True when the named schedule cannot run m micro-batches on pp x vp."""
    try:
        check_schedule(schedule, pp, m, vp)
    except LedgerError:
        return True
    return False


def run_system(run: Run, gemm_share: float | None = None):
    """The run's system preset, its GPU's sustained GEMM share replaced if one is given."""
    from ledger.system import system

    sysm = system(run.gpu)
    if gemm_share is None:
        return sysm
    return replace(sysm, gpu=replace(sysm.gpu, gemm_efficiency=gemm_share))


@lru_cache(maxsize=None)
def settle(run: Run, cal=None, gemm_share: float | None = None):
    """THE RULE: the fastest fitting candidate by this model -> (cfg, tp_overlap, est)."""
    from ledger.step import DEFAULT, estimate

    cal, best, fallback = cal or DEFAULT, None, None
    sysm = run_system(run, gemm_share)
    for cfg, ov in candidates(run):
        est = estimate(run.model, cfg, sysm, cal, tp_overlap=ov)
        if fallback is None or est.memory_per_gpu_bytes < fallback[2].memory_per_gpu_bytes:
            fallback = (cfg, ov, est)
        if est.fits and (best is None or est.step_time_s < best[2].step_time_s):
            best = (cfg, ov, est)
    return best or fallback  # nothing fits: the leanest (its row says so)


def runs() -> list[Run]:
    return _korthikanti() + _narayanan() + _llama3() + _megatron_h100() + _torchtitan() \
        + _deepseek_v3() + at_scale()


def calibration_set() -> list[Run]:
    return [r for r in runs() if r.role == "calibration"]


FIT_SOURCE = "Korthikanti 2022"  # set 1: gemm_half_balance, elementwise_traffic
SHARE_SOURCE = "Megatron-LM H100"  # set 2: the H100's sustained GEMM share
SHARE_GRID = tuple(round(0.50 + 0.02 * i, 2) for i in range(16))  # 0.50 ... 0.80


def fit_gemm_share(grid=SHARE_GRID, cal=None) -> list[tuple[float, float, float]]:
    """Every (mean |error|, max |error|, H100 GEMM share) on calibration set 2, best
    first, with set 1's constants (``cal``, default the shipped ones); each grid point
    re-runs THE RULE for the rows' open settings."""
    rows = [r for r in calibration_set() if r.source == SHARE_SOURCE]
    scores = []
    for share in grid:
        errs = []
        for r in rows:
            cfg, _, est = settle(r, cal, float(share))
            errs.append(abs(predicted(r, est, cfg) - r.measured) / r.measured)
        scores.append((sum(errs) / len(errs), max(errs), float(share)))
    return sorted(scores)


# The fit's grid: gemm_half_balance (x the GPU's FLOP per HBM byte) x elementwise_traffic
# (HBM bytes per activation byte)
FIT_GRID = ((0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.25, 1.6),
            (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0))


def fit(grid=FIT_GRID) -> list[tuple[float, float, float, float]]:
    """Every (mean |error|, max |error|, gemm_half_balance, elementwise_traffic) on the
    calibration set, best first. Each row's placement is built once; only the time model
    is re-run per grid point."""
    from ledger.placement import place
    from ledger.step import DEFAULT, step_times, structure
    from ledger.system import system

    rows = []
    for r in (r for r in calibration_set() if r.source == FIT_SOURCE):
        sysm = system(r.gpu)
        rows.append((r, sysm, structure(r.model, r.cfg, sysm, place(
            r.model, r.cfg, gpus_per_node=sysm.gpus_per_node,
            gpus_per_domain=sysm.gpus_per_domain))))
    scores = []
    for w, g in product(*grid):
        cal = replace(DEFAULT, gemm_half_balance=float(w), elementwise_traffic=float(g))
        errs = []
        for r, sysm, st in rows:
            t = float(step_times(r.model, r.cfg, sysm, st, cal, r.tp_overlap)["step_time_s"])
            errs.append(abs(t - r.measured) / r.measured)
        scores.append((sum(errs) / len(errs), max(errs), float(w), float(g)))
    return sorted(scores)


__all__ = ["Run", "runs", "gpt", "narayanan_flops", "predicted", "settle", "fit",
           "calibration_set", "FIT_GRID", "fit_gemm_share", "SHARE_GRID", "run_system"]
