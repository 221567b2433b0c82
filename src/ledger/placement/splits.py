"""What a model lets tensor and context parallelism split, layer kind by layer kind.

One answer for ``place`` (which refuses a config with it) and for the planner (which only
enumerates the splits it allows). Attention splits heads over tp (and over tp x cp under
Ulysses); an MLP splits its width over tp. The recurrent mixers split as Megatron-Core
(megatron/core at d98e8a64) splits them, or not at all:

- Mamba-2 (ssm/mamba_mixer.py:259-274): heads and groups over tp; context parallelism is
  head-parallel (ssm/mamba_context_parallel.py:108-125: heads over tp x cp, groups whole on
  a rank when fewer than cp).
- Gated DeltaNet (ssm/gated_delta_net/common.py:179-187, :631): key and value heads over tp,
  and over tp x cp under its all-to-all context parallelism.
- Mamba-1, Kimi Delta Attention, lightning attention and LFM2's short convolution have no
  tensor- or context-parallel form in Megatron-Core at that commit (no module of theirs
  under megatron/core), and transformers' tp_plans leave them whole: tp = cp = 1.
- DeepSeek-V4's compressed attention (``ledger.anatomy.compressed``): no form in
  Megatron-Core at that commit, whole in transformers (configuration_deepseek_v4.py
  L114-121): tp = cp = 1 (the published runs' placement).
"""
from __future__ import annotations

NO_SPLIT = {"mamba1": "Mamba-1", "kda": "Kimi Delta Attention",
            "lightning": "lightning attention", "conv": "short-convolution"}


def _divides(field: str, value: int, name: str, by: int):
    return None if value % by == 0 else (field, f"{field}({value}) is not divisible by "
                                                f"{name}({by})")


def _recurrent(model) -> str | None:
    """The model's recurrent mixer by split rule: mamba2, gdn, or one of NO_SPLIT."""
    mixers = {k.mixer for k in model.kind_counts}
    if mixers & {"mamba", "attention+mamba"}:
        return "mamba2" if model.mamba.version == 2 else "mamba1"
    if "linear" in mixers:
        return model.linear.kind
    return "conv" if "conv" in mixers else None


def split_problem(model, tp: int, cp: int = 1, cp_kind: str = "ring"):
    """(field, message) of the first width ``tp`` / ``cp`` cannot split, or None."""
    kinds = model.kind_counts
    if getattr(model, "attention", "mha") == "csa" and (tp > 1 or cp > 1):
        axis, size = ("tp", tp) if tp > 1 else ("cp", cp)
        return axis, (f"{axis}({size}) > 1 but DeepSeek-V4's compressed attention under "
                      f"{'tensor' if axis == 'tp' else 'context'} parallelism is not modelled "
                      f"(no form of it in Megatron-Core d98e8a64; transformers keeps it whole)"
                      f"; use {axis} = 1")
    checks = []
    if any(k.attention for k in kinds):
        checks += [("heads", model.heads, "tp", tp), ("kv_heads", model.kv_heads, "tp", tp)]
        g = model.global_attention
        if g is not None and g.kv_heads:
            checks.append(("global_kv_heads", g.kv_heads, "tp", tp))
    if any(k.mlp == "dense" for k in kinds) or not model.is_hybrid:
        checks.append(("ffn_hidden", model.ffn_hidden, "tp", tp))
    if cp > 1 and cp_kind == "ulysses" and any(k.attention for k in kinds):
        checks += [("heads", model.heads, "tp*cp", tp * cp),
                   ("kv_heads", model.kv_heads, "tp*cp", tp * cp)]
    rec = _recurrent(model)
    if rec == "mamba2":
        checks += [("mamba_heads", model.mamba.heads, "tp", tp),
                   ("mamba_groups", model.mamba.groups, "tp", tp),
                   ("mamba_heads", model.mamba.heads, "tp*cp", tp * cp)]
    elif rec == "gdn":
        la = model.linear
        checks += [("linear_key_heads", la.key_heads, "tp*cp", tp * cp),
                   ("linear_value_heads", la.value_heads, "tp*cp", tp * cp)]
    for check in checks:
        problem = _divides(*check)
        if problem:
            return problem
    if rec in NO_SPLIT and (tp > 1 or cp > 1):
        axis, size = ("tp", tp) if tp > 1 else ("cp", cp)
        return axis, (f"{axis}({size}) > 1 but {model.name}'s {NO_SPLIT[rec]} layers have "
                      f"no {'tensor' if axis == 'tp' else 'context'}-parallel form in "
                      f"Megatron-Core or transformers; use {axis} = 1")
    return None
