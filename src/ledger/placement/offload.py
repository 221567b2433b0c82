"""CPU offload: what leaves the GPU, what the host holds, what crosses the host link.

Two kinds, as the frameworks run them (sources: ``Framework.offloads``):

- ``optimizer`` - DeepSpeed's ZeRO-Offload (offload_optimizer: cpu). The GPU keeps its
  bf16 parameters; the fp32 master partition, the fp32 gradient partition and the
  optimizer's moments live pinned on the host with a bf16 staging buffer
  (stage_1_and_2.py L489-509, L837-844), and DeepSpeedCPUAdam steps there. Per step the
  gradient partition goes down in fp32 (cast on the GPU first, L1590-1605: 4 B a
  parameter, non-blocking during the backward) and the updated parameters come back in
  bf16 after the CPU step (L2337-2341: 2 B, exposed). With gradient accumulation under
  ZeRO-2 every earlier micro-batch also round-trips the accumulated gradient
  (async_accumulate_grad_in_cpu_via_gpu, L1516-1560).
- ``params`` - everything on the host: FSDP2's CPUOffloadPolicy (the sharded parameters
  in their original dtype, their gradients and the optimizer state; the step on the
  CPU) or DeepSpeed's offload_param under ZeRO-3. Before each all-gather the shard is
  copied to the GPU in its stored dtype (_fsdp_param.py L896-901; partition_parameters.py
  L1332), prefetched with the gather; gradients come back after each reduce-scatter,
  non-blocking only without accumulation (_fsdp_collectives.py L711-743).

The CPU optimizer step runs after the backward, before the updated parameters can go
back, in both (DeepSpeed's ``step()`` after the backward, stage_1_and_2.py L2279-2345;
FSDP2's ``optimizer.step()`` over the CPU shards): exposed, at the system's
``cpu_optimizer_params_per_s`` for the parameters every GPU of a node hands its host.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.memory import StateBytes

STAGING_BYTES = 2  # DeepSpeed's pinned bf16 copy of the partition (stage_1_and_2.py L498-507)
FP32 = 4


@dataclass(frozen=True)
class HostTransfer:
    """Bytes one GPU moves over its host link in one step, one direction."""

    direction: str  # "d2h" | "h2d"
    bytes: float
    overlap: str  # "yes": under compute | "no": exposed
    what: str


def on_gpu(state: StateBytes, offload: str) -> StateBytes:
    """The state that stays in HBM."""
    if offload == "optimizer":
        return StateBytes(state.params_bytes, 0.0, 0.0)
    if offload == "params":
        return StateBytes(0.0, 0.0, 0.0)
    return state


def host_bytes(state: StateBytes, trained: float, offload: str) -> float:
    """Host memory one GPU's offloaded state takes; ``trained``: the trainable parameters
    of this GPU's optimizer partition."""
    if offload == "optimizer":
        return state.optim_bytes + trained * (FP32 + STAGING_BYTES)
    if offload == "params":
        return state.total_bytes
    return 0.0


def _rows(state: StateBytes, trained, offload: str, reduces, gathers, microbatches,
          zero_stage) -> list[tuple]:
    """(direction, bytes, exposed, what) of one GPU's host-link traffic per step (module
    docstring); bytes and ``exposed`` may be arrays (the planner's grid)."""
    if offload == "optimizer":
        acc = (zero_stage == 2) * (microbatches - 1) * state.grads_bytes  # one way, ZeRO-2
        return [("d2h", trained * FP32, False, "fp32 grads to the CPU optimizer"),
                ("h2d", trained * STAGING_BYTES, True, "updated bf16 params"),
                ("d2h", acc, False, "accumulated grads, each micro-batch"),
                ("h2d", acc, False, "accumulated grads, each micro-batch")]
    if offload == "params":
        return [("h2d", gathers * state.params_bytes, False,
                 "param shards before each all-gather"),
                ("d2h", reduces * state.grads_bytes, microbatches > 1,
                 "grad shards after each reduce-scatter")]
    return []


def transfers(state: StateBytes, trained: float, offload: str, reduces, gathers,
              microbatches: int, zero_stage: int) -> list[HostTransfer]:
    """Per step, one GPU's host-link traffic (module docstring); ``reduces`` and
    ``gathers``: the DP collectives per step (``comms.dp_collective_counts``)."""
    return [HostTransfer(d, b, "no" if exposed else "yes", what)
            for d, b, exposed, what in _rows(state, trained, offload, reduces, gathers,
                                             microbatches, zero_stage) if b > 0]


def split_bytes(state: StateBytes, trained, offload: str, reduces, gathers, microbatches,
                zero_stage) -> tuple:
    """(exposed, overlapped) host-link bytes per step (arrays allowed: the planner's grid)."""
    rows = _rows(state, trained, offload, reduces, gathers, microbatches, zero_stage)
    return (sum(b * exposed for _, b, exposed, _ in rows),
            sum(b * (1 - exposed) for _, b, exposed, _ in rows))


def link_s(rows: list[HostTransfer], host_bytes_per_s: float) -> tuple[float, float]:
    """(exposed, overlapped) seconds of a placement's host-link rows. The overlapped ones
    hide under the forward and backward only as long as those last
    (``ledger.step.timing``: the excess is exposed)."""
    return tuple(sum(r.bytes for r in rows if r.overlap == flag) / host_bytes_per_s
                 for flag in ("no", "yes"))


def cpu_step_s(params_per_node, params_per_s: float):
    """Seconds of the CPU optimizer step: the parameters a node's GPUs hand their host,
    at the host's rate (``System.cpu_optimizer_params_per_s``)."""
    return params_per_node / params_per_s
