"""Megatron-Core's optimizer CPU offload (``--optimizer-cpu-offload``,
``--optimizer-offload-fraction f``, ``--overlap-cpu-optimizer-d2h-h2d``): the
``HybridDeviceOptimizer`` at Megatron-LM d98e8a64 (megatron/core/optimizer/
cpu_offloading/hybrid_optimizer.py), built by ``get_megatron_optimizer`` with
``param_update_in_fp32=True`` (optimizer/__init__.py L504-545) over the distributed
optimizer's shard of each parameter (distrib_optimizer.py L778-781). Megatron requires
``--use-precision-aware-optimizer`` with it (training/arguments.py L1884-1888).

- **What leaves the GPU**: the first ``f`` of the shard's elements, whole parameters in
  order until ``f`` x the GPU elements is reached (``_get_sub_optimizer_param_groups``,
  L249-301), are cloned to pinned host memory in fp32; their optimizer (torch's Adam /
  SGD, ``fused=True``) and its state live on the host. Priced as ``f`` of the GPU's
  optimizer state (main params and moments); the bf16 parameters and the gradient buffer
  stay on the GPU, as does the rest of the optimizer (``1 - f``, a GPU Adam over fp32
  copies, L276-279).
- **What the host holds**, per offloaded element: the fp32 main parameter (4 B, pinned),
  a pinned fp32 gradient copy (4 B, ``cpu_copy_map_grad``, L97-104) and the CPU Adam's
  two fp32 moments (8 B): 16 B, for every GPU of the host (``ledger.system``: host memory
  is per host).
- **Per step** (``step``, L145-171): the gradients go down into the fp32 host copies
  (4 B an element), the CPU optimizer steps, and a post-step hook copies each updated
  parameter back into the GPU's bf16 parameter (L109-120: 2 B). All three follow the
  backward. Without ``--overlap-cpu-optimizer-d2h-h2d`` they run one after another on the
  current stream; with it each parameter gets its own CPU optimizer (L224-246) and the
  copies run on side streams (L209-214), so a parameter's copies overlap the other
  parameters' CPU steps: priced as the longest of the three instead of their sum.
  The CPU step's rate is the system's ``cpu_optimizer_params_per_s``.
"""
from __future__ import annotations

from ledger.memory import StateBytes

HOST_BYTES = 4 + 4 + 8  # fp32 main param, pinned fp32 grad, CPU Adam's two fp32 moments
D2H_BYTES, H2D_BYTES = 4, 2  # the fp32 grad copy down, the bf16 param copy up


def fraction(cfg) -> float:
    """The share of the optimizer's elements the config's Megatron offload moves."""
    return float(getattr(cfg, "optimizer_offload_fraction", 0.0) or 0.0)


def on_gpu(state: StateBytes, cfg) -> StateBytes:
    """The state that stays in HBM: all but ``f`` of the optimizer's."""
    f = fraction(cfg)
    if not f:
        return state
    return StateBytes(state.params_bytes, state.grads_bytes, state.optim_bytes * (1 - f))


def host_bytes(trained: float, cfg) -> float:
    """Host memory one GPU's offloaded optimizer takes; ``trained``: the elements of this
    GPU's optimizer shard."""
    return fraction(cfg) * trained * HOST_BYTES


def rows(trained: float, cfg) -> list[tuple]:
    """(direction, bytes, what) of one GPU's host-link traffic per step, all after the
    backward."""
    f = fraction(cfg)
    if not f:
        return []
    return [("d2h", f * trained * D2H_BYTES, "fp32 grads to the CPU optimizer"),
            ("h2d", f * trained * H2D_BYTES, "updated params back into bf16")]


def step_s(transfers, host_bytes_per_s: float, cpu_s: float, cfg) -> tuple[float, float]:
    """(host-link seconds, CPU-step seconds) the step waits for, ``transfers`` the
    placement's host-link rows: one after another, or with the overlap only what the
    longest of the two copies (a side stream each, the link full duplex) and the CPU step
    leaves beyond the CPU step."""
    d2h, h2d = (sum(r.bytes for r in transfers if r.direction == d) / host_bytes_per_s
                for d in ("d2h", "h2d"))
    if not getattr(cfg, "overlap_cpu_optimizer", False):
        return d2h + h2d, cpu_s
    return max(0.0, max(d2h, h2d) - cpu_s), cpu_s
