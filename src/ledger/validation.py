"""Published training runs the time model is held against (the test table and the
benchmarks/validation report read them from here; nothing here is fitted per row).

Korthikanti et al. 2022 (Table 4, A100 80 GB, Selene): iteration time in seconds, full
recompute and sequence parallel + selective recompute. Narayanan et al. 2021 (Table 1):
TFLOP/s per GPU counting the recompute, full recompute. Dubey et al. 2024 (Llama 3,
Table 4): TFLOP/s per GPU and MFU on H100 SXM. GPT rows: seq 2048, vocab 51,200, ffn 4h,
MHA, tied embeddings, learned positions, LayerNorm, biases; attention materialised.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.model import ModelSpec, llama3_405b
from ledger.parallel import ParallelConfig


@dataclass(frozen=True)
class Run:
    source: str
    label: str
    model: ModelSpec
    cfg: ParallelConfig
    gpu: str
    metric: str  # "step_time_s" | "narayanan_tflops_per_gpu" | "tflops_per_gpu"
    measured: float


def gpt(name: str, layers: int, hidden: int, heads: int) -> ModelSpec:
    return ModelSpec(name=name, layers=layers, hidden=hidden, heads=heads, vocab=51200,
                     seq_len=2048, ffn_hidden=4 * hidden, gated_mlp=False,
                     tied_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True,
                     norm="layernorm", learned_positions=2048)


def _korthikanti() -> list[Run]:
    rows = [("22B", 48, 6144, 64, 8, 1, 4, 4, 1, 1.42, 1.10),
            ("175B", 96, 12288, 96, 8, 8, 64, 1, 3, 18.13, 13.75),
            ("530B", 105, 20480, 128, 8, 35, 280, 1, 3, 49.05, 37.83),
            ("1T", 128, 25600, 160, 8, 64, 512, 1, 1, 94.42, 71.49)]
    out = []
    for name, l, h, a, tp, pp, batch, mb, vp, t_full, t_sel in rows:
        model = gpt(f"gpt-{name}", l, h, a)
        base = dict(tp=tp, pp=pp, dp=1, micro_batch=mb, num_microbatches=batch // mb, vp=vp,
                    flash_attention=False)
        out.append(Run("Korthikanti 2022", f"{name} full recompute", model,
                       ParallelConfig(**base, sequence_parallel=False, recompute="full"),
                       "a100-80gb", "step_time_s", t_full))
        out.append(Run("Korthikanti 2022", f"{name} SP + selective", model,
                       ParallelConfig(**base, sequence_parallel=True, recompute="selective"),
                       "a100-80gb", "step_time_s", t_sel))
    return out


# micro-batch sizes are not published; we assume the largest of 1, 2, 4, 8 that gives
# every pipeline at least 4 x pp micro-batches (Megatron's guidance) and fits in memory.
NARAYANAN_MB = {"1.7B": 8, "3.6B": 8, "7.5B": 4, "18B": 4, "39B": 2, "76B": 2,
                "145B": 1, "310B": 1, "530B": 1, "1T": 1}


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
        mb = NARAYANAN_MB[name]
        cfg = ParallelConfig(tp=tp, pp=pp, dp=dp, micro_batch=mb,
                             num_microbatches=batch // (dp * mb), sequence_parallel=False,
                             recompute="full", flash_attention=False)
        out.append(Run("Narayanan 2021", f"{name} on {gpus}", gpt(f"gpt-{name}", l, h, a), cfg,
                       "a100-80gb", "narayanan_tflops_per_gpu", tflops))
    return out


def _llama3() -> list[Run]:
    """Interleaved 1F1B with vp = 4 (not published: Llama 3 sec. 3.3.2 describes a tuned
    interleaved schedule; 4 x 16 virtual stages of ~2 layers), FSDP-style data parallelism
    counted as ZeRO-1 over dp x cp, 16M-token batches, micro-batch 1."""
    m405 = llama3_405b()
    rows = [("8K GPUs, 8K seq", m405, 8, 1, 16, 64, 430.0),
            ("16K GPUs, 8K seq", m405, 8, 1, 16, 128, 400.0),
            ("16K GPUs, 128K seq", m405.with_seq(131072), 8, 16, 16, 8, 380.0)]
    out = []
    for label, model, tp, cp, pp, dp, tflops in rows:
        seqs = 16 * 2**20 // model.seq_len
        cfg = ParallelConfig(tp=tp, cp=cp, pp=pp, dp=dp, zero_stage=1, vp=4,
                             num_microbatches=seqs // dp)
        out.append(Run("Llama 3 2024", label, model, cfg, "h100-sxm", "tflops_per_gpu", tflops))
    return out


def narayanan_flops(model: ModelSpec, sequences: int) -> float:
    """Narayanan et al. 2021 eq. 3, the FLOPs their TFLOP/s counts (full recompute, all s
    keys): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))."""
    b, s, l, h, v = sequences, model.seq_len, model.layers, model.hidden, model.vocab
    return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def predicted(run: Run, est) -> float:
    """The run's metric from an estimate, in the run's own definition."""
    if run.metric == "narayanan_tflops_per_gpu":
        seqs = run.cfg.dp * run.cfg.num_microbatches * run.cfg.micro_batch
        return narayanan_flops(run.model, seqs) / run.cfg.world / est.step_time_s / 1e12
    return getattr(est, run.metric)


def runs() -> list[Run]:
    return _korthikanti() + _narayanan() + _llama3()


__all__ = ["Run", "runs", "gpt", "narayanan_flops", "predicted", "replace"]
