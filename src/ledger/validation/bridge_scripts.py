"""What a release's Megatron-Bridge performance launcher sets on a model's recipe beyond the
recipe itself, by (release, table model, GPU): settings ``BridgeRow.setting`` reads after
the recipe's own (the launcher sets them on the recipe object before its YAML overrides are
merged, and those YAMLs name none of them).

Release 25.09 (v0.1.0rc3, ``scripts/performance/run_script.py`` L55-95 @ bf71eba0): for
DeepSeek-V3 the launcher
- builds the library recipe with ``enable_deepep`` on H100 (L56, L65-73), which sets the flex
  dispatcher with DeepEP (``recipes/deepseek/deepseek_v3.py`` L146-149);
- runs the combined 1F1B on H100 (``A2A_1F1B``, L62, L80-83:
  ``overlap_moe_expert_parallel_comm`` and ``delay_wgrad_compute`` on, the shared-expert
  overlap off) and off elsewhere, the shared-expert overlap on (L84-87);
- recomputes ``mla_up_proj`` and ``mlp`` on H100, and ``moe_act`` with them on GB200 (L88-91;
  the YAML's ``recompute_granularity: selective`` makes them the selected modules); B200
  keeps the library recipe's (none named: Megatron's default, ``core_attn``).
Its ``overlap_grad_reduce = False`` on H100 (L94-95) is not carried (the parameter gather
stays overlapped, CommOverlapConfig's DP > 1 default, comm_overlap.py L542-545 @ bf71eba0,
which the ledger's Megatron prices only with the reduction overlapped).
"""
from __future__ import annotations

_DS = {"moe_a2a_overlap": False}
SCRIPT_SETTINGS: dict[tuple[str, str, str], dict] = {
    ("25.09", "deepseek-v3", "h100"): {"moe_flex_dispatcher_backend": "deepep",
                                       "moe_a2a_overlap": True,
                                       "recompute_modules": ["mla_up_proj", "mlp"]},
    ("25.09", "deepseek-v3", "gb200"): _DS | {"recompute_modules": ["mla_up_proj", "mlp",
                                                                    "moe_act"]},
    ("25.09", "deepseek-v3", "b200"): _DS,
}


def script_settings(release: str, model: str, gpu: str) -> dict:
    """The launcher's settings for one row ({} where it sets none)."""
    return SCRIPT_SETTINGS.get((release, model, gpu), {})
