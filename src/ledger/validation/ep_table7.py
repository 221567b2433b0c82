"""The expert-parallel dispatch and combine times of NVIDIA's Megatron-Core MoE report, held
against ``ledger.step.layer_comms.ep_time`` (the term the step adds per MoE layer).

Source: "Scalable Training of Mixture-of-Experts Models with Megatron Core" (NVIDIA,
arXiv 2603.07685 v2, 2026-03-10), sec. 4.2.2, Table 7 "EP Scaling Performance for HybridEP
and all-to-all (in us)", p.32; read in the plain-text extraction of the v2 PDF at
AICO-Ascend/AICO-Knowledge @ 14bb8fb48ba5696564c8aedc4da2b18dc21d5bb8,
extraction/fulltext/scalable-training-of-mixture-of-experts-models-with-megatron-core.txt.
MEASURED, "communication latency only; in end-to-end training, the gap is typically larger
once permutation and host overhead are included" (p.31).

What the text states: GB200 (NVL72: every EP size inside one NVLink domain) and H100
(8-GPU hosts: EP 16 and up cross the NICs), "hidden size 7168, sequence length 4096, and
256 experts", EP 8 / 16 / 32 / 64, Megatron's all-to-all dispatcher (NCCL) against
HybridEP (the flex dispatcher's NVIDIA backend). What it leaves open, set by ONE rule for
every cell:

- the model is DeepSeek-V3 as ``ledger.model.deepseek_v3`` holds it (its config.json:
  hidden 7168, 256 routed experts, top-8, router groups 8 with top-4 groups - the shape
  the three stated figures name), routing as its router runs (node-limited groups);
- each GPU routes one sequence of 4096 tokens (micro-batch 1, TP 1, CP 1, no sequence
  sharding), evenly loaded (imbalance 1), capacity factor 1;
- BF16 on the wire both ways (Megatron refuses FP8 dispatch under HybridEP,
  megatron/core/transformer/moe/fused_a2a.py L327 @ NVIDIA/Megatron-LM d98e8a64dd; the
  combine is BF16 in every backend), the framework's defaults otherwise (HybridEP's SM
  count by whether the group spans NVLink domains, ``ledger.step.ep_sms``);
- an EP group is EP consecutive GPUs of the preset's system (``ledger.system.system``:
  gb200 4-GPU hosts in a 72-GPU domain, h100-sxm 8-GPU hosts), laid out as the step lays
  a DP x EP world (``ledger.placement.Layout``);
- the ledger's dispatch and its combine carry the same bytes, so each cell is half of
  ``ep_time``'s one direction (dispatch + combine) of one MoE layer.
"""
from __future__ import annotations

from ledger.config import ParallelConfig
from ledger.model import deepseek_v3
from ledger.placement import Layout
from ledger.step import layout_links
from ledger.step.layer_comms import ep_time
from ledger.system import system

SOURCE = ("NVIDIA, 'Scalable Training of Mixture-of-Experts Models with Megatron Core', "
          "arXiv 2603.07685 v2, sec. 4.2.2 Table 7 p.32 (AICO-Ascend/AICO-Knowledge @ "
          "14bb8fb48ba5696564c8aedc4da2b18dc21d5bb8 extraction/fulltext/scalable-training-"
          "of-mixture-of-experts-models-with-megatron-core.txt)")
EP_SIZES = (8, 16, 32, 64)
GPUS = {"GB200": "gb200", "H100": "h100-sxm"}  # the table's column -> the ledger's preset
TOKENS = 4096  # one sequence of 4096 a GPU (the rule above)

# (operation, table GPU, backend) -> microseconds at EP 8, 16, 32, 64, as printed
MEASURED_US = {
    ("dispatch", "GB200", "hybridep"): (391, 578, 612, 675),
    ("dispatch", "GB200", "alltoall"): (735, 743, 769, 930),
    ("dispatch", "H100", "hybridep"): (661, 1485, 3064, 4626),
    ("dispatch", "H100", "alltoall"): (1265, 5774, 8059, 9164),
    ("combine", "GB200", "hybridep"): (353, 527, 646, 744),
    ("combine", "GB200", "alltoall"): (741, 765, 758, 827),
    ("combine", "H100", "hybridep"): (624, 1688, 3088, 4398),
    ("combine", "H100", "alltoall"): (1277, 5628, 7815, 8727),
}


def config(backend: str, ep: int) -> ParallelConfig:
    """The cell's placement by the rule: DP x EP over ``ep`` GPUs, BF16, the dispatcher."""
    kind = {"moe_dispatcher": "flex", "ep_backend": "hybridep"} if backend == "hybridep" \
        else {"moe_dispatcher": "alltoall"}
    return ParallelConfig(dp=ep, ep=ep, act_bytes=2, **kind)


def cell_s(gpu: str, backend: str, ep: int) -> float:
    """The ledger's seconds for one dispatch (or one combine) of one MoE layer: ``ep_time``
    over the layout the step builds (``ledger.step.timing.structure``), its MoE-layer share
    undone, halved."""
    model = deepseek_v3()
    one_direction = ep_time(model, config(backend, ep), TOKENS, layout_links(_layout(gpu, ep)),
                            system(GPUS[gpu]))
    return one_direction * model.layers / model.moe_layers / 2


def _layout(gpu: str, ep: int) -> Layout:
    """The cell's ranks: DP x EP over ``ep`` consecutive GPUs of the preset's system."""
    sysm = system(GPUS[gpu])
    return Layout(dp=ep, ep=ep, gpus_per_node=sysm.gpus_per_node,
                  gpus_per_domain=sysm.gpus_per_domain)


def link(gpu: str, ep: int) -> str:
    """'nvlink' where the cell's EP group stays in one NVLink domain, else 'ib'."""
    return _layout(gpu, ep).link("ep")


def rows() -> list[tuple]:
    """(operation, GPU, backend, EP, link, measured us, predicted us), every cell."""
    out = []
    for (op, gpu, backend), values in MEASURED_US.items():
        for ep, us in zip(EP_SIZES, values):
            out.append((op, gpu, backend, ep, link(gpu, ep), us, cell_s(gpu, backend, ep) * 1e6))
    return out
