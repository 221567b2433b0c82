"""Text and JSON views of the ledger. The only module that formats units.

Bytes are binary: KiB = 2^10 B, MiB = 2^20 B, GiB = 2^30 B, TiB = 2^40 B.

>>> fmt_bytes(570425344)
'544.00 MiB'
>>> fmt_bytes(0)
'0.00 B'
"""
from __future__ import annotations

from dataclasses import asdict, fields

from ledger.frameworks import of as framework_of
from ledger.render.layout import domain_line, domains_json
from ledger.render.units import UNITS, fmt_bytes  # noqa: F401  (re-exported)
from ledger.render.tuned import finetune_dict, finetune_lines, offload_dict, offload_lines

def _state_line(label: str, st) -> str:
    return (f"  {label:<20}params {fmt_bytes(st.params_bytes, 8)}  grads "
            f"{fmt_bytes(st.grads_bytes, 8)}  optim {fmt_bytes(st.optim_bytes, 8)}  "
            f"total {fmt_bytes(st.total_bytes, 8)}")


def _seq(model) -> str:
    """``s=4096``, saying so when it is the ledger's default rather than the user's."""
    return f"s={model.seq_len}" + (", default; --seq to set" if model.seq_default else "")


def params_lines(model) -> list[str]:
    """Total and active (per token) parameters, and the count by component."""
    b = 1e9
    where = f"1 MTP block run {model.mtp_layers} deep" if model.mtp_shared and \
        model.mtp_layers > 1 else f"{model.mtp_layers} MTP module(s)"
    mtp = (f"; + {model.mtp_params / b:.2f} B in {where}, not in the total") \
        if model.mtp_params else ""
    parts = ", ".join(f"{k} {v / b:.2f} B" if v >= 1e7 else f"{k} {v / 1e6:.2f} M"
                      for k, v in model.breakdown.items() if v)
    return [f"  {'params':<20}{model.params / b:.2f} B total, {model.active_params / b:.2f} B "
            f"active{mtp}", f"  {'':<20}({parts})"]


def params_dict(model) -> dict:
    return {"params": model.params, "active_params": model.active_params,
            "mtp_params": model.mtp_params}


def config_line(model, cfg) -> str:
    sp = "on" if cfg.sequence_parallel else "off"
    extra = f" vp={cfg.vp}" if cfg.vp > 1 else ""
    extra += f" hsdp_shard={cfg.hsdp_shard}" if cfg.hsdp_shard else ""
    extra += f" cp_kind={cfg.cp_kind}" if cfg.cp > 1 else ""
    extra += f" recompute={cfg.recompute}" if cfg.recompute != "none" else ""
    extra += " grad_accumulation=unsharded" if cfg.grad_accumulation != "sharded" else ""
    extra += f" finetune={cfg.finetune.method}" if getattr(cfg, "finetune", None) else ""
    extra += f" offload={cfg.offload}" if getattr(cfg, "offload", "none") != "none" else ""
    extra += _moe_extra(model, cfg)
    return (f"{model.name} ({_seq(model)}): tp={cfg.tp} cp={cfg.cp} pp={cfg.pp} "
            f"dp={cfg.dp} ep={cfg.ep} zero={cfg.zero_stage} sp={sp} mb={cfg.micro_batch} "
            f"m={cfg.num_microbatches}{extra} -> {cfg.world} GPUs [{cfg.framework}]")


def _moe_extra(model, cfg) -> str:
    """etp, the dispatcher and the imbalance of an MoE placement (nothing for a dense one)."""
    from ledger.config import dispatcher

    if not (getattr(model, "is_moe", False) or cfg.ep > 1):
        return ""
    etp = cfg.tp if getattr(cfg, "etp", None) is None else cfg.etp
    out = f" etp={etp} dispatcher={dispatcher(cfg)}"
    if cfg.moe.imbalance != 1.0:
        out += f" imbalance={cfg.moe.imbalance:g}"
    if getattr(model, "router_group_topk", 0):
        out += f" groups={model.router_group_topk}/{model.router_groups}"
    return out


MEMORY_CAUSES = ("state", "activations", "logits", "buffers", "overhead")
ALLOCATED_CAUSES = MEMORY_CAUSES[:4]


def memory_dict(mem, capacity=None) -> dict:
    """A MemoryBreakdown as JSON: bytes by cause, allocated (what max_memory_allocated
    reads), reserved (max_memory_reserved) and the device's total with the context, the
    point of the step where it peaks; with a ``Capacity``, the HBM it is held against,
    what is kept back and why, and whether it fits."""
    out = {c: getattr(mem, f"{c}_bytes") for c in MEMORY_CAUSES}
    out |= {"allocated": mem.allocated_bytes, "fragmentation": mem.fragmentation_bytes,
            "reserved": mem.reserved_bytes, "context": mem.context_bytes,
            "total": mem.total_bytes, "rank": mem.rank, "moment": mem.moment,
            "kept": dict(getattr(mem, "named", ())),
            "context_named": dict(getattr(mem, "context_named", ()))}
    if capacity is not None:
        out |= {"capacity": capacity.hbm_bytes, "reserve": capacity.reserve_bytes,
                "usable": capacity.usable_bytes, "reserve_explained": RESERVE_WHY,
                "required": mem.required_bytes,
                "fits": bool(mem.required_bytes <= capacity.usable_bytes)}
    return out


RESERVE_WHY = ("the device holds the allocator's reserved bytes (allocated + "
               "fragmentation) and the CUDA context with NCCL's buffers, outside the "
               "allocator; 'reserve' is any further headroom kept back from HBM")


def memory_lines(mem, capacity=None) -> list[str]:
    """The peak rank's memory by cause at the point of its step where it peaks, then
    allocated, reserved and the device's total against the usable HBM."""
    at = f"   at the {mem.moment}" if mem.moment else ""
    lines = [f"  {'memory (PP rank ' + str(mem.rank) + ')':<20}"
             + "  ".join(f"{c} {fmt_bytes(getattr(mem, c + '_bytes'))}"
                         for c in ALLOCATED_CAUSES) + at]
    if getattr(mem, "named", ()):  # the framework's own buffers (ledger.placement.buffers)
        lines.append(f"  {'':<20}of buffers, kept for the run: " + ", ".join(
            f"{name} {fmt_bytes(b)}" for name, b in mem.named))
    if getattr(mem, "context_named", ()):  # outside the allocator (ledger.placement.context)
        lines.append(f"  {'':<20}of context, outside the allocator: " + ", ".join(
            f"{name} {fmt_bytes(b)}" for name, b in mem.context_named))
    tail = ""
    if capacity is not None:
        verdict = "fits" if mem.required_bytes <= capacity.usable_bytes else "does NOT fit"
        kept = f" less {fmt_bytes(capacity.reserve_bytes)}" if capacity.reserve_bytes else ""
        tail = f" of {capacity.gpu}'s {fmt_bytes(capacity.usable_bytes)}{kept}: {verdict}"
    handed = mem.total_bytes - mem.required_bytes
    if capacity is not None and abs(handed) > 0.5 * 2**20:  # the allocator hands back
        split = mem.required_bytes - mem.context_bytes - mem.max_allocated_bytes
        kept = f" (its split blocks, {fmt_bytes(split)}, kept)" if split > 0.5 * 2**20 else ""
        tail = (f"; needs {fmt_bytes(mem.required_bytes)} with the allocator's cached "
                f"blocks handed back{kept}," + tail)
    lines.append(f"  {'':<20}allocated {fmt_bytes(mem.allocated_bytes)}, reserved "
                 f"{fmt_bytes(mem.reserved_bytes)}, + context {fmt_bytes(mem.context_bytes)}"
                 f" = {fmt_bytes(mem.total_bytes)}{tail}")
    return lines


def fp8_lines(cfg) -> list[str]:
    """The FP8 / FP4 recipe a config runs under (``ledger.frameworks.fp8``), what it keeps low
    and what stays BF16; nothing without one."""
    rec = framework_of(cfg).fp8
    if rec is None:
        return []
    low = {"mxfp8": "MXFP8", "nvfp4": "NVFP4"}.get(rec.name, rec.gemm_format.upper())
    kept = f"GEMM inputs saved in {low}" if rec.act_bytes else "BF16 inputs saved"
    wire = low if rec.param_gather_wire_bytes < 2 else "BF16"
    kept += f", {low} params all-gathered in {wire}" if rec.param_gather else (
        f", {low} weight copies cached" if rec.weight_cache_bytes else ", weights cast per use")
    passes = "fprop, dgrad, wgrad" + (" with a Hadamard transform" if rec.wgrad_rht else "")
    from ledger.frameworks.fp8_attention import fp8_attention

    from ledger.frameworks.fp8_head import fp8_head

    core = "attention core in FP8 (fp8_dpa); " if fp8_attention(cfg) else "attention core, "
    head = "router in BF16, output head in MXFP8 (fp8_output_proj)" if fp8_head(cfg) else \
        "router, output head in BF16"
    if any(rec.bf16_layers):
        kept += f"; the first {rec.bf16_layers[0]} and last {rec.bf16_layers[1]} layers in BF16"
    if rec.bf16_mtp:
        kept += "; the MTP block in BF16"
    if rec.module_formats:  # a quantization file's modules, each at its own format's peak
        kept += "; " + ", ".join(f"{m} in {f.upper()}" for m, f in rec.module_formats) \
            + " (quantization file)"
    return [f"  {rec.gemm_format + ' recipe':<20}{rec.name}: {rec.summary}",
            f"  {'':<20}linear-layer GEMMs in {low} ({passes}) at the {rec.gemm_format.upper()}"
            f" peak; {core}{head}; {kept}"]


def placement_text(model, cfg, pl, capacity=None) -> str:
    """The seed's report block, in IEC units, plus the heaviest pipeline stage."""
    lines = [config_line(model, cfg), *params_lines(model), *fp8_lines(cfg),
             *finetune_lines(model, cfg, pl), _state_line("state per GPU", pl.per_gpu)]
    if cfg.pp > 1 and pl.heaviest_stage is not None:
        lines.append(_state_line(f"heaviest stage ({pl.heaviest_rank})", pl.heaviest_stage))
    lines += [
        f"  {'activations':<20}{fmt_bytes(pl.activation_bytes_per_layer, 8)} per layer per "
        f"micro-batch ({'flash' if cfg.flash_attention else 'unfused: scores kept'})   "
        f"layers/stage {pl.layers_per_stage:.1f}   tokens/GPU/mb "
        f"{pl.tokens_per_gpu_per_mb}",
        f"  {'PP bubble fraction':<20}{pl.bubble_fraction:.3f}" + (
            f"   ({cfg.schedule}, simulated)" if cfg.pp > 1 else ""),
        f"  {'peak memory':<20}{fmt_bytes(pl.peak_bytes, 8)} on PP rank {pl.peak_rank}: "
        f"state + {pl.peak_inflight[min(pl.peak_rank, len(pl.peak_inflight) - 1)]:g} "
        f"micro-batches in flight = {fmt_bytes(pl.activation_bytes)} of activations",
    ]
    if pl.memory is not None and (capacity is not None or pl.memory.total_bytes
                                  > pl.memory.state_bytes + pl.memory.activations_bytes):
        lines += memory_lines(pl.memory, capacity)  # the seed's blocks stay as they were
    lines += offload_lines(cfg, pl, capacity)
    lines.append(f"  {'axis':<4} {'collective':<16}{'link':<8}{'bytes/step':>13}  {'overlap':<7}"
                 f"  payload")
    for c in pl.comms:
        lines.append(f"  {c.axis:<4} {c.kind:<16}{c.link:<8}{fmt_bytes(c.bytes, 9)}  "
                     f"{c.overlap:<7}  {c.what}")
    links = pl.by_link()
    lines.append(f"  total per GPU per step: {fmt_bytes(pl.total_bytes(), 8)}  (nvlink "
                 f"{fmt_bytes(links['nvlink'], 8)}, ib {fmt_bytes(links['ib'], 8)})")
    return "\n".join(lines)


def report_text(model, cfg, precision: str | None = None, optimizer: str = "adam") -> str:
    """The seed's text report of one placement."""
    from ledger.placement import place

    return placement_text(model, cfg, place(model, cfg, precision=precision,
                                            optimizer=optimizer))


def report(model, cfg, precision: str | None = None, optimizer: str = "adam",
           file=None) -> None:
    """The seed's ``report``: print one placement's text report (to ``file``, default
    stdout)."""
    print(report_text(model, cfg, precision, optimizer), file=file)


def _state_dict(st) -> dict:
    return {"params_bytes": st.params_bytes, "grads_bytes": st.grads_bytes,
            "optim_bytes": st.optim_bytes, "total_bytes": st.total_bytes}


def config_dict(cfg) -> dict:
    """A ParallelConfig as JSON: ``ParallelConfig(**d, moe=MoESpec(**d["moe"]),
    finetune=FineTune(**d["finetune"]))`` rebuilds it."""
    config = {f.name: getattr(cfg, f.name) for f in fields(cfg)
              if f.name not in ("moe", "finetune")}
    config["moe"] = asdict(cfg.moe)
    from ledger.config import dispatcher

    # the values the text prints (etp=tp unless set; the framework's dispatcher), not None
    config["etp"] = cfg.tp if config.get("etp") is None else config["etp"]
    config["moe_dispatcher"] = config.get("moe_dispatcher") or dispatcher(cfg)
    ft = getattr(cfg, "finetune", None)
    config["finetune"] = asdict(ft) if ft is not None else None
    return config


def placement_json(model, cfg, pl, precision: str | None, optimizer: str,
                   capacity=None) -> dict:
    """One JSON object for one placement; bytes are bytes, fractions are fractions."""
    return {
        "model": model.name,
        **params_dict(model),
        "param_breakdown": dict(model.breakdown),
        "seq_len": model.seq_len,
        "framework": cfg.framework,
        "precision": precision or "framework",
        "fp8_recipe": getattr(framework_of(cfg).fp8, "name", None),
        "optimizer": optimizer,
        **finetune_dict(model, cfg, pl),
        **offload_dict(cfg, pl),
        "config": config_dict(cfg),
        "world": pl.world,
        "per_gpu": _state_dict(pl.per_gpu),
        "heaviest_stage": {"rank": pl.heaviest_rank, **_state_dict(pl.heaviest_stage)},
        "activation_bytes_per_layer": pl.activation_bytes_per_layer,
        "layers_per_stage": pl.layers_per_stage,
        "tokens_per_gpu_per_mb": pl.tokens_per_gpu_per_mb,
        "bubble_fraction": pl.bubble_fraction,
        "schedule": cfg.schedule,
        "peak_inflight": list(pl.peak_inflight),
        "activation_bytes": pl.activation_bytes,
        "peak_bytes": pl.peak_bytes,
        "peak_rank": pl.peak_rank,
        "memory": memory_dict(pl.memory, capacity),
        "memory_by_rank": [memory_dict(m) for m in pl.memory_by_rank],
        "comms": [{"axis": c.axis, "kind": c.kind, "link": c.link, "bytes": c.bytes,
                   "overlap": c.overlap, "what": c.what} for c in pl.comms],
        "total_comm_bytes": pl.total_bytes(),
        "comm_bytes_by_link": pl.by_link(),
    }


def models_table(specs) -> str:
    """One line per preset: name, exact parameter count, shape."""
    lines = [f"{'model':<14}{'params':>20}{'active':>9}  {'layers':>6} {'hidden':>6} "
             f"{'heads':>5} {'kv':>3} {'ffn':>6} {'vocab':>7}  experts"]
    for m in specs:
        moe = f"{m.num_experts} x top-{m.top_k}" if m.is_moe else "-"
        kv = "MLA" if m.attention == "mla" else m.kv_heads
        lines.append(f"{m.name:<14}{m.params:>20,}{m.active_params / 1e9:>8.2f}B  "
                     f"{m.layers:>6} {m.hidden:>6} {m.heads:>5} {kv:>3} {m.ffn_hidden:>6} "
                     f"{m.vocab:>7}  {moe}")
    return "\n".join(lines)


def models_json(specs) -> list[dict]:
    """The presets as the table shows them, exact counts included."""
    return [{"name": m.name, "params": m.params, "layers": m.layers, "hidden": m.hidden,
             "heads": m.heads, "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden,
             "vocab": m.vocab, "seq_len": m.seq_len, "num_experts": m.num_experts,
             "top_k": m.top_k} for m in specs]


def gpus_json() -> list[dict]:
    """Every GPU preset with its datasheet figures, its usual system (hosts, scale-up
    domain, links, NICs) and where each figure comes from."""
    from ledger.system import GPU_SOURCES, GPUS, LINK_SOURCES, POWER_SOURCES, SYSTEMS, system

    out = []
    for name, g in GPUS.items():
        s, p = system(name), SYSTEMS[name]
        out.append({"name": name, "bf16_tflops": g.bf16_flops / 1e12,
                    "fp8_tflops": g.fp8_flops / 1e12, "fp4_tflops": g.fp4_flops / 1e12,
                    "hbm_GiB": g.hbm_bytes / 2**30, "hbm_TBps": g.hbm_bytes_per_s / 1e12,
                    "gpus_per_node": s.gpus_per_node, "gpus_per_domain": s.gpus_per_domain,
                    "nvlink_GBps": s.intra_bytes_per_s / 1e9, "nvls": s.nvls,
                    "nics_per_node": p.nics_per_node, "nic_Gbps": p.nic_bits_per_s / 1e9,
                    "network_GBps": s.inter_bytes_per_s / 1e9,
                    "host_GBps": s.host_bytes_per_s / 1e9,
                    "host_memory_GiB": s.host_memory_bytes / 2**30,
                    "gemm_efficiency": g.gemm_efficiency, "board_power_W": g.board_power_w,
                    "source": GPU_SOURCES[name], "power_source": POWER_SOURCES[name],
                    "system_source": LINK_SOURCES[name]})
    return out


def gpus_table() -> str:
    """One line per GPU preset: peak FLOP/s, HBM, its usual system's hosts, domain, links
    and NICs; then each preset's sources."""
    lines = [f"{'gpu':<13}{'bf16':>6}{'fp8':>6}{'fp4':>7}{'HBM':>7}{'HBM':>6}{'host':>5}"
             f"{'domain':>7}{'scale-up':>9}{'NICs/host':>13}{'net':>6}{'host':>6}{'host mem':>9}"
             f"{'power':>6}",
             f"{'':<13}{'TFLOP/s (dense)':>19}{'GiB':>7}{'TB/s':>6}{'GPUs':>5}{'GPUs':>7}"
             f"{'GB/s':>9}{'x Gb/s':>13}{'GB/s':>6}{'GB/s':>6}{'GiB':>9}{'W':>6}"]
    rows = gpus_json()
    for g in rows:
        peaks = "".join(f"{g[k]:>{w},.0f}" if g[k] else f"{'-':>{w}}"
                        for k, w in (("bf16_tflops", 6), ("fp8_tflops", 6), ("fp4_tflops", 7)))
        nics = f"{g['nics_per_node']} x {g['nic_Gbps']:g}"
        lines.append(f"{g['name']:<13}{peaks}{g['hbm_GiB']:>7.1f}{g['hbm_TBps']:>6.2f}"
                     f"{g['gpus_per_node']:>5}{g['gpus_per_domain']:>7}"
                     f"{g['nvlink_GBps']:>9,.0f}{nics:>13}{g['network_GBps']:>6,.1f}"
                     f"{g['host_GBps']:>6,.0f}{g['host_memory_GiB']:>9,.0f}"
                     f"{g['board_power_W']:>6,.0f}")
    lines += ["", "scale-up and network per GPU, one direction; host memory per host; "
                  "NVLS: NCCL's NVLink SHARP on " + ", ".join(g["name"] for g in rows if g["nvls"]),
              "", "sources:"]
    for g in rows:
        lines += [f"  {g['name']}", f"    chip:   {g['source']}",
                  f"    power:  {g['power_source']}", f"    system: {g['system_source']}"]
    return "\n".join(lines)


def estimate_text(model, cfg, system, est) -> str:
    """Step time, throughput, MFU and the breakdown, one cause a line."""
    mem = "fits" if est.fits else "does NOT fit"
    pipe = f"schedule {cfg.schedule}" if cfg.pp > 1 else "no pipeline"
    lines = [config_line(model, cfg) + f" on {system.gpu.name}, {pipe}",
             *params_lines(model)[:1], *fp8_lines(cfg),
             f"  step time           {est.step_time_s:10.3f} s    {est.tokens_per_s_per_gpu:,.0f} "
             f"tokens/s/GPU",
             f"  throughput          {est.tflops_per_gpu:10.1f} TFLOP/s/GPU (model)   "
             f"MFU {est.mfu:.1%}   HFU {est.hfu:.1%} of the BF16 peak",
             f"  memory per GPU      {fmt_bytes(est.memory_per_gpu_bytes, 10)} of "
             f"{fmt_bytes(est.memory_capacity_bytes)} usable: {mem}", *domain_line(cfg, system)]
    if est.placement is not None and est.placement.memory is not None:
        lines += memory_lines(est.placement.memory)[:-1]  # the total is the line above
    lines.append("  where the time goes:")
    for name, secs in sorted(est.breakdown.items(), key=lambda kv: -kv[1]):
        lines.append(f"    {name:<14}{secs:10.3f} s  {secs / est.step_time_s:6.1%}"
                     + ("  launch-bound: kernels wait for the host to launch them "
                        "(ledger.step.host; --cuda-graph-scope)" if name == "host" else ""))
    return "\n".join(lines + exposed_lines(est.exposed))


def exposed_lines(rows) -> list[str]:
    """Where the exposed communication comes from: axis, call, exposed of issued, why."""
    if not rows:
        return []
    out = ["  exposed communication (exposed of issued, and why the rest of the step does "
           "not hide it):"]
    for r in rows:
        out.append(f"    {r.axis:<3} {r.exposed_s:8.3f} s of {r.issued_s:8.3f} s  {r.call}")
        out.append(f"        {r.why}")
    return out


def exposed_dicts(rows) -> list[dict]:
    return [{"axis": r.axis, "call": r.call, "exposed_s": r.exposed_s, "issued_s": r.issued_s,
             "why": r.why} for r in rows]


def estimate_json(model, cfg, system, est) -> dict:
    keys = ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "hardware_tflops_per_gpu",
            "mfu", "hfu", "memory_per_gpu_bytes", "memory_capacity_bytes", "fits", "breakdown")
    out = {k: getattr(est, k) for k in keys}
    # MFU and HFU are shares of the dense BF16 peak, whatever precision the GEMMs run in
    out |= {"mfu_peak": "bf16", "mfu_peak_flops": system.gpu.bf16_flops}
    out |= {"model": model.name, **params_dict(model), "seq_len": model.seq_len,
            "gpu": system.gpu.name, "world": cfg.world,
            "num_microbatches": cfg.num_microbatches, "schedule": cfg.schedule,
            "recompute": cfg.recompute, "framework": cfg.framework,
            "config": config_dict(cfg)} | domains_json(cfg, system)
    if est.placement is not None and est.placement.memory is not None:
        out["memory"] = memory_dict(est.placement.memory, est.capacity)
    out["exposed"] = exposed_dicts(est.exposed)
    return out


