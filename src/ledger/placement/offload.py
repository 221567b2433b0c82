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

The CPU optimizer step itself is not timed here (it runs at the host's memory
bandwidth, which ``ledger.system`` does not hold).
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


def transfers(state: StateBytes, trained: float, offload: str, reduces, gathers,
              microbatches: int, zero_stage: int) -> list[HostTransfer]:
    """Per step, one GPU's host-link traffic (module docstring); ``reduces`` and
    ``gathers``: the DP collectives per step (``comms.dp_collective_counts``)."""
    if offload == "optimizer":
        out = [HostTransfer("d2h", trained * FP32, "yes", "fp32 grads to the CPU optimizer"),
               HostTransfer("h2d", trained * STAGING_BYTES, "no", "updated bf16 params")]
        if zero_stage == 2 and microbatches > 1:
            acc = 2 * (microbatches - 1) * state.grads_bytes
            out.append(HostTransfer("d2h", acc / 2, "yes", "accumulated grads, each micro-batch"))
            out.append(HostTransfer("h2d", acc / 2, "yes", "accumulated grads, each micro-batch"))
        return out
    if offload == "params":
        grads_overlap = "yes" if microbatches == 1 else "no"
        return [HostTransfer("h2d", gathers * state.params_bytes, "yes",
                             "param shards before each all-gather"),
                HostTransfer("d2h", reduces * state.grads_bytes, grads_overlap,
                             "grad shards after each reduce-scatter")]
    return []


def exposed_s(rows: list[HostTransfer], host_bytes_per_s: float) -> float:
    """Seconds of host-link traffic the step waits for (the exposed rows)."""
    return sum(r.bytes for r in rows if r.overlap == "no") / host_bytes_per_s
