"""The SMs the flex dispatcher's kernels take from compute while an overlapped all-to-all
runs (DualPipe's pairs, Megatron's combined 1F1B: ``ledger.step.timing.pair_s``,
``ledger.step.layer_comms.combined_1f1b_s``): DeepEP's, or HybridEP's by whether its group
spans NVLink domains, or the launch's own count (``ParallelConfig.ep_sms``). NCCL's
all-to-all kernels' share is not modelled."""
from __future__ import annotations

import numpy as np

from ledger.placement.ep_buffers import DEFAULT_SMS as DEEPEP_SMS
from ledger.system import System

# DeepEP's normal kernels run on 20 SMs (deep_ep/buffers/legacy.py L31, Buffer.num_sms, at
# deepseek-ai/DeepEP dd758caf; DeepSeek-V3 report sec. 3.2.2: "only 20 SMs are sufficient"):
# the one figure its buffers are sized by too (ledger.placement.ep_buffers), DEEPEP_SMS here

# HybridEP's dispatch and combine kernels, when Megatron passes no SM count
# (moe_flex_dispatcher_num_sms None: token_dispatcher.py L1157-1158 @d98e8a64): 24 SMs where
# its EP group is one NVLink domain, 8 where it spans several ("num_of_nodes", the group over
# the ranks per domain: hybrid_ep_buffer.py L83) - csrc/hybrid_ep/config.cuh L315-316 at
# deepseek-ai/DeepEP 34152ae2, the commit Megatron-Bridge v0.5.0 to v0.6.0 build
# (docker/Dockerfile.ci L40 @v0.5.0, L45 @v0.6.0); L366-367 on the hybrid-ep branch at 94a9f8f6
HYBRIDEP_SMS_IN_DOMAIN, HYBRIDEP_SMS_ACROSS = 24, 8


def ep_backend(cfg) -> str:
    """The flex dispatcher's kernels: the config's (``ParallelConfig.ep_backend``), else
    DeepEP's, Megatron's default."""
    return getattr(cfg, "ep_backend", None) or "deepep"


def ep_sms(cfg, system: System):
    """The SMs the flex dispatcher's kernels run on: the config's own (``ep_sms``), else
    DeepEP's 20, or HybridEP's 24 with its TP x EP group inside one NVLink domain and 8
    across domains (``HYBRIDEP_SMS_IN_DOMAIN`` / ``_ACROSS``); arrays for the planner's grid."""
    from ledger.config import expert_tp

    own = getattr(cfg, "ep_sms", None)
    if own:
        return own
    if ep_backend(cfg) != "hybridep":
        return DEEPEP_SMS
    ranks = np.asarray(cfg.ep) * np.asarray(expert_tp(cfg))
    return np.where(ranks <= system.gpus_per_domain, HYBRIDEP_SMS_IN_DOMAIN,
                    HYBRIDEP_SMS_ACROSS)


def ep_sm_share(cfg, system: System):
    """The SMs a running all-to-all takes from compute: the flex dispatcher's (``ep_sms``)."""
    from ledger.config import dispatcher

    return ep_sms(cfg, system) / system.gpu.sms if dispatcher(cfg) == "flex" else 0.0
