"""A third-party measurement of fine-grained MoE training held as prediction rows: NVIDIA's
report "Scalable Training of Mixture-of-Experts Models with Megatron Core" (arXiv
2603.07685v2, Megatron-Core v0.16, sec. 8 Note p.68), its Table 11 (sec. 8.2, p.69): nine
measured runs of DeepSeek-V3 and Qwen3-235B-A22B on GB300, GB200 and H100, all with
force-balanced routing, TFLOPS/GPU and tokens/s/GPU (``PUBLISHED``). None of these rows is
fitted on or used to choose anything (``ledger.render.mcore_moe`` prices them,
``benchmarks/mcore_moe.py`` prints them).

Source (``SOURCE``): the v2 PDF's full text as a third party extracted it (its header reads
"arXiv:2603.07685v2 [cs.DC] 10 Mar 2026", 88 pages); page numbers are that text's printed
page footers. The settings of each row:
- Table 20 (Appendix B, p.87), "the benchmark configurations corresponding to the
  throughput results in Table 11": TP, PP, CP, EP, VPP, MBS, GBS (``HYPER``);
- Appendix B.2 (p.87), "Key Optimizations": per model and platform the dispatcher, the
  recompute modules, the 1F1B all-to-all overlap and the CUDA-graph scopes
  (``OPTIMIZATIONS``; an item B.2 states without a platform applies to every row of the
  model, a platform B.2 leaves out of a list has none of it);
- Tables 17 and 18 (sec. 9.2.1, p.74), DeepSeek-V3's "final optimized configurations" on
  GB200 and H100 at 1048 and 368 TFLOPS/GPU - Table 11's GB200 MXFP8 and H100 FP8-BLK
  rows - and the pipeline layouts of sec. 9.2.2 (p.74-75) (``CASE_STUDY``).

The one rule (``RULE``), the same for every row: Table 20 and B.2 - the tables the paper
prints as Table 11's configurations - set what they state; Tables 17 / 18 and sec. 9.2.2
add what they state for the row they reprint (same model, platform, precision and
TFLOPS/GPU) where Table 20 and B.2 are silent, and yield where they disagree; a pipeline
layout is taken only where it has the row's PP x VPP stages (``BridgeRow.layout``'s own
rule). Every setting the paper leaves unstated is what ``ledger.render.bridge`` gives a
Megatron-Bridge performance row that names nothing (B.3, p.87-88, names Megatron-Bridge's
scripts/performance as the workflow that reproduces Table 11): the distributed optimizer,
BF16 gradient reduction, DeepSeek-V3's BF16 Adam moments, TE's cross-entropy, overlapped DP
reduction and gather, the 128 Mi-parameter DP bucket, NVLS off, HybridEP's 32 SMs, and
the precision's Megatron-Bridge function (``PRECISION``): every MXFP8 row - Table 11's and
Table 5's (``ledger.validation.memory_mcore``) - runs ``bf16_with_mxfp8_mixed``,
``fp8_param_gather`` and ``reuse_grad_buf_for_mxfp8_param_ag`` on (Megatron-Bridge
src/megatron/bridge/training/mixed_precision.py L255-266 @067f987d), as the report's own
launch script sets them for MXFP8 (yanring/Megatron-MoE-ModelZoo@020b8136
sbatch_benchmarking.sh L98-101, kept in tests/fixtures/modelzoo: ``--fp8-param-gather
--reuse-grad-buf-for-mxfp8-param-ag`` without optimizer CPU offload). The paper does not
contradict it: B.2 and Table 20 are silent, Table 18 states FP8 primary weights for the
two rows it reprints (GB200 MXFP8 and H100 FP8-BLK), and sec. 5.2.2 (p.49) has MXFP8's
parameter all-gather in BF16 - the gradient buffer's BF16 gather the reuse flag names.
The paper's own disagreements this rule settles (``CONFLICTS``): DeepSeek-V3 on H100 runs
Table 20's TP2 PP4 EP64 (DP 128), not Table 17's PP8, and B.2's recompute ``up_proj, mlp``,
not Table 17's ``mlp, mla_up_proj, moe_act, layernorm``; so sec. 9.2.2's 32-stage H100
layout (PP 8 x VPP 4) does not apply to its PP 4 x VPP 4, which takes Megatron-Bridge's
16-stage layout - the same string sec. 9.2.2 prints for GB200.
Stated by the paper but not priced by the ledger (``UNPRICED``): optimizer-state offload
(Table 18, DeepSeek-V3 GB200: Megatron's --offload-optimizer-states, Table 13 p.72, not the
HybridDeviceOptimizer the ledger prices), activation offload (sec. 8.1, p.68: "activation &
optimizer state offloading") on every row but the one Table 5 reprints (``OFFLOAD``: GB200
Qwen3-235B MXFP8, --offload-modules moe_act by sec. 4.1.5's one stated pairing), and the MoE
paged stash.
"""
from __future__ import annotations

from ledger.validation.bridge import BridgeRow
from ledger.validation.bridge_cells import _stages

SOURCE = {"repo": "AICO-Ascend/AICO-Knowledge",
          "commit": "14bb8fb48ba5696564c8aedc4da2b18dc21d5bb8",
          "path": "extraction/fulltext/"
                  "scalable-training-of-mixture-of-experts-models-with-megatron-core.txt",
          "title": "Scalable Training of Mixture-of-Experts Models with Megatron Core",
          "arxiv": "2603.07685v2"}
RELEASE = "mcore-2603.07685"
# Table 11 (p.69): model, system, #GPUs, seqlen, dtype, per-GPU TF, tokens/s/GPU - as printed
PUBLISHED = (
    ("deepseek-v3", "gb300", 256, 4096, "MXFP8", 1233, 4730),
    ("deepseek-v3", "gb200", 256, 4096, "MXFP8", 1048, 4020),
    ("deepseek-v3", "gb200", 256, 4096, "BF16", 857, 3298),
    ("deepseek-v3", "h100", 1024, 4096, "FP8-BLK", 368, 1412),
    ("qwen3-235b-a22b", "gb300", 256, 4096, "MXFP8", 974, 6583),
    ("qwen3-235b-a22b", "gb200", 256, 4096, "MXFP8", 919, 6212),
    ("qwen3-235b-a22b", "gb200", 256, 4096, "BF16", 750, 5100),
    ("qwen3-235b-a22b", "h100", 256, 4096, "BF16", 320, 2132),
    ("qwen3-235b-a22b", "gb300", 128, 131072, "MXFP8", 1150, 1556))
TABLE_11_PAGE, TABLE_20_PAGE, TABLE_17_PAGE = 69, 87, 74
# Table 20 (p.87), in Table 11's order: TP PP CP EP VPP MBS GBS
HYPER = ((1, 4, 1, 64, 4, 1, 8192), (1, 4, 1, 64, 4, 1, 8192), (1, 8, 1, 32, 4, 1, 4096),
         (2, 4, 1, 64, 4, 1, 8192), (1, 4, 1, 64, 6, 2, 3072), (1, 4, 1, 64, 6, 3, 3072),
         (1, 4, 1, 32, 12, 1, 8192), (2, 8, 1, 32, 4, 1, 2048), (4, 4, 4, 32, 12, 1, 1024))
# expert TP 1 on every row: Parallel Folding, "TP applies to the non-MoE modules only, expert
# TP is always 1" (Table 17's note, p.74), as sec. 9.1.2's Guideline 4 sets it (p.72)
ETP = 1
DTYPE = {"MXFP8": "fp8_mx", "FP8-BLK": "fp8_sc", "BF16": "bf16"}
# the precision's Megatron-Bridge function where the paper states nothing (RULE):
# bf16_with_mxfp8_mixed, mixed_precision.py L255-266 @067f987d; ModelZoo@020b8136
# sbatch_benchmarking.sh L98-101 sets the same two flags for MXFP8
PRECISION = {"MXFP8": {"fp8_param_gather": True, "reuse_grad_buf_for_mxfp8_param_ag": True}}
GRAPH_SCOPE = ("attn", "moe_router", "moe_preprocess")
# Appendix B.2 (p.87) by (model, platform): flex backend, recompute modules, 1F1B A2A
# overlap, CUDA-graph scopes. "up_proj" is Megatron's mla_up_proj (Table 17's name for it).
OPTIMIZATIONS = {
    ("deepseek-v3", "gb300"): ("hybridep", (), True, GRAPH_SCOPE),
    ("deepseek-v3", "gb200"): ("hybridep", ("mlp",), False, GRAPH_SCOPE),
    ("deepseek-v3", "h100"): ("deepep", ("mla_up_proj", "mlp"), True, ()),
    ("qwen3-235b-a22b", "gb300"): ("hybridep", (), False, GRAPH_SCOPE),
    ("qwen3-235b-a22b", "gb200"): ("hybridep", ("moe_act", "layernorm"), True, GRAPH_SCOPE),
    ("qwen3-235b-a22b", "h100"): ("deepep", ("moe_act", "layernorm"), True, GRAPH_SCOPE)}
# Tables 17 / 18 (p.74) and sec. 9.2.2's layouts (p.74-75): the two rows they reprint,
# (model, platform, dtype, TF/GPU) -> what they state beyond Table 20 and B.2
CASE_STUDY = {
    ("deepseek-v3", "gb200", "MXFP8", 1048): {
        "fp8_param_gather": True,  # Table 18: FP8 primary weights
        "pp_layout": "Et*4|(tttt|)*14tmL",  # sec. 9.2.2, p.75
        "unpriced": ("optimizer-state offload (Table 18) not priced",)},
    ("deepseek-v3", "h100", "FP8-BLK", 368): {
        "fp8_param_gather": True,  # Table 18: FP8 primary weights
        "pp_layout": "Et*3|(tt|)*29m|L"}}  # sec. 9.2.2, p.74: 32 stages (Table 17's PP 8)
# Table 5 (sec. 4.1.5, p.25) reprints one more row: "Qwen3-235B, TP2->TP1 + EP16->EP64",
# "+Offload", 175 GB at 920 TF/s - Table 11's GB200 Qwen3-235B MXFP8 run (TP1, EP64, 919
# TF/s; the paper rounds). Its offloaded modules are not named; the one pairing sec. 4.1.5
# states ("For moe_act, both strategies apply: recompute the activation while offloading its
# input", p.25) is the one a row whose B.2 recompute list holds moe_act takes: Megatron's
# --offload-modules moe_act, the activation's input offloaded, the activation recomputed
# (ledger.placement.act_offload). This reading was chosen with the row's priced peaks in view
# (without offload 235.3 GiB, 'does NOT fit'; expert_fc1 + moe_act 136.9; with core_attn and
# attn_proj too 105.0; every module 90.2; moe_act 177.0 against Table 5's 175 GB - priced
# then with BF16 params, before the rule took the MXFP8 function's FP8 param gather), so
# Table 5's figure for it is no prediction (ledger.validation.memory_mcore: role "chosen").
OFFLOAD = {("qwen3-235b-a22b", "gb200", "MXFP8", 919): {
    "offload_modules": ["moe_act"], "measured_gb": 175, "table": 5, "page": 25}}
# where Table 17 disagrees with Table 20 / B.2 (Table 20 / B.2 win: RULE)
CONFLICTS = {
    ("deepseek-v3", "h100", "FP8-BLK", 368): {
        "pp": {"table 20": 4, "table 17": 8},
        "recompute_modules": {"B.2": ["mla_up_proj", "mlp"],
                              "table 17": ["mlp", "mla_up_proj", "moe_act", "layernorm"]}}}
# stated for every row, priced by none: sec. 8.1 (p.68) names activation offload in the
# stack without a row
UNPRICED = ("activation offload (sec. 8.1) not priced beyond Table 5's row",)
# The paper's "GB", one reading for all its memory figures (Tables 3-5, secs. 4.1.2-4.1.3,
# 4.1.6): 2^30 B, the unit Megatron-LM's report_memory prints its figures in (MiB labelled
# "MB": mega_bytes = 1024 x 1024, megatron/training/utils/common_utils.py L320-321 @d98e8a64)
# - the paper does not say; a GiB reading is what a figure copied from those logs means.
GB = 2**30
# Sec. 4.1 (p.20-25): DeepSeek-V3's memory per GPU at Table 3's "BF16 training (PP4 x VPP4
# x EP64, 256 GPUs)" and what each technique takes off it, as printed (in ``GB``) - (what, GB, where, page, which bytes: the step's "peak" allocation or
# the saved "activations"). Whether they were measured or estimated is not stated.
MEMORY = (("activations, none of Table 3's remedies", 131.0, "Table 3", 20, "activations"),
          ("recompute mla_up_proj", 30.4, "Table 4", 24, "peak"),
          ("recompute moe_act", 3.8, "Table 4", 24, "peak"),
          ("recompute layernorm", 8.2, "Table 4", 24, "peak"),
          ("recompute all three", 42.4, "Table 4", 24, "peak"),
          ("memory-efficient permutation", 26.3, "sec. 4.1.2", 21, "activations"),
          ("FP8 activations", 16.0, "sec. 4.1.3", 22, "activations"))
MEMORY_RULE = ("Table 3's configuration is Table 17's GB200 column (TP1/PP4/EP64, VPP4, "
               "GBS 8192 / MBS 1 / seq 4096, 256 GB200; p.74) - Table 11's GB200 DeepSeek-V3 "
               "MXFP8 row as RULE sets it - in BF16 (Table 3) and without the row's B.2 "
               "memory optimizations (recompute, CUDA graphs): Table 3 is the footprint "
               "'without optimization' (p.20), memory-efficient permutation read as on in "
               "the baseline (Megatron-Core's only formulation; sec. 4.1.2's 26.3 GB is priced "
               "apart). Each figure is the ledger's difference on the peak rank, in the bytes "
               "the paper names, its GB read as GB (2^30 B).")
RULE = ("Table 20 and Appendix B.2 (p.87) set what they state; Tables 17/18 and sec. 9.2.2 "
        "(p.74-75) add what they state for the row they reprint (same model, platform, "
        "precision and TFLOPS/GPU) where Table 20 and B.2 are silent, and yield where they "
        "disagree; a layout applies only at the row's PP x VPP stages; every unstated "
        "setting is ledger.render.bridge's for a Megatron-Bridge perf row naming nothing, "
        "its precision's settings Megatron-Bridge's function's (MXFP8: FP8 param gather "
        "through the reused gradient buffer).")


def precision_settings(dtype: str, case: dict | None = None) -> dict:
    """A row's mixed-precision settings under ``RULE``: what Table 18 states for the row it
    reprints (``CASE_STUDY``: FP8 primary weights) first, then ``PRECISION``'s
    Megatron-Bridge function for the row's published precision."""
    out = dict(PRECISION.get(dtype, {}))
    if (case or {}).get("fp8_param_gather"):
        out["fp8_param_gather"] = True
    return out


def _cell(value) -> str:
    return ",".join(value) if isinstance(value, list) else str(value)


def _settings(model: str, gpu: str) -> dict:
    backend, recompute, overlap, graphs = OPTIMIZATIONS[(model, gpu)]
    out = {"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": backend,
           "moe_a2a_overlap": overlap, "recompute_modules": list(recompute)}
    if recompute:
        out["recompute_granularity"] = "selective"
    if graphs:  # Table 15 (p.73): --cuda-graph-impl transformer_engine
        out |= {"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": list(graphs)}
    return out


def rows() -> tuple[BridgeRow, ...]:
    """Table 11's nine runs as Megatron-Bridge-style rows (``RULE``)."""
    out = []
    for (model, gpu, gpus, seq, dtype, tf, tok), hyper in zip(PUBLISHED, HYPER):
        tp, pp, cp, ep, vp, mbs, gbs = hyper
        key = (model, gpu, dtype, tf)
        case = CASE_STUDY.get(key, {})
        settings = _settings(model, gpu)
        if "pp_layout" in case and _stages(case["pp_layout"]) == pp * (vp or 1):
            # a layout of another placement (sec. 9.2.2's 32 stages are Table 17's PP 8)
            # is not the run's: Table 20's sizes win (RULE), and no cell rule reads it
            settings["pp_layout"] = case["pp_layout"]
        if key in OFFLOAD:  # Table 5's row (OFFLOAD)
            settings |= {"fine_grained_activation_offloading": True,
                         "offload_modules": list(OFFLOAD[key]["offload_modules"])}
        precision = DTYPE[dtype]
        prec = precision_settings(dtype, case)
        notes = list(UNPRICED) + list(case.get("unpriced", ()))
        notes += [f"Table 17's {k} {_cell(v['table 17'])} set aside for "
                  f"{_cell(next(x for s, x in v.items() if s != 'table 17'))}"
                  for k, v in CONFLICTS.get(key, {}).items()]
        out.append(BridgeRow(
            id=f"{RELEASE}/{gpu}/{model}/{precision}/{gpus}g/seq{seq}", release=RELEASE,
            table_model=model, model=model, model_variant=None, system=gpu, gpu=gpu,
            gpus=gpus, precision_published=dtype, precision=precision, gbs=gbs, mbs=mbs,
            seq_len=seq, tp=tp, pp=pp, cp=cp, vp=vp, ep=ep, etp=ETP, fsdp=False, ga=None,
            tokens_per_s_per_gpu=float(tok), model_tflops_per_gpu=float(tf),
            published_as="figure", notes=notes,
            source={**SOURCE, "table": 11, "page": TABLE_11_PAGE,
                    "settings": f"Table 20 and B.2, p.{TABLE_20_PAGE}"
                                + (f"; Tables 17/18, p.{TABLE_17_PAGE}" if case else "")},
            recipe={"ref": f"arXiv {SOURCE['arxiv']}", "settings": settings,
                    "precision": {"settings": prec}}))
    return tuple(out)


def router_flops_per_token(model) -> float:
    """The router's GEMM FLOPs per token, forward and backward: 6 x hidden x experts per MoE
    layer of the main stack - a term the ledger's model FLOPs count
    (``ledger.arch.flops.layer_matmul_params``) and Megatron's do not."""
    moe = sum(n for k, n in model.kind_counts.items() if k.mlp == "moe")
    return 6.0 * model.hidden * model.num_experts * moe


def mtp_flops_per_token(model) -> float:
    """One token's FLOPs in the MTP depths as Megatron-Core counts them
    (``num_floating_point_operations``, megatron/training/training.py L354-358, L552-572 at
    core_v0.16.1, 55ac7082): per depth its layer (the stack's last kind, routed experts
    without the router), its eh projection (2h x h), and one more output head; the
    attention core as the stack's (causal, s / 2 keys). Norms are left out (3h a depth)."""
    from ledger.anatomy.counts import mtp_kinds
    from ledger.arch.flops import attention_flops_per_token, layer_matmul_params

    if not model.mtp_layers:
        return 0.0
    h = model.hidden
    layers = mtp_kinds(model)
    weights = sum(layer_matmul_params(model, k) - (h * model.num_experts if k.mlp == "moe"
                                                   else 0) for k in layers)
    core = attention_flops_per_token(model) / max(model.attention_layers, 1)
    per_depth = 6.0 * (weights + 2 * h * h + model.vocab * h) \
        + core * sum(1 for k in layers if k.attention)
    return model.mtp_layers * per_depth


def megatron_flops_per_token(model) -> float:
    """The FLOPs per token Megatron-Core's throughput figure counts, from the ledger's own
    model FLOPs (``ledger.arch.flops.model_flops_per_token``, the MFU numerator of
    ``ledger.step.estimate``): the router taken out, the MTP depths added. Both count
    causal attention over s / 2 keys."""
    from ledger.arch.flops import model_flops_per_token

    return model_flops_per_token(model) - router_flops_per_token(model) \
        + mtp_flops_per_token(model)


def other_reading() -> BridgeRow:
    """The H100 DeepSeek-V3 row as ``RULE`` sets it aside: Table 17's PP 8 (DP 64) and its
    four recompute modules, with sec. 9.2.2's 32-stage layout, which that PP x VPP takes
    ("allows TP1/PP4 instead of TP2/PP8", p.74, says the same). Shown beside the row,
    never summed with the prediction rows."""
    from dataclasses import replace

    row = next(r for r in rows() if r.gpu == "h100" and r.model == "deepseek-v3")
    clash = CONFLICTS[("deepseek-v3", "h100", "FP8-BLK", 368)]
    settings = dict(row.recipe["settings"],
                    recompute_modules=list(clash["recompute_modules"]["table 17"]),
                    pp_layout=CASE_STUDY[("deepseek-v3", "h100", "FP8-BLK", 368)]["pp_layout"])
    return replace(row, id=row.id + "/table-17", pp=clash["pp"]["table 17"],
                   notes=["Table 17's reading (RULE sets it aside)"],
                   recipe={**row.recipe, "settings": settings})
