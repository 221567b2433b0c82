"""Megatron-Bridge's published pre-training rows (``ledger.validation.bridge``) run through
the ledger: each row's memory verdict on the path ``train-ledger report`` takes (``place`` and
the GPU's HBM: fits / does NOT fit, peak GiB) and its step time on the path
``train-ledger estimate`` takes (``ledger.step.estimate``), against the published
tokens/s/GPU; a table by GPU, dense / MoE and family, with a summary line per group.

How a row becomes a run - one rule for every row, never chosen per row and never looking at
the measured figure:
- model: the preset or config.json ``ledger.validation.bridge`` names, at the row's sequence
  length; DeepSeek-V3 "(w/o MTP)" without its MTP module.
- placement: the table's TP, PP, CP, VP, EP, GBS, MBS (the table wins over the recipe,
  ``bridge.rule()``); DP = GPUs / (TP x PP x CP); ETP from the recipe (None: Megatron's
  default, TP). Framework megatron; the distributed optimizer (ZeRO-1) as Megatron-Bridge's
  recipes set it (recipes/common.py:87 @ v0.5.1, ``use_distributed_optimizer=True``), or
  Megatron FSDP (ZeRO-3) where the table says FSDP; SP when TP > 1 (the perf recipes'
  ``sequence_parallel = tp > 1``, scripts/performance/utils/utils.py WorkloadBaseConfig).
- layers per stage: the recipe's pipeline layout when it has PP x VP stages, else
  Megatron-Bridge's layout map for DeepSeek-V3 / Kimi-K2 (``BridgeRow.layout``), else the
  framework's even split.
- recompute (``bridge_launch.recompute_of``): ``recompute_num_layers`` n -> full of the
  first n layers of each chunk (method block, or unset), in groups of n under method
  uniform; granularity "full" -> full; ``recompute_modules`` non-empty -> selective with
  those modules; granularity "selective" with no modules named -> selective (Megatron-Core's
  default module, core_attn); an empty module list -> none.
- dropout 0 (Megatron-Bridge's GPTModelProvider, gpt_provider.py L380 @v0.4.1, and each
  model bridge); the perf recipes' BF16 gradient reduction and a model's own state dtypes
  (``RECIPE_STATE``).
- recipe settings (with what a release's launcher sets beyond them,
  ``ledger.validation.bridge_scripts``): ``moe_flex_dispatcher_backend``
  (deepep / hybridep) -> the flex dispatcher, ``moe_permute_fusion_into_hybridep`` ->
  HybridEP's permutation in its kernels (ledger.step.eager); ``moe_a2a_overlap`` -> EP overlap;
  ``fp8_output_proj`` (``bridge_launch.fp8_output_proj``) -> the LM head in MXFP8.
- precision: BF16 -> the framework's dtypes; FP8-CS -> TE current scaling ("tensorwise");
  DeepSeek-style 128x128 blockwise -> "blockwise"; MXFP8 -> the "mxfp8" recipe where the
  ledger has one, else "blockwise" (block-scaled FP8 at the FP8 rate, scales per 128 not per
  32: marked approximate); NVFP4 -> "fp4-nvfp4" where the ledger has it, else the row is
  listed as 'precision missing'. The recipe's ``fp8_param_gather`` / ``fp4_param_gather``
  and BF16 first / last layers (``BridgeRow.precision_setting``: Megatron-Bridge's
  mixed_precision.py function with the perf script's overrides) are applied where the ledger
  prices them, else named in ``approx``.
- system: the GPU's preset (``ledger.system.system``); a GPU without one is listed as
  'preset missing' (b300 / gb200 / gb300 land with the Blackwell systems).
What a row's recipe sets that the ledger does not price (CUDA graphs, activation offload,
MXFP8 scale layout) is named in its ``approx`` list.
"""
from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache

from ledger.config import OFFLOAD_MODULES, MoESpec, ParallelConfig
from ledger.errors import LedgerError
from ledger.frameworks.dsa_loss import of_megatron as dsa_loss_of
from ledger.frameworks.paged_stash import of_megatron as paged_stash_of
from ledger.render.bridge_launch import (PERF_STATE, RECIPE_STATE,  # noqa: F401
                                        TP_OVERLAP_MODELS, ep_sms_of, expandable_segments,
                                        fp8_output_proj, fsdp_double_buffer,
                                        grad_accumulation_fusion, graph_impl, graph_scopes,
                                        loss_of, overlap_param_gather, recompute_of,
                                        shared_expert_overlap, tp_overlap)
from ledger.render.bridge_pairs import (PAIRS, RELEASES, Outcome, mbs_lines,  # noqa: F401
                                       mbs_pairs, ratio_lines, ratios)  # (re-exported)
from ledger.validation.bridge import (LACKS, MTP_BF16, PRESET, QUANT_FILES, READ_AS,
                                     RECIPE_MTP, WITH, BridgeRow, config_text, rows)

GIB = 2**30
REGRESSION_NOTE = "github.com/NVIDIA/cudnn-frontend/issues/256"  # ledger.step.eager
GPU_PRESET = {"h100": "h100-sxm", "b200": "b200", "b300": "b300", "gb200": "gb200",
              "gb300": "gb300"}
FAMILY = {"llama3-8b": "llama3", "llama3-70b": "llama3", "llama3.1-405b": "llama3",
          "deepseek-v3": "deepseek-v3", "kimi-k2": "kimi-k2", "qwen3-30b-a3b": "qwen3-moe",
          "qwen3-235b-a22b": "qwen3-moe", "gpt-oss-120b": "gpt-oss",
          "nemotron-3-nano": "nemotron-3", "nemotron-3-super": "nemotron-3",
          "nemotron-3-ultra": "nemotron-3", "nemotron-3.5-lightning": "nemotron-3",
          "deepseek-v4-flash": "deepseek-v4"}


def model_of(row: BridgeRow):
    from ledger.model import preset

    if row.model in LACKS:
        raise _Skip("model lacks", LACKS[row.model])
    if row.model in PRESET:
        spec = preset(PRESET[row.model])
    else:
        spec = _config_spec(row.model)
    spec = replace(spec, seq_len=row.seq_len)
    if row.model_variant == "w/o MTP":
        spec = replace(spec, mtp_layers=0)
    elif spec.mtp_layers:
        spec = replace(spec, **mtp_of(row, spec))
    return spec


def mtp_of(row: BridgeRow, spec) -> dict:
    """The MTP depths the row's recipe runs: its own mtp_num_layers and
    mtp_use_repeated_layer, else its family's library recipe's (``RECIPE_MTP``), else the
    model's own."""
    depth, shared = RECIPE_MTP.get(row.model, (spec.mtp_layers, spec.mtp_shared))
    depth = row.setting("mtp_num_layers", depth)
    shared = row.setting("mtp_use_repeated_layer", shared)
    return {"mtp_layers": int(depth), "mtp_shared": bool(shared)}


@lru_cache(maxsize=None)
def _config_spec(model: str):
    from ledger.io.hf import spec_from_dict

    cfg = json.loads(config_text(model)) | WITH.get(model, {})
    if model in READ_AS:
        cfg["model_type"] = READ_AS[model]
    return spec_from_dict(cfg, model)


class _Skip(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def precision_of(row: BridgeRow) -> tuple[str | None, tuple[str, ...]]:
    """The ledger precision string of a row's precision as its recipe ran it (the module's
    rule): the recipe, its param gather, its BF16 first / last layers."""
    from ledger.frameworks.fp8 import RECIPES

    offered = RECIPES["megatron"]
    if row.precision == "bf16":
        return None, ()
    quant = "".join(f"+quant-{QUANT_FILES[key]}" for key in [(row.model, row.precision)]
                    if key in QUANT_FILES)
    # its modules' memory and their GEMMs' peaks are priced (ledger.step.gemm._peaks)
    approx: list[str] = []
    width, name = {"fp8_cs": ("fp8", "tensorwise"), "fp8_sc": ("fp8", "blockwise"),
                   "fp8_mx": ("fp8", "mxfp8"), "nvfp4": ("fp4", "nvfp4")}[row.precision]
    if name not in offered:
        if row.precision == "nvfp4":
            raise _Skip("precision missing", "NVFP4: the ledger has no NVFP4 recipe")
        approx.append("MXFP8 priced as FP8 blockwise (no mxfp8 recipe)")
        name = "blockwise"
    base = f"{width}-{name}"
    gather = bool(row.precision_setting(f"{width}_param_gather", False))
    ends = ""
    if row.precision_setting("first_last_layers_bf16", False):
        ends = (f"+bf16-ends-{row.precision_setting('num_layers_at_start_in_bf16', 1)}-"
                f"{row.precision_setting('num_layers_at_end_in_bf16', 1)}")
    pg = "+param-gather" if gather else ""
    # the family's quantization file (module_formats), keep_mtp_spec_in_bf16 (bf16_layers)
    ends = quant + "+bf16-mtp" * (row.model in MTP_BF16) + ends
    lost_ends = ["BF16 first / last layers not priced"] if ends else []
    lost_pg = ["param gather in the low format not priced"] if gather else []
    for extra, lost in ((pg + ends, []), (pg, lost_ends), ("", lost_ends + lost_pg)):
        try:
            _recipe_check(base + extra)
        except LedgerError:
            continue
        return base + extra, tuple(approx + lost)
    return base, tuple(approx + lost_ends + lost_pg)


def _recipe_check(precision: str) -> None:
    from ledger.frameworks.fp8 import recipe

    recipe("megatron", precision)


def config_of(row: BridgeRow, precision: str | None,
              model=None) -> tuple[ParallelConfig, tuple[str, ...]]:
    approx = []
    kw = dict(tp=row.tp, pp=row.pp, cp=row.cp, dp=row.dp, ep=row.ep, etp=row.etp,
              zero_stage=3 if row.megatron_fsdp else 1, sequence_parallel=row.tp > 1,
              micro_batch=row.micro_batch, num_microbatches=row.num_microbatches, vp=row.vp or 1,
              framework="megatron", precision=precision, cublas_workspace_bytes=row.torch_ws(),
              **RECIPE_STATE.get(row.model, PERF_STATE),
              dropout=0.0,  # GPTModelProvider hidden_dropout 0.0 (gpt_provider.py L380)
              expandable_segments=expandable_segments(row),
              grad_accumulation_fusion=grad_accumulation_fusion(row),
              fsdp_double_buffer=fsdp_double_buffer(row)) | recompute_of(row)
    lay = row.layout(model.mtp_layers) if model is not None and row.pp > 1 else None
    if lay is not None:
        from ledger.io import parse_layout

        split, vp = parse_layout(lay[0], row.pp, model.layers, model.mtp_layers)
        if vp == (row.vp or 1):
            kw["stage_layers"] = split
    if row.moe:
        if row.setting("moe_flex_dispatcher_backend") in ("deepep", "hybridep"):
            kw.update(moe_dispatcher="flex", ep_sms=ep_sms_of(row),
                      ep_backend=row.setting("moe_flex_dispatcher_backend"),
                      hybridep_permute_fusion=row.setting("moe_permute_fusion_into_hybridep")
                      is True)
        if row.setting("moe_a2a_overlap") is True:
            kw["ep_overlap"] = True
            kw["delay_wgrad"] = True  # set with it by the performance scripts
        # (scripts/performance/run_script.py L80-83 @ v0.1.0rc3, utils/helpers.py L183-186
        # @ v0.2.0, utils/overrides.py L150-153 @ v0.3.0)
        elif shared_expert_overlap(row, model, kw.get("moe_dispatcher")):
            kw["shared_expert_overlap"] = True
        if row.model_variant == "tokendrop":  # capacity 1.0, inputs padded to it
            # (Megatron-Bridge src/megatron/bridge/training/utils/moe_token_drop.py:18-21
            # @ v0.1.0rc3)
            kw["moe"] = MoESpec(pad_to_capacity=True)
    kw["cuda_graph"] = graph_scopes(row)
    kw["cuda_graph_local"] = graph_impl(row) == "local"
    # FP8 attention: the 0.5 workload configs' fp8_dot_product_attention (scripts/
    # performance/utils/overrides.py L244-245 @ v0.5.1: mixed_precision.fp8_dot_product_
    # attention), the 0.6 recipes' mixed_precision field (ledger.config.fp8_attention)
    if True in (row.setting("fp8_dot_product_attention"),
                row.precision_setting("fp8_dot_product_attention")):
        kw["fp8_attention"] = True
    # the LM head in MXFP8 (fp8_output_proj: ledger.frameworks.fp8_head); its MXFP8 copies
    # are not priced in memory
    if fp8_output_proj(row):
        kw["fp8_output_proj"] = True
        approx.append("the LM head's MXFP8 input and weight copies (fp8_output_proj) not "
                      "priced in memory")
    # the fused grouped MLP: the 0.5 configs' cutedsl_fused_grouped_mlp (op fuser and
    # NVTE_CUTEDSL_FUSED_GROUPED_MLP=1: utils/overrides.py L238-243, perf_plugins.py L308-309
    # @ v0.5.1), the 0.6 recipes' own (deepseek/common.py L70, gb300/deepseek_v3.py L177);
    # its dGLU kernel regressed where the row's table note names cudnn-frontend#256 (where
    # its release's TE fuses the recipe: validation.bridge_stack.fused_mlp_of)
    if row.fuses_mlp(precision):
        kw["fused_grouped_mlp"] = True
        kw["dglu_dbias_regression"] = any(REGRESSION_NOTE in n for n in row.notes)
    # the MoE recipes' paged stash of the experts' activations (ledger.frameworks.paged_stash)
    if row.moe:
        kw["paged_stash"] = paged_stash_of(row.setting("moe_paged_stash"),
                                           row.setting("moe_paged_stash_buffer_size_factor_cuda"),
                                           row.setting("moe_expert_rank_capacity_factor"))
    kw["loss"] = loss_of(row)
    # every release's perf launcher runs NCCL_NVLS_ENABLE=0 ("Disable NVLink SHARP to save
    # memory": scripts/performance/utils/executors.py L42 @v0.1.0rc3 ... L43 @v0.5.1)
    kw["nccl_nvls"] = False
    if row.dp > 1:  # Megatron-Bridge's CommOverlapConfig with DP > 1: both overlapped
        # (comm_overlap.py:527-545 @ v0.3.1) but where the function turns the gather off
        kw["overlap_grad_reduce"], kw["overlap_param_gather"] = True, overlap_param_gather(row)
        # and its DP bucket: 128 Mi parameters (comm_overlap.py:539-540 @ v0.3.1, the same
        # at every release v0.1.0rc3 to v0.6.0), unless the recipe sets its own
        own = row.setting("bucket_size")
        kw["dp_bucket_params"] = own if isinstance(own, int) and own > 0 else 128 * 1024 * 1024
    offload = row.setting("cpu_offloading_num_layers")
    if isinstance(offload, int) and offload > 0 and row.pp == 1 and "recompute" not in kw:
        kw["offload_activation_layers"] = offload  # Megatron's CPU activation offload
    if row.setting("fine_grained_activation_offloading") is True:
        mods = tuple(row.setting("offload_modules") or ())
        if mods and set(mods) <= set(OFFLOAD_MODULES) - {"all"}:  # ledger.placement.act_offload
            kw["offload_modules"] = mods
            kw["activation_offload_fraction"] = float(
                row.setting("activation_offload_fraction", 1.0))
            floor = row.setting("min_offloaded_tensor_size")  # Megatron keeps smaller tensors
            if isinstance(floor, int) and floor > 0:  # on the GPU; priced as offloaded
                approx.append(f"min_offloaded_tensor_size {floor:,} not priced (smaller "
                              f"tensors stay on the GPU)")
        else:
            approx.append(f"fine-grained activation offload of {','.join(mods)} not priced")
    if row.megatron_fsdp and row.setting("num_distributed_optimizer_instances") not in (None, 1):
        approx.append("HSDP (params and grads sharded per optimizer instance, the optimizer "
                      "across them) priced as FSDP over all DP")
    # DeepSeek-V4's indexer loss (ledger.frameworks.dsa_loss; its mla_up_proj recompute is
    # priced as the modules are: ledger.step.recompute.CSA_UP)
    kw["indexer_loss"] = dsa_loss_of(row.setting("dsa_indexer_loss_coeff"),
                                     row.setting("dsa_indexer_use_sparse_loss"))
    for name, what in (("cpu_offloading_num_layers", "activation offload of {} layers"),):
        if name == "cpu_offloading_num_layers" and "offload_activation_layers" in kw:
            continue
        v = row.setting(name)
        if v not in (None, "none", 0, False) and not str(v).startswith("expr:"):
            approx.append(what.format(v) + " not priced")
    return ParallelConfig(**kw), tuple(approx)


def system_of(row: BridgeRow):
    from ledger.system import GPUS, system

    name = GPU_PRESET[row.gpu]
    if name not in GPUS:
        raise _Skip("preset missing", f"no GPU preset {name!r}")
    return system(name)


def outcome(row: BridgeRow, cal=None) -> Outcome:
    """The row through ``report``'s memory path and ``estimate``'s time path (the time
    model's constants ``cal``, default the shipped ones)."""
    from ledger.placement import Capacity
    from ledger.step import estimate

    row = row.as_run()  # cells read as copied from a sibling line take the recipe's
    try:
        model = model_of(row)
        sysm = system_of(row)
        prec, approx1 = precision_of(row)
        cfg, approx2 = config_of(row, prec, model)
        est = estimate(model, cfg, sysm, precision=prec, optimizer="adam",
                       tp_overlap=tp_overlap(row),
                       **({} if cal is None else {"cal": cal}))
        # report's verdict: its placement is place(model, cfg, precision, optimizer, the
        # system's hosts and domain) - the one estimate builds - against the whole HBM
        pl = est.placement
        room = Capacity(sysm.gpu.name, sysm.gpu.hbm_bytes, host_bytes=sysm.host_memory_bytes)
    except _Skip as s:
        return Outcome(row, s.status, s.reason)
    except LedgerError as e:
        return Outcome(row, "cannot run", str(e))
    need = max(m.required_bytes for m in pl.memory_by_rank)  # report's verdict, every rank
    crit = min(m.critical_share(room.usable_bytes) for m in pl.memory_by_rank)
    return Outcome(row, "ran", fits=bool(need <= room.usable_bytes), peak_bytes=float(need),
                   capacity_bytes=room.usable_bytes, critical_share=crit,
                   tokens_per_s_per_gpu=float(est.tokens_per_s_per_gpu), approx=approx1 + approx2)


@lru_cache(maxsize=4)
def outcomes(cal=None) -> tuple[Outcome, ...]:
    return tuple(outcome(r, cal) for r in rows())


def _summary(label: str, outs: list[Outcome]) -> str:
    ran = [o for o in outs if o.status == "ran"]
    errs = [o.error for o in ran if o.error is not None]
    fit = sum(1 for o in ran if o.fits)
    if errs:
        mean = sum(abs(e) for e in errs) / len(errs)
        signed = sum(errs) / len(errs)
        worst = max(errs, key=abs)
        err = f"mean |error| {mean:6.1%}  signed {signed:+6.1%}  max {worst:+7.1%}  n {len(errs):3d}"
    else:
        err = f"{'no prediction':<52}"
    return f"  {label:<24}{err}   fits {fit} of {len(ran)}   ({len(outs) - len(ran)} not run)"


def bridge_table(out: list[Outcome] | None = None) -> str:
    """Every row (by GPU, then dense / MoE, then release), then the summary lines."""
    out = list(outcomes() if out is None else out)
    kind = {o.row.id: "MoE" if o.row.moe else "dense" for o in out}
    lines = [f"{'row':<58}{'published':>10}{'predicted':>10}{'error':>8}  "
             f"{'memory (report)':<32}notes"]
    order = ("h100", "b200", "b300", "gb200", "gb300")
    key = (lambda o: (order.index(o.row.gpu), kind[o.row.id], FAMILY[o.row.model], o.row.id))
    for o in sorted(out, key=key):
        r = o.row
        pub = f"{r.tokens_per_s_per_gpu:,.0f}" if r.tokens_per_s_per_gpu else "-"
        if o.status != "ran":
            lines.append(f"{r.id:<58}{pub:>10}{'':>10}{'':>8}  {o.status}: {o.reason}")
            continue
        err = f"{o.error:+.1%}" if o.error is not None else "-"
        mem = (f"{'fits' if o.fits else 'does NOT fit'} {o.peak_bytes / GIB:.1f} of "
               f"{o.capacity_bytes / GIB:.0f} GiB")
        note = "; ".join({"prediction": [], "calibration": ["calibration"]}.get(
            r.role, ["measured under its table's declared regression"]) + list(o.approx))
        lines.append(f"{r.id:<58}{pub:>10}{o.tokens_per_s_per_gpu:>10,.0f}{err:>8}  "
                     f"{mem:<32}{note}")
    lines.append("")
    lines.append("summary (error = (predicted - published) / published tokens/s/GPU; fits: "
                 "judged to fit on report's path, of the rows that ran)")
    groups: dict[str, list[Outcome]] = {"all": out}
    for o in out:  # the declared calibration rows apart (bridge.CALIBRATION_RELEASE)
        groups.setdefault(o.row.role, []).append(o)
    for o in out:
        if o.row.role == "prediction":
            groups.setdefault(f"prediction {kind[o.row.id]}", []).append(o)
    for o in out:
        groups.setdefault(f"gpu {o.row.gpu}", []).append(o)
    for o in out:
        groups.setdefault(kind[o.row.id], []).append(o)
    for o in out:
        groups.setdefault(f"{o.row.gpu} {kind[o.row.id]}", []).append(o)
    for o in out:
        groups.setdefault(f"family {FAMILY[o.row.model]}", []).append(o)
    lines += [_summary(k, v) for k, v in groups.items()]
    errs = [abs(o.error) for o in groups.get("prediction", []) if o.error is not None]
    lines.append(f"  prediction rows beyond 15%: {sum(e > 0.15 for e in errs)} of {len(errs)}, "
                 f"beyond 25%: {sum(e > 0.25 for e in errs)} of {len(errs)}")
    lines += [""] + ratio_lines(out) + [""] + mbs_lines(out) + [""] + oom_lines()
    return "\n".join(lines)


def oom_lines() -> list[str]:
    """The placements the tables say did not fit (``bridge.did_not_fit``), judged."""
    from ledger.validation.bridge import did_not_fit

    out = ["placements the tables say did not fit (out of memory), as report judges them"]
    for r in did_not_fit():
        o = outcome(r)
        verdict = o.reason if o.status != "ran" else (
            f"{'fits (wrong)' if o.fits else 'does NOT fit (right)'} "
            f"{o.peak_bytes / GIB:.1f} of {o.capacity_bytes / GIB:.0f} GiB; calibration: "
            "it bounds the allocator's unreturnable share (benchmarks/fit_memory.py)")
        out.append(f"  {r.id:<68}{verdict}")
    return out
