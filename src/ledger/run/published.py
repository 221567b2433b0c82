"""Published whole runs the run layer is held against, each beside its step-time error.

A row is the run's phases as its publication gives them, each with the step-time row it
is priced and measured by (a ``ledger.validation.Run``: the published settings, the
open ones listed, the published rate where there is one), and what the run's overheads
depend on where the publication says (its interruption rate, storage, interval, price).

ONE RULE for what a publication leaves open, applied to every row and never looking at
a measured figure:
- micro-batch, interleaving, recompute, TP overlap: validation's THE RULE (``settle``);
- a phase's placement, when not published: the run's first published placement; when
  its global batch does not divide that placement's data-parallel size, data-parallel
  ranks become context-parallel ones, the fewest (powers of two) that make it divide
  and leave micro-batches the schedule runs (DualPipe needs an even m >= 2 pp:
  DeepSeek-V3's context extension on 128 data-parallel ranks would leave 15);
- a phase with several published placements and no published split: its tokens split
  evenly over them;
- a ramp whose shape is not published: Megatron's ramp over the published span in
  increments of one data-parallel batch (dp x micro-batch sequences; two under DualPipe,
  which sends half the micro-batches each way), from the published start or from the
  smallest batch the schedule runs if that is larger (DualPipe: 2 pp micro-batches per
  data-parallel rank; DeepSeek-V3's 3,072 sequences are 24 on its 128 ranks, fewer than
  DualPipe's 32: its ramp starts at 4,096 here);
- interruption rate, storage, interval, relaunch: the run's own published figure, else
  the defaults (``ledger.run.failures``, ``ledger.run.checkpoint``).
A phase's step time "at the published rate" is the priced step scaled by its row's
published / predicted step time; a phase without a published rate takes the ratio of
the run's first phase that has one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.pipeline import check as check_schedule
from ledger.model import ModelSpec
from ledger.run.checkpoint import Storage
from ledger.run.failures import RATES
from ledger.run.phases import Phase
from ledger.run.whole import RunEstimate, RunSettings, whole_run
from ledger.validation.published import Run, predicted, run_system, runs, settle


@dataclass(frozen=True)
class PhaseRow:
    phase: Phase  # tokens or steps, sequence, batch, ramp (its placement: from ``step``)
    step: Run  # the step-time row: published settings, open ones, the rate (0: none)


@dataclass(frozen=True)
class WholeRun:
    label: str
    source: str
    phases: tuple[PhaseRow, ...]
    gpu_hours: float  # the published total over these phases (0: none published)
    settings: RunSettings = RunSettings()
    parts: tuple[tuple[str, tuple[int, ...], float], ...] = ()  # (what, phases, GPU-hours)
    published: str = ""  # what else the publication says of the run's overheads


def bloom_176b() -> ModelSpec:
    """BLOOM (bigscience/bloom config.json): 70 layers, 14,336 wide, 112 heads, ALiBi, a
    vocabulary padded to 250,880, LayerNorm and biases, tied embeddings."""
    return ModelSpec(name="bloom-176b", layers=70, hidden=14336, heads=112, vocab=250880,
                     seq_len=2048, ffn_hidden=4 * 14336, gated_mlp=False, tied_embeddings=True,
                     qkv_bias=True, out_bias=True, mlp_bias=True, norm="layernorm")


def opt_175b() -> ModelSpec:
    """OPT-175B (arXiv:2205.01068 Table 1; transformers' OPTConfig): 96 layers, 12,288
    wide, 96 heads, ReLU MLP of 4h, learned positions (2,048 + 2), vocabulary 50,272."""
    return ModelSpec(name="opt-175b", layers=96, hidden=12288, heads=96, vocab=50272,
                     seq_len=2048, ffn_hidden=4 * 12288, gated_mlp=False, tied_embeddings=True,
                     qkv_bias=True, out_bias=True, mlp_bias=True, norm="layernorm",
                     learned_positions=2050)


def _row(source: str, label: str) -> Run:
    return next(r for r in runs() if r.source == source and r.label == label)


def _like(row: Run, label: str, seq: int, batch: int) -> Run:
    """A phase without a published rate on ``row``'s placement (the rule's first
    published one), its batch divided over the data-parallel ranks (or, where it does
    not divide or leaves micro-batches the schedule cannot run - DualPipe's even
    m >= 2 pp - over the fewest context-parallel ranks that make it)."""
    cfg, k = row.cfg, 1
    while batch % (cfg.dp // k) or not _runs(cfg, batch // (cfg.dp // k)):
        k *= 2
        if cfg.dp % k:
            raise ValueError(f"{label}: no split of dp({cfg.dp}) runs {batch}")
    cfg = replace(cfg, dp=cfg.dp // k, cp=cfg.cp * k, num_microbatches=batch // (cfg.dp // k))
    return replace(row, label=label, model=row.model.with_seq(seq), cfg=cfg, measured=0.0,
                   global_batch=batch, open=tuple(dict.fromkeys((*row.open, "micro_batch"))))


def _ramp_shape(cfg: ParallelConfig, ramp: tuple[int, int, int]) -> tuple[int, int, int]:
    """THE rule's ramp for an unpublished shape (the module's docstring): its start,
    increment and samples."""
    one = cfg.dp * cfg.micro_batch
    step = one * (2 if cfg.schedule == "dualpipe" else 1)
    start = ramp[0]
    while not _runs(cfg, start // one) or start % one:
        start = (start // one + 1) * one
    return start, step, ramp[2]


def _runs(cfg: ParallelConfig, m: int) -> bool:
    """Whether the placement's schedule runs ``m`` micro-batches."""
    try:
        check_schedule(cfg.schedule, cfg.pp, m, cfg.vp)
    except LedgerError:
        return False
    return True


def llama3_405b_run() -> WholeRun:
    """Llama 3 (arXiv:2407.21783): sec. 3.4.1 '4M tokens and sequences of length 4,096 ...
    8M sequences of 8,192 tokens after pre-training 252M tokens ... 16M after 2.87T';
    sec. 3.4.2 '~800B' of long context to 128K, sec. 3.4.3 the last 40M annealed at 128K;
    15.6T tokens in all (sec. 1; 6 x 405e9 x 15.6e12 = 3.79e25, its '3.8 x 10^25 FLOPs',
    so the 800B are inside the 15.6T); Table 4's three placements. Binary M (16M =
    2,048 x 8,192, as Table 4's batch per DP says). 30.84M H100 GPU-hours: the Llama 3.1
    model card (meta-llama/llama-models @ a9c89c47 models/llama3_1/MODEL_CARD.md L152-158).
    Storage: Tectonic's 'sustainable throughput of 2 TB/s' (sec. 3.3.1)."""
    r8k, r16k, r128k = (_row("Llama 3 2024", label) for label in (
        "8K GPUs, 8K seq", "16K GPUs, 8K seq", "16K GPUs, 128K seq"))
    m = 2**20
    half = (14.8e12 - 2.87e12) / 2  # the 16M-batch 8K phase: on 8K and 16K GPUs
    rows = (
        PhaseRow(Phase(name="4M batch, 4K", tokens=252e6, seq_len=4096, global_batch=1024),
                 _like(r8k, "4M batch, 4K", 4096, 4 * m // 4096)),
        PhaseRow(Phase(name="8M batch, 8K", tokens=2.87e12 - 252e6, seq_len=8192,
                       global_batch=1024), _like(r8k, "8M batch, 8K", 8192, 8 * m // 8192)),
        PhaseRow(Phase(name="16M batch, 8K, 8K GPUs", tokens=half, seq_len=8192,
                       global_batch=2048), r8k),
        PhaseRow(Phase(name="16M batch, 8K, 16K GPUs", tokens=half, seq_len=8192,
                       global_batch=2048), r16k),
        PhaseRow(Phase(name="long context to 128K", tokens=800e9 - 40e6, seq_len=131072,
                       global_batch=128), r128k),
        PhaseRow(Phase(name="annealing, 128K", tokens=40e6, seq_len=131072,
                       global_batch=128), r128k),
    )
    return WholeRun("Llama 3.1 405B", "Llama 3 2024 + Llama 3.1 model card", rows, 30.84e6,
                    RunSettings(storage=Storage(2e12, per_node=False)),
                    published="419 unexpected interruptions in a 54-day snapshot; 'higher "
                              "than 90% effective training time' (sec. 3.3.4)")


def deepseek_v3_run() -> WholeRun:
    """DeepSeek-V3 (arXiv:2412.19437): sec. 4.2 14.8T tokens at 4K, the batch 'gradually
    increased from 3072 to 15360 in the training of the first 469B tokens'; sec. 4.3 two
    context-extension phases of 1,000 steps, 32K x 1,920 and 128K x 480 sequences;
    Table 1: 2,664K H800 GPU-hours of pre-training, 119K of context extension (and 5K of
    post-training, not a phase here), at $2 per GPU-hour."""
    pre = _row("DeepSeek-V3 2024", "671B on 2048 H800")
    ramp = 469e9 / 4096  # samples
    rows = (
        PhaseRow(Phase(name="pre-training, 4K", tokens=14.8e12, seq_len=4096,
                       global_batch=15360, rampup=(3072, 0, round(ramp))), pre),
        PhaseRow(Phase(name="context extension, 32K", steps=1000, seq_len=32768,
                       global_batch=1920), _like(pre, "extension, 32K", 32768, 1920)),
        PhaseRow(Phase(name="context extension, 128K", steps=1000, seq_len=131072,
                       global_batch=480), _like(pre, "extension, 128K", 131072, 480)),
    )
    return WholeRun("DeepSeek-V3", "DeepSeek-V3 2024", rows, 2664e3 + 119e3,
                    RunSettings(usd_per_gpu_hour=2.0),
                    parts=(("pre-training", (0,), 2664e3), ("context extension", (1, 2), 119e3)),
                    published="no interruptions or checkpoints published; 'did not ... perform "
                              "any rollbacks' (README L53-54); $2 per GPU-hour")


def bloom_run() -> WholeRun:
    """BLOOM-176B, bigscience tr11-176B-ml: the slurm script (@ ed196cd2: TP 4, PP 12, 48
    nodes, MICRO_BATCH_SIZE=2, GLOBAL_BATCH_SIZE=2048, SEQ_LEN=2048, --rampup-batch-size
    192 16 9_765_625, --checkpoint-activations, ZeRO stage 0 with its BF16_Optimizer's own
    stage-1 sharding, SAVE_INTERVAL=100); 366B tokens (arXiv:2211.05100 sec. 3.4); README
    L661-663: 'elapsed time per iteration (s): 104.70' at GBS 2048; chronicles.md L36: 'A
    checkpoint is saved in 40 secs' (2.3 TB, README L33: 57.5 GB/s); L225: 'Every week or
    so ... one of the gpus dies'. 1,082,990 GPU-hours (arXiv:2211.05100 sec. 3.4.1; GENCI)."""
    cfg = ParallelConfig(tp=4, pp=12, dp=8, zero_stage=1, micro_batch=2, num_microbatches=128,
                         sequence_parallel=False, recompute="full", flash_attention=False,
                         framework="deepspeed")
    step = Run("BLOOM 2022", "176B on 384 A100", bloom_176b(), cfg, "a100-80gb",
               "step_time_s", 104.70)
    rows = (PhaseRow(Phase(name="ramp, then 2,048 x 2,048", tokens=366e9, seq_len=2048,
                           global_batch=2048, rampup=(192, 16, 9_765_625)), step),)
    return WholeRun("BLOOM-176B", "BigScience 2022", rows, 1_082_990,
                    RunSettings(storage=Storage(2.3e12 / 40, per_node=False),
                                ckpt_interval_steps=100, gpu_mtbf_s=RATES["bloom"]),
                    published="checkpoint 2.3 TB ('329GB' of bf16 weights) saved in 40 s "
                              "every 100 steps; a GPU dies 'every week or so'")


# OPT's logbook (facebookresearch/metaseq @ f2cd3679 projects/OPT/chronicles): the 12.xx
# lineage ran from November 11, 2021 (10_percent_update.md) to January 6, 2022
# (final_update.md L6) with '~90 restarts' (L24); 'downloading 1.6TB of a single model
# checkpoint (992 files, each ~1.7GB) on restarts' (27_percent_update.md L19).
OPT_LOGBOOK = {"days": 56, "restarts": 90, "checkpoint_bytes": 1.6e12, "files": 992}


def opt_run() -> WholeRun:
    """OPT-175B (arXiv:2205.01068 sec. 2.4: 992 A100 80GB, FSDP with Megatron TP 8, 'up to
    147 TFLOP/s per GPU'; metaseq chronicles final_update.md L6: 300B tokens, '~4.30E+23
    FLOPs' - so 147 counts recomputed FLOPs too). The batch of '2M' tokens (10%_update L21)
    is 124 data-parallel replicas x 8 sequences = 2.03M. No GPU-hour total is published;
    the run is held to its restarts and checkpoint (``OPT_LOGBOOK``)."""
    cfg = ParallelConfig(tp=8, dp=124, zero_stage=3, sequence_parallel=False,
                         framework="torchtitan", num_microbatches=8)
    step = Run("OPT 2022", "175B on 992 A100", opt_175b(), cfg, "a100-80gb",
               "hardware_tflops_per_gpu", 147.0, open=("micro_batch", "recompute"),
               global_batch=992)
    rows = (PhaseRow(Phase(name="300B tokens", tokens=300e9, seq_len=2048, global_batch=992),
                     step),)
    return WholeRun("OPT-175B", "OPT 2022", rows, 0.0, RunSettings(gpu_mtbf_s=RATES["opt"]),
                    published=f"logbook: ~{OPT_LOGBOOK['restarts']} restarts in "
                              f"{OPT_LOGBOOK['days']} days; a checkpoint of 1.6 TB in "
                              f"{OPT_LOGBOOK['files']} files of ~1.7 GB; '~33 days of "
                              f"continuous training on 1024' A100 without failures")


def whole_runs() -> list[WholeRun]:
    return [llama3_405b_run(), deepseek_v3_run(), bloom_run(), opt_run()]


@dataclass(frozen=True)
class Held:
    run: WholeRun
    predicted: RunEstimate  # at the ledger's step times
    at_published_step: RunEstimate  # the same run at the published step times
    step_errors: tuple[tuple[str, float], ...]  # (row, predicted / published step - 1)
    phases: tuple[Phase, ...] = ()  # as priced: placements settled

    def gpu_hours(self, which: RunEstimate, indices: tuple[int, ...]) -> float:
        """GPU-hours of the phases ``indices`` (a ``WholeRun.parts`` entry) in ``which``."""
        mine = {id(self.phases[i]) for i in indices}
        return sum(s.gpu_hours for s in which.segments if id(s.segment.phase) in mine)


@lru_cache(maxsize=None)
def held(run: WholeRun) -> Held:
    """The run priced twice - at the ledger's step times and at the published ones."""
    phases, ratio, errors = [], {}, []
    for row in run.phases:
        cfg, overlap, est = settle(row.step)
        ramp = row.phase.rampup
        if ramp is not None and ramp[1] == 0:  # an unpublished ramp shape: THE rule's
            ramp = _ramp_shape(cfg, ramp)
        phases.append(replace(row.phase, config=cfg, tp_overlap=overlap, rampup=ramp))
        if row.step.measured:
            value = predicted(row.step, est, cfg)
            r = row.step.measured / est.step_time_s if row.step.metric == "step_time_s" \
                else value / row.step.measured
            ratio[len(phases) - 1] = r
            if (row.step.label, 1 / r - 1) not in errors:
                errors.append((row.step.label, 1 / r - 1))
    first = ratio[min(ratio)]
    scale = {id(p): ratio.get(i, first) for i, p in enumerate(phases)}
    model = run.phases[0].step.model
    system = run_system(run.phases[0].step)
    args, cache = (model, phases[0].config, system, phases, run.settings), {}
    at_model = whole_run(*args, cache=cache)
    at_published = whole_run(*args, cache=cache, step_time=lambda seg, est: est.step_time_s
                             * scale[id(seg.phase)])
    return Held(run, at_model, at_published, tuple(errors), tuple(phases))
