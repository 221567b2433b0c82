"""Measured peak memory the memory model is held against: a declared table of published
runs, each compared like with like, and the one constant fitted on a declared subset.

What each source measured (``Peak.metric``):
- ``reserved``: torchtitan's ``memory`` figure, ``torch.cuda.memory_stats()``'s
  ``reserved_bytes.all.peak`` (torchtitan/metrics.py L55-83 @9dec370, printed by
  train.py L393; components/metrics.py L66-72 @e7c0cae), peak stats reset after each
  log, "the maximum across all GPUs" (docs/performance.md @d4c86e37, footnote 1) - the
  ledger's largest ``reserved_bytes`` over the pipeline ranks.
- ``allocated``: Megatron-LM's ``mem-max-allocated-bytes``, ``allocated_bytes.all.peak``
  since the process started (megatron/training/training.py L3436-3447 @d98e8a64; no
  reset_peak_memory_stats in megatron/), logged by the last rank only
  (global_vars.py L234-241: the TensorBoard writer lives on rank world - 1, the last
  pipeline stage in the default order tp-cp-ep-dp-pp) - the ledger's last rank's
  ``allocated_bytes``.
- ``max-alloc``: the largest ``max allocated`` Megatron-LM's report_memory prints, one line
  per pipeline rank (megatron/training/utils/common_utils.py L313-334 @d98e8a64) - the
  ledger's largest ``allocated_bytes`` over the ranks (``memory_mcore``: a paper's "Mem").
- ``resident``: Megatron-LM's ``mem-allocated-bytes`` after the step (same lines):
  the last rank's state.
- ``outcome``: the run ran (1) or went out of memory (0): the ledger's verdict, what
  the device must hold (``MemoryBreakdown.required_bytes``: reserved + context less what
  the allocator hands back before it fails an allocation) against its capacity.

Open settings, one rule for all rows: a setting a publication does not state takes the
framework's default at the commit the publication names (its launch file, else its
config defaults), never a value chosen per row and never one read off the measured
figure. The torchtitan rows' float8 linear options (not published for Dec 2024) are
the config defaults at 9dec370 (no float8 all-gather) except where the model's shipped
TOML turns them on (llama3_405b.toml L57-60: float8 all-gather with precomputed scales).

The fragmentation constant (``Framework.fragmentation``: reserved over allocated at the
peak) is the one fitted figure. It is fitted by benchmarks/fit_memory.py on the
calibration rows below - torchtitan's Table 1, the simplest placements (8 GPUs, FSDP
only) - and every other row is a prediction.
"""
from __future__ import annotations

from functools import lru_cache

from ledger.config import ParallelConfig
from ledger.model import ModelSpec, llama2_13b, llama2_70b, llama3_8b, llama3_70b, llama3_405b
from ledger.validation.peak import METRICS, GiB, Peak  # noqa: F401  (the row, re-exported)

TT24 = "pytorch/torchtitan@d4c86e37 docs/performance.md"  # its Tables 1-6 (Dec 2024)
TT25 = "pytorch/torchtitan@cbccb387 benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md"
TT_A100 = "pytorch/torchtitan@395a5262 and @1ea476e9 docs/performance.md (Apr 2024)"
TT_405 = "pytorch/torchtitan@3faaa1a0 docs/performance.md (Aug 2024)"
MEGATRON = "NVIDIA/Megatron-LM@d98e8a64 tests/functional_tests/test_cases/gpt"
DSV3 = "DeepSeek-V3 technical report (arXiv:2412.19437) sec. 3.1-3.3"


def _tt24(label, model, seq, role="prediction", gpu="h100-96gb", **cfg) -> dict:
    return dict(source=TT24, label=label, model=model.with_seq(seq), gpu=gpu, role=role,
                cfg=ParallelConfig(framework="torchtitan@2024-12", zero_stage=3, **cfg))


def _torchtitan_2024_12() -> list[Peak]:
    """docs/performance.md @d4c86e37 lines 13-59: Grand Teton H100 96GB HBM2e; torchtitan
    9dec370, torch 1963fc8. Seq 8192 and SAC 'op' from the tomls at 9dec370 (llama3_8b.toml
    L30, L53-55); PP: micro-batches = the PP degree (pipelining_utils.py L79-81), the
    default 1F1B, 126 layers split 15, 6 x 16, 15 (Interleaved1F1B: 2 stages per rank,
    7, 14 x 8, 7); CP over dp_shard x cp for FSDP, allgather rotation."""
    m8, m70, m405 = llama3_8b(), llama3_70b(), llama3_405b()
    rows = []
    for gpus, table in ((8, (82.4, 77.0, 76.8)), (128, (67.0, 62.0, 61.8))):
        role = "calibration"
        t = 1 if gpus == 8 else 3
        for i, (extra, gib) in enumerate(zip(({}, {"compile": True},
                                              {"compile": True, "precision": "fp8"}), table)):
            tech = ("FSDP", "FSDP + compile", "FSDP + compile + float8")[i]
            rows.append(Peak(metric="reserved", measured=gib * GiB, **_tt24(
                f"T{t}-{i + 1} 8B {gpus} GPUs {tech}", m8, 8192, role, dp=gpus, micro_batch=2,
                recompute="selective", **extra)))
    f8 = {"compile": True, "precision": "fp8"}
    for i, (cp, gib) in enumerate(zip((1, 2, 4, 8), (83.9, 84.2, 84.0, 84.5))):
        rows.append(Peak(metric="reserved", measured=gib * GiB, **_tt24(
            f"T2-{i + 1} 8B FSDP {8 // cp} CP {cp}", m8, 32768 * cp, "calibration",
            dp=8 // cp, cp=cp, recompute="full", **f8)))
    for i, gib in enumerate((71.9, 67.6)):
        rows.append(Peak(metric="reserved", measured=gib * GiB, **_tt24(
            f"T4-{i + 1} 70B FSDP 32 TP 8" + (" async TP" if i else ""), m70, 8192, dp=32,
            tp=8, micro_batch=16, recompute="full", **f8)))
    f8g = {"compile": True, "precision": "fp8+param-gather"}  # llama3_405b.toml L57-60
    for i, (sched, vp, gib) in enumerate((("1f1b", 1, 82.5), ("interleaved", 2, 72.7))):
        rows.append(Peak(metric="reserved", measured=gib * GiB, **_tt24(
            f"T5-{i + 1} 405B 3D {'Interleaved 1F1B' if vp > 1 else '1F1B'}", m405, 8192,
            dp=8, tp=8, pp=8, vp=vp, schedule=sched, micro_batch=4, num_microbatches=8,
            recompute="full", **f8g)))
    for i, (cp, gib) in enumerate(zip((1, 2, 4, 8), (75.3, 75.9, 77.1, 84.9))):
        rows.append(Peak(metric="reserved", measured=gib * GiB, **_tt24(
            f"T6-{i + 1} 405B 4D FSDP {8 // cp} CP {cp}", m405, 32768 * cp, dp=8 // cp,
            cp=cp, tp=8, pp=8, num_microbatches=8, recompute="full", **f8g)))
    return rows


def _torchtitan_2025_06() -> list[Peak]:
    """The Trainy H200 runs (benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md L17-54):
    local batch 2, compile, float8 with FSDP float8 all-gather and precomputed scales;
    seq 8192 and SAC 'op' from llama3_8b.toml @e7c0cae L34, L55-57. Which of max_active /
    max_reserved the table shows is not stated: the rule takes what torchtitan prints,
    max_reserved."""
    cfg = dict(framework="torchtitan@2025-06", zero_stage=3, micro_batch=2,
               recompute="selective", compile=True, precision="fp8+param-gather")
    return [Peak(TT25, f"H200-{i + 1} 8B FSDP {gpus}", llama3_8b().with_seq(8192),
                 ParallelConfig(dp=gpus, **cfg), "h200", "reserved", gib * GiB)
            for i, (gpus, gib) in enumerate(((32, 47.96), (64, 46.97)))]


def _torchtitan_outcomes() -> list[Peak]:
    """Runs that ran or went out of memory. 64 A100 80GB, FSDP2 (Apr 2024, torchtitan of
    that month: fused_rmsnorm for 13B and 8B, rmsnorm for 70B, the model's fp32 logits held
    through the backward, no compile; selective 'layer' = every 2nd block in full, the
    default option '2'); Llama 2 at seq 4096, Llama 3 at 8192. 405B on 128 H100 (94 GB):
    2D FSDP 16 x TP 8 with local batch 2 and full AC ran; 1D FSDP went out of memory, its
    batch and AC not stated - by the rule, as the 2D runs'."""
    a100 = dict(framework="torchtitan@2024-04", zero_stage=3, dp=64)
    sel = {"op": dict(recompute="selective"), "layer": dict(recompute="full",
                                                            recompute_every=2),
           "no": {}, "full": dict(recompute="full")}
    rows = [(llama2_13b().with_seq(4096), 2, "no", 1), (llama2_13b().with_seq(4096), 2, "layer", 1),
            (llama2_13b().with_seq(4096), 2, "op", 1), (llama2_70b().with_seq(4096), 2, "layer", 0),
            (llama2_70b().with_seq(4096), 2, "op", 0), (llama2_70b().with_seq(4096), 1, "op", 1),
            (llama2_70b().with_seq(4096), 2, "full", 1), (llama3_8b(), 1, "layer", 1),
            (llama3_8b(), 1, "op", 1), (llama3_70b(), 1, "full", 1)]
    out = [Peak(TT_A100, f"{m.name} b{mb} {ac} AC on 64 A100", m,
                ParallelConfig(micro_batch=mb, **sel[ac], **a100), "a100-80gb", "outcome",
                float(ran)) for m, mb, ac, ran in rows]
    m405 = llama3_405b().with_seq(8192)
    for label, cfg, ran in (("405B 2D FSDP 16 TP 8 b2 full AC", dict(dp=16, tp=8), 1),
                            ("405B 1D FSDP 128 b2 full AC", dict(dp=128), 0)):
        out.append(Peak(TT_405, label, m405, ParallelConfig(
            framework="torchtitan@2024-12", zero_stage=3, micro_batch=2, recompute="full",
            **cfg), "h100-96gb", "outcome", float(ran)))
    return out


def megatron_gpt(vocab: int, seq: int = 8192) -> ModelSpec:
    """The memory_speed tests' GPT 7B: 32 layers, hidden 4096, 32 heads in 8 query groups,
    ffn 4h (arguments.py L1320-1330 without --swiglu), GELU, LayerNorm, learned absolute
    positions (max-position-embeddings 8192), biases on (add_bias_linear), untied; the
    NullTokenizer's --vocab-size 131073 padded to a multiple of 128 x tp
    (build_tokenizer.py L133-146)."""
    return ModelSpec(name="gpt3-7b", layers=32, hidden=4096, heads=32, kv_heads=8,
                     vocab=vocab, seq_len=seq, ffn_hidden=4 * 4096, gated_mlp=False,
                     qkv_bias=True, out_bias=True, mlp_bias=True, norm="layernorm",
                     learned_positions=seq)


def _megatron() -> list[Peak]:
    """gpt3_7b_tp1_pp4_memory_speed and gpt3_7b_tp4_pp1_memory_speed (model_config.yaml,
    tests/fixtures/memory/SOURCES.md): bf16, Transformer Engine, the distributed optimizer,
    no recompute, no SP, seq 8192, global batch 8 on 8 GPUs (DP 2); tp1 pp4 with
    micro-batch 1 and one layer per virtual stage (vp 8), tp4 pp1 with micro-batch 2;
    dropout at Megatron's default 0.1; --no-gradient-accumulation-fusion (both files: TE
    hands autograd each wgrad, so no dummy wgrads); CUBLAS_WORKSPACE_CONFIG :4096:8 (both
    files' ENV_VARS: PyTorch's cuBLAS workspace 4096 KiB x 8 on every platform). The last
    step's (25) figures of each platform's golden values."""
    goldens = {  # (max allocated, allocated after the step) at step 25
        ("tp1 pp4", "dgx_h100"): (60720852992, 24808996864),
        ("tp1 pp4", "dgx_a100"): (60489064448, 24510808064),
        ("tp1 pp4", "dgx_gb200"): (60519342080, 24540168192),
        ("tp4 pp1", "dgx_h100"): (57143791616, 20663519232),
        ("tp4 pp1", "dgx_a100"): (58188115968, 20634103808),
        ("tp4 pp1", "dgx_gb200"): (58217476096, 20663463936)}
    shapes = {"tp1 pp4": (megatron_gpt(131200), dict(tp=1, pp=4, vp=8, micro_batch=1,
                                                     num_microbatches=4)),
              "tp4 pp1": (megatron_gpt(131584), dict(tp=4, micro_batch=2,
                                                     num_microbatches=2))}
    out = []
    for (shape, platform), (peak, after) in goldens.items():
        model, cfg = shapes[shape]
        c = ParallelConfig(dp=2, zero_stage=1, sequence_parallel=False,
                           grad_accumulation_fusion=False,
                           cublas_workspace_bytes=4096 * 1024 * 8, **cfg)
        run = f"gpt3_7b_{shape.replace(' ', '_')}_memory_speed {platform}"
        out.append(Peak(MEGATRON, run, model, c, platform, "allocated", float(peak)))
        out.append(Peak(MEGATRON, run + " after step", model, c, platform, "resident",
                        float(after)))
    return out


MEGATRON_MOE = "NVIDIA/Megatron-LM@d98e8a64 tests/functional_tests/test_cases/moe"


def megatron_moe() -> ModelSpec:
    """gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed's model (model_config.yaml): 16 layers,
    hidden 1024, 32 heads of MLA (q_lora 1536, kv_lora 512, qk 128 + rope 64, v 128,
    the latent norms of --qk-layernorm), SwiGLU, RMSNorm, untied, the first layer dense
    (ffn 4096, --moe-layer-freq ([0]*1+[1]*15)) and 15 MoE layers of 32 experts top-4
    (ffn 1024) with a 1024-wide shared expert, one MTP module; GPT-2's BPE vocabulary
    (vocab.json, 50,257 tokens, GPT2BPETokenizer) padded to a multiple of 3232 x tp =
    51,712 (build_tokenizer.py L133-146)."""
    return ModelSpec(name="megatron-moe-proxy", layers=16, hidden=1024, heads=32,
                     kv_heads=32, head_dim=192, vocab=51712, seq_len=4096, ffn_hidden=4096,
                     attention="mla", q_lora_rank=1536, kv_lora_rank=512,
                     qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                     num_experts=32, top_k=4, moe_ffn_hidden=1024, shared_experts=1,
                     shared_expert_ffn=1024, moe_layer_ids=tuple(range(1, 16)),
                     router_groups=4, router_group_topk=2, mtp_layers=1)


def _megatron_moe() -> list[Peak]:
    """gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed (model_config.yaml): bf16, TE, the
    distributed optimizer, TP 2 + SP, PP 2 with 4 virtual stages per rank, EP 4 at ETP 1
    (the alltoall dispatcher), micro-batch 4 of 4,096 tokens, global batch 32 on 8 GPUs
    (DP 2), no recompute, dropout 0, --attention-backend unfused (TE's unfused attention:
    the scores materialised), --cross-entropy-loss-fusion with its impl 'native'
    (Megatron's compiled loss, ``LOSSES['vocab-parallel-fused']``). Routing is not forced even (seq_aux_loss): the rule prices
    even routing (MoESpec's default) for every row. The last step's (50) figures of each
    platform's golden values (golden_values_dev_dgx_h100.json,
    golden_values_dev_dgxh100_dgxc.json)."""
    goldens = {"dgx_h100": (60111630336, 6632031744),  # (max allocated, after) at step 50
               "dgxh100_dgxc": (57961472000, 6637274624)}
    cfg = ParallelConfig(tp=2, pp=2, vp=4, dp=2, ep=4, etp=1, zero_stage=1, micro_batch=4,
                         num_microbatches=4, moe_dispatcher="alltoall", dropout=0.0,
                         flash_attention=False, loss="vocab-parallel-fused")
    out = []
    for platform, (peak, after) in goldens.items():
        run = f"moe tp2_pp2_ep4_etp1_memory_speed {platform}"
        out.append(Peak(MEGATRON_MOE, run, megatron_moe(), cfg, "h100-sxm", "allocated",
                        float(peak)))
        out.append(Peak(MEGATRON_MOE, run + " after step", megatron_moe(), cfg, "h100-sxm",
                        "resident", float(after)))
    return out


def _deepseek_outcome() -> list[Peak]:
    """DeepSeek-V3's own training ran: 2,048 H800 (sec. 3.1), 16-way pipeline under DualPipe,
    64-way expert parallelism across 8 nodes, ZeRO-1 data parallelism (sec. 3.2), FP8
    (sec. 3.3), RMSNorm and MLA up-projections recomputed (sec. 3.2.3), 4K tokens
    (sec. 4.2); the micro-batch count from 15,360 sequences a step at DP 128, one sequence
    each (docs/memory.md's command, tests/test_memory.py)."""
    from ledger.model import deepseek_v3

    cfg = ParallelConfig(pp=16, vp=2, schedule="dualpipe", ep=64, dp=128, zero_stage=1,
                         num_microbatches=120, framework="deepseek",
                         precision="fp8-deepseek-v3", moe_dispatcher="flex", dropout=0.0,
                         recompute="selective", recompute_modules=("layernorm", "mla_up_proj"))
    return [Peak(DSV3, "deepseek-v3 2,048 H800 PP 16 DualPipe EP 64", deepseek_v3().with_seq(4096),
                 cfg, "h800", "outcome", 1.0, role="bound")]


def peaks() -> list[Peak]:
    from ledger.validation.memory_mcore import table5

    return (_torchtitan_2024_12() + _torchtitan_2025_06() + _megatron() + _megatron_moe()
            + table5() + _torchtitan_outcomes() + _deepseek_outcome())


def calibration_rows() -> list[Peak]:
    return [r for r in peaks() if r.role == "calibration"]


# Megatron-LM's functional-test platforms by the preset of their GPU: what the row's GPU
# sets where no capacity is read (Transformer Engine's GEMM workspace by generation)
PLATFORM_GPUS = {"dgx_a100": "a100-80gb", "dgx_h100": "h100-sxm", "dgxh100_dgxc": "h100-sxm",
                 "dgx_gb200": "gb200"}


@lru_cache(maxsize=None)
def _placed(row: Peak):
    """The row's placement on its GPU's system, as ``report`` and the step model lay it out:
    the preset's hosts and NVLink domain (a GB200's 4 GPUs a host in a 72-GPU domain), which
    set what lives outside the allocator - HybridEP's buffers are sized for the EP ranks
    sharing one domain (``ledger.placement.ep_buffers``) - and which links a group rides."""
    from ledger.placement import place
    from ledger.system import GPUS, system

    name = PLATFORM_GPUS.get(row.gpu, row.gpu)
    sysm = system(name)
    return place(row.model, row.cfg, gpu=GPUS[name], gpus_per_node=sysm.gpus_per_node,
                 gpus_per_domain=sysm.gpus_per_domain)


def predicted(row: Peak, fragmentation: tuple[float, float] | None = None,
              basis: str = "allocated") -> float:
    """The row's metric from the ledger, in the row's own definition (bytes, or 1 / 0
    for fits / does not fit); ``fragmentation`` (eager, compiled) in place of the
    framework's fitted pair (at the points of the step the shipped pair picks), a share
    of the ``basis`` (BASES) bytes."""
    ranks = _placed(row).memory_by_rank
    if row.metric == "resident":  # Megatron's grads persist: the state of every point, the
        return ranks[-1].resident_bytes  # buffers kept for the run and what the step keeps
    if row.metric == "allocated":
        return ranks[-1].allocated_bytes
    if row.metric == "max-alloc":
        return max(m.allocated_bytes for m in ranks)
    if fragmentation is None:
        reserved = max(m.reserved_bytes for m in ranks)
    else:
        share = fragmentation[bool(row.cfg.compile)]
        of = "allocated" if basis == "allocated+pool" else basis
        reserved = max(m.allocated_bytes + share * getattr(m, f"{of}_bytes") + m.cached_bytes
                       + (basis == "allocated+pool") * copy_in_pool_bytes(row, m.rank)
                       for m in ranks)
    if row.metric == "reserved":
        return reserved
    from ledger.system import system

    # the verdict weighs what the allocator cannot hand back (MemoryBreakdown.
    # required_bytes), not the reserved figure a fragmentation override prices
    need = max(m.required_bytes for m in ranks)
    return float(need <= system(row.gpu).gpu.hbm_bytes)


def error(row: Peak, fragmentation: tuple[float, float] | None = None,
          basis: str = "allocated") -> float:
    """(predicted - measured) / measured; for an outcome row 0 when the verdict is right,
    else 1."""
    p = predicted(row, fragmentation, basis)
    if row.metric == "outcome":
        return float(p != row.measured)
    return (p - row.measured) / row.measured


FRAGMENTATION_GRID = tuple(round(0.01 * i, 2) for i in range(31))  # 0.00 ... 0.30
# what the fragmentation is a share of: every allocated byte (what ships), or only the
# bytes freed and requested again every step (``MemoryBreakdown.churned_bytes``: the state
# allocated once leaves the allocator no freed block to split), or every allocated byte
# with FSDP2's all-gather outputs cached in their own stream's pool (``copy_in_pool_bytes``)
BASES = ("allocated", "churned", "allocated+pool")


def copy_in_pool_bytes(row: Peak, rank: int) -> float:
    """What FSDP2's all-gather copy-in stream keeps cached at any point after the first
    forward: its all-gather outputs are allocated on that stream (torch 2.13.0
    fsdp/_fully_shard/_fsdp_collectives.py L336-354, ``foreach_all_gather``), so their freed
    blocks serve that stream only (CUDACachingAllocator.cpp @001074d2 ``get_free_block``:
    a block is reused by the stream that allocated it); in the forward each output is
    kept until the next unit's copy-out (``AllGatherState``, _fsdp_param_group.py
    L426-489; the root's until the first layer's), so the pool holds the root's and one
    layer's, or two layers' - in the gathered dtype, a layer's GEMM weights in FP8 under
    FP8 all-gather. torchtitan's (FSDP2) rows with a shard group only."""
    from ledger.frameworks import of as framework_of
    from ledger.frameworks.fp8 import gather_wire_bytes
    from ledger.placement.layers import largest_layer_params
    from ledger.placement.per_gpu import root_params

    fw = framework_of(row.cfg)
    if fw.family not in ("torchtitan", "hf") or row.cfg.zero_stage != 3 \
            or row.cfg.dp * row.cfg.cp == 1:
        return 0.0
    g, rec = fw.gathered_param_bytes, fw.fp8
    wire = gather_wire_bytes(rec, zero3=True) if rec is not None and rec.param_gather else g
    layer = largest_layer_params(row.model, row.cfg) * wire
    return float(max(root_params(row.model, row.cfg, rank) * g + layer, 2 * layer))


def fit_fragmentation(grid=FRAGMENTATION_GRID,
                      basis: str = "allocated") -> list[tuple[float, float, float, float]]:
    """Every (mean |error|, max |error|, eager, compiled) fragmentation on the calibration
    rows, best first, as a share of the ``basis`` bytes: the memory model's fitted
    constants. Each is fitted on its own rows (eager runs, compiled runs), so the grid is
    searched one axis at a time."""
    rows = calibration_rows()
    best = {}
    for compiled in (False, True):
        mine = [r for r in rows if r.cfg.compile == compiled]
        scores = []
        for f in grid:
            errs = [abs(error(r, (f, f), basis)) for r in mine]
            scores.append((sum(errs) / len(errs), max(errs), f))
        best[compiled] = sorted(scores)
    out = []
    for e_mean, e_max, fe in best[False][:5]:
        for c_mean, c_max, fc in best[True][:5]:
            n_e, n_c = (sum(r.cfg.compile == c for r in rows) for c in (False, True))
            mean = (e_mean * n_e + c_mean * n_c) / (n_e + n_c)
            out.append((mean, max(e_max, c_max), fe, fc))
    return sorted(out)


def summary(rows=None) -> dict:
    """Mean and max |error| of the measured rows (calibration and prediction apart) and
    the outcome verdicts right of all."""
    rows = peaks() if rows is None else rows
    out = {}
    for role in ("calibration", "prediction"):
        errs = [abs(error(r)) for r in rows if r.role == role and r.metric != "outcome"]
        out[role] = (sum(errs) / len(errs), max(errs), len(errs)) if errs else (0, 0, 0)
    verdicts = [r for r in rows if r.metric == "outcome"]
    out["outcome"] = (sum(error(r) == 0 for r in verdicts), len(verdicts))
    return out


__all__ = ["BASES", "FRAGMENTATION_GRID", "METRICS", "Peak", "calibration_rows",
           "copy_in_pool_bytes", "error",
           "fit_fragmentation", "megatron_gpt", "peaks", "predicted", "summary"]
