"""Context parallelism's transient buffers in one attention call, by implementation.

Ring attention splits the sequence over cp ranks; each rank computes its queries
against every rank's keys and values, so while one layer's attention runs (forward, and
again in its backward) it holds copies of K and V beyond what the layer saves. Bytes are
per element of this rank's local K + V (at the heads the kernel reads) and of its local
Q: ``kv_e`` copies in the activation dtype, ``kv_cp_e`` copies per CP rank (an
all-gathered buffer), ``kv_fp32`` bytes of fp32 accumulators; the same for Q.

>>> b = CP_BUFFERS["torch-allgather"]
>>> b.forward_bytes(kv_elems=10, q_elems=5, e=2, cp=4)  # (2 + 4) x 2 x 10 + (2 + 12) x 5
190.0
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpBuffers:
    name: str
    source: str
    fwd_kv_e: float = 0.0
    fwd_kv_cp_e: float = 0.0
    fwd_kv_fp32: float = 0.0
    fwd_q_e: float = 0.0
    fwd_q_fp32: float = 0.0
    bwd_kv_e: float = 0.0
    bwd_kv_cp_e: float = 0.0
    bwd_kv_fp32: float = 0.0
    bwd_q_e: float = 0.0
    bwd_q_fp32: float = 0.0

    def forward_bytes(self, kv_elems, q_elems, e, cp):
        kv = (self.fwd_kv_e + self.fwd_kv_cp_e * cp) * e + self.fwd_kv_fp32
        return kv * kv_elems + (self.fwd_q_e * e + self.fwd_q_fp32) * q_elems

    def backward_bytes(self, kv_elems, q_elems, e, cp):
        kv = (self.bwd_kv_e + self.bwd_kv_cp_e * cp) * e + self.bwd_kv_fp32
        return kv * kv_elems + (self.bwd_q_e * e + self.bwd_q_fp32) * q_elems


CP_BUFFERS = {b.name: b for b in (
    CpBuffers(name="none", source="no context parallelism modelled for this framework"),
    CpBuffers(
        name="torch-allgather",
        fwd_kv_e=2, fwd_kv_cp_e=1, fwd_q_e=1, fwd_q_fp32=12,
        bwd_kv_e=3, bwd_kv_cp_e=1, bwd_kv_fp32=12, bwd_q_e=1, bwd_q_fp32=4,
        source="torch context_parallel, torch/distributed/tensor/experimental/_attention.py "
               "(the late-2024 file of the code index, with _AllGatherRotater and load "
               "balancing; torchtitan's default rotate method 'allgather', config_manager.py "
               "L365-377 @9dec370): forward - K and V made contiguous and concatenated (2 "
               "copies), all-gathered once (cp copies), each step's output and the fp32 "
               "_SDPAMerger out and its merge temporaries (3 x 4 B per Q element); backward "
               "- fp32 grad_query / grad_key / grad_value accumulators, the contiguous and "
               "concatenated K, V and their all-gather again, each step's bf16 gradients, "
               "the fp32 concatenated dK/dV and the one the all-to-all rotation receives"),
    CpBuffers(
        name="te-p2p",
        fwd_kv_e=3, bwd_kv_e=4, bwd_q_e=1,
        source="TransformerEngine d0067d0d transformer_engine/pytorch/attention/"
               "dot_product_attention/context_parallel.py (AttnFuncWithCPAndKVP2P, class at "
               "L1356): forward - the concatenated K/V send buffer (L1690) and the receive "
               "buffer of each ring step (L1706), about 3 local K/V copies alive; backward - "
               "dq_buffer = empty_like(q) and two (2, *kv.shape) buffers holding K/V and "
               "dK/dV (L2396-2402); Megatron's --cp-comm-type default p2p (arguments.py "
               "L3221)"),
)}
