"""Text and JSON of a fine-tune (what trains, its classes, QLoRA's transient) and of CPU
offload (the host's share, the host-link rows)."""
from __future__ import annotations


from ledger.render.units import fmt_bytes

def _count(n: float) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.2f} M"


def finetune_lines(model, cfg, pl) -> list[str]:
    """What trains, what the peak rank's GPU holds of each class, QLoRA's transient."""
    t, ft = pl.tuned, getattr(cfg, "finetune", None)
    if t is None:
        return []
    what = ft.method
    if ft.adapters:
        targets = ft.lora_targets if isinstance(ft.lora_targets, str) else (
            ",".join(ft.lora_targets) if ft.lora_targets else "peft's default")
        what += (f" r={ft.lora_rank} alpha={ft.lora_alpha:g} targets={targets}"
                 + (" +DoRA" if ft.dora else ""))
    if ft.freeze:
        what += f" frozen: {','.join(ft.freeze)}"
    if ft.freeze_layers:
        what += f" layers {ft.freeze_layers[0]}:{ft.freeze_layers[1]} frozen"
    share = t.trainable_params / model.params
    parts = ", ".join(f"{k} {_count(v)}" for k, v in t.trainable_breakdown.items())
    held = "  ".join(f"{c} {_count(v)}" for c, v in t.classes.items() if v)
    out = [f"  {'fine-tuning':<20}{what}",
           f"  {'trainable':<20}{t.trainable_params:,} of {model.params:,} ({share:.2%}): "
           f"{parts}",
           f"  {'params on GPU':<20}{held} (PP rank {pl.peak_rank}, before ZeRO)"]
    if t.dequant_bytes:
        out.append(f"  {'dequantised weight':<20}{fmt_bytes(t.dequant_bytes)} (one NF4 matrix "
                   f"in bf16, in buffers)")
    if t.adapter_activation_bytes:
        out.append(f"  {'adapter activations':<20}{fmt_bytes(t.adapter_activation_bytes)} per "
                   f"layer per micro-batch (in activations)")
    return out


def offload_lines(cfg, pl, capacity=None) -> list[str]:
    """CPU offload: the host's share (against the node's CPU memory) and the host-link
    traffic."""
    kind = getattr(cfg, "offload", "none")
    f = getattr(cfg, "optimizer_offload_fraction", 0.0)
    mods = getattr(cfg, "offload_modules", ())
    if kind == "none" and not f and not mods:
        return []
    if kind == "none":  # Megatron's own offloads (ledger.placement.optim_offload, act_offload)
        kind = " + ".join(([f"{f:.0%} of the optimizer (Megatron --optimizer-cpu-offload)"]
                           if f else []) + ([f"activations of {', '.join(mods)}"] if mods
                                            else []))
    tail = ""
    if capacity is not None and capacity.host_bytes:
        verdict = "fits" if capacity.host_fits(pl.host_bytes_per_node) else "does NOT fit"
        tail = f" of {fmt_bytes(capacity.host_bytes)}: {verdict}"
    out = [f"  {'cpu offload':<20}{kind}: host holds {fmt_bytes(pl.host_bytes_per_gpu)} "
           f"per GPU, {fmt_bytes(pl.host_bytes_per_node)} per node{tail}"]
    out += [f"  {'':<20}{r.direction} {fmt_bytes(r.bytes, 9)}/step  overlap {r.overlap:<3}  "
            f"{r.what}" for r in pl.host_transfers]
    return out


def finetune_dict(model, cfg, pl) -> dict:
    """``trainable_params`` (peft's count) and its breakdown; the fine-tune's classes, its
    transient and offload figures. A full run trains everything."""
    t = pl.tuned
    if t is None:
        return {"trainable_params": model.params,
                "trainable_breakdown": {k: v for k, v in model.breakdown.items() if v}}
    return {"trainable_params": t.trainable_params,
            "trainable_breakdown": t.trainable_breakdown,
            "params_on_gpu_by_class": t.classes, "dequant_bytes": t.dequant_bytes,
            "adapter_activation_bytes_per_layer": t.adapter_activation_bytes}


def offload_dict(cfg, pl) -> dict:
    return {"offload": getattr(cfg, "offload", "none"),
            "host_bytes_per_gpu": pl.host_bytes_per_gpu,
            "host_bytes_per_node": pl.host_bytes_per_node,
            "host_transfers": [{"direction": r.direction, "bytes": r.bytes,
                                "overlap": r.overlap, "what": r.what}
                               for r in pl.host_transfers]}


