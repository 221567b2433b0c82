"""Bytes a checkpoint's tensors take on disk: what one GPU holds when vLLM loads the whole
model (``ledger.serve.weights.bytes_by_rank`` at tp 1, the MXFP4 experts in their
safetensors layout) and the multi-token-prediction modules the files carry that vLLM does
not load without speculative decoding (``mtp_bytes``). This is the figure a checkpoint's
published size on disk holds the quantized formats to; the safetensors headers (megabytes)
are left out.

>>> from ledger.model import deepseek_v3
>>> from ledger.serve.quant import read_quant
>>> q = read_quant({"quant_method": "fp8", "weight_block_size": [128, 128]})
>>> round(checkpoint_bytes(deepseek_v3(), q) / 2**30, 2)  # R1's files: 641.30 GiB
641.29
"""
from __future__ import annotations

from dataclasses import replace

from ledger.anatomy.counts import mtp_sets
from ledger.serve.engine import WEIGHT_BYTES, ServeConfig
from ledger.serve.qbytes import kind_delta_bytes
from ledger.serve.quant import Quant
from ledger.serve.weights import bytes_by_rank, router_fp32_bytes


# families whose MTP layer vLLM loads as DeepSeek-V3's, with its own embed_tokens and
# shared_head.head among the layer's weights (spec_layer_weight_names: vllm 0.22.0
# deepseek_mtp.py:462-470, glm4_moe_mtp.py:345-352); other families' MTP blocks are counted
# without the copies
OWN_VOCAB_COPIES = ("deepseek_v3", "deepseek_v32", "glm4_moe")

# MTP depths the files carry where the model read from config.json counts none: Qwen3-Next's
# checkpoints hold one block (``mtp.*``: a full-attention MoE layer, ``fc``, ``pre_fc_norm_*``,
# ``norm``), which vLLM reads as ``num_nextn_predict_layers`` defaulting to 1
# (vllm 0.22.0 qwen3_next_mtp.py:60) and the main model skips (qwen3_next.py:582);
# DeepSeek-V3.2's config.json declares ``num_nextn_predict_layers`` 1, a key transformers'
# DeepseekV32Config does not read (so neither does ``ledger.io.hf``), and its files hold layer
# 61 as DeepSeek-V3's do (a model report's tensor list, tests/fixtures/serve/SOURCES.md)
# GLM-5's (glm_moe_dsa) likewise: its config.json declares 1, which the ledger's reader of
# that DeepSeek-V3.2 layout does not read, and GLM-5.1-FP8's files hold layer 78 (attention
# and MoE in FP8, eh_proj, enorm, hnorm, shared_head.norm in bf16, and no embed_tokens /
# shared_head.head copies: not in OWN_VOCAB_COPIES); vLLM drafts with it as DeepSeek's MTP
# (vllm 0.22.0 config/speculative.py:300-310)
UNDECLARED_MTP = {"qwen3_next": 1, "deepseek_v32": 1, "glm_moe_dsa": 1}


def mtp_bytes(model, q: Quant | None) -> float:
    """The MTP modules as DeepSeek-V3's checkpoint stores them (layer ``num_hidden_layers``
    on: README_WEIGHTS.md, deepseek-ai/DeepSeek-V3): each block's layers (``mtp_kinds``)
    in the checkpoint's format, as the stack's layers are; its ``eh_proj`` (2h -> h) and
    three norms (enorm, hnorm, shared_head.norm) in bf16 - vLLM builds eh_proj as a plain
    ``nn.Linear``, never quantized (vllm 0.22.0 vllm/model_executor/models/
    deepseek_mtp.py:73); and the block's own copies of the embedding and the output head
    (``model.layers.61.embed_tokens``, ``.shared_head.head``: the weights vLLM's MTP loader
    reads, deepseek_mtp.py:462-470; the README calls them shared, but the files hold them,
    each [vocab, hidden] bf16 in DeepSeek-R1's tensor list). None of it is loaded to serve
    (DeepseekV2ForCausalLM.load_weights skips the spec layers, deepseek_v2.py:1382-1384)."""
    if not model.mtp_layers and model.family in UNDECLARED_MTP:
        model = replace(model, mtp_layers=UNDECLARED_MTP[model.family])
    if not model.mtp_layers:
        return 0.0
    cfg = ServeConfig(context=1, quant=q)
    sets, first = mtp_sets(model), model.layers
    copies = 2 * model.vocab * model.hidden if model.family in OWN_VOCAB_COPIES else 0
    total = WEIGHT_BYTES * (model.mtp_params + sets * copies) + sets * sum(
        router_fp32_bytes(model, kind, resident=False) for kind in model.mtp_kinds)
    if q is not None:
        for depth in range(sets):
            for kind in model.mtp_kinds:
                total += sum(kind_delta_bytes(model, cfg, q, kind, first + depth, "checkpoint"))
    return total


def checkpoint_bytes(model, q: Quant | None) -> float:
    """The checkpoint's tensors on disk: every weight vLLM loads, on one GPU, as the files
    store it, and the MTP modules (``mtp_bytes``)."""
    loaded = sum(bytes_by_rank(model, ServeConfig(context=1, quant=q), "checkpoint")[0])
    return loaded + mtp_bytes(model, q)
