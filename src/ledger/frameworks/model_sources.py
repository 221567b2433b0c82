"""Sources of the architecture facts a framework decides for one model family, merged into
``ledger.frameworks.SOURCES`` per framework: each fact's file and line at a named commit.
The counts and formulas live in the modules named; this table is where a reader finds them.
"""
from __future__ import annotations

_HC = ("Megatron-LM d98e8a64 megatron/core/transformer/hyper_connection.py L169-193 "
       "(HyperConnectionModule: mapping_proj n h -> n^2 + 2n, its bias, alpha_pre / post / "
       "res), L205-215 (whole on every TP rank, its grads reduced as sequence-parallel "
       "ones), L217-260 (the norm and projection read the n-stream input), L371-418 "
       "(aggregate and the H_res mix read it again: one saved tensor), L288-318 (the "
       "expansion multiplies the block output), L89-113 (Sinkhorn keeps its initial "
       "matrix); transformers 5.23.0 models/deepseek_v4/modeling_deepseek_v4.py L887-1017 "
       "(the same sites, the head): ledger.anatomy.compressed, ledger.arch.compressed")
_DSV4 = ("Megatron-LM d98e8a64 has no DeepSeek-V4 attention; Megatron-Bridge v0.6.0 builds it "
         "on a later Megatron-Core (models/deepseek/deepseek_v4_bridge.py L57-61: "
         "DSv4HybridSelfAttention, CompressedSparseAttention, CSAIndexer, Compressor; "
         "L396-513: its settings from the config.json). Its shape, GEMMs and saved tensors "
         "are transformers 5.23.0's (modeling_deepseek_v4.py L314-884: "
         "ledger.anatomy.compressed, ledger.arch.compressed, ledger.step.gemm._csa_gemms); "
         "the table's model FLOPs are Megatron-Bridge's count (training/utils/flop_utils.py "
         "L878-968 @ v0.6.0), which tests/test_deepseek_v4.py holds the ledger's to; "
         "mla_up_proj recompute of it and the indexer loss are named as not priced "
         "(ledger.render.bridge.config_of)")
_HASH = ("hash-routed first layers keep the router's learned h x E weight and GEMM; only the "
         "choice of experts is a token-id buffer (transformers modeling_deepseek_v4.py "
         "L1100-1128; Megatron-Bridge deepseek_v4_bridge.py L51-55, L500-501 @ v0.6.0: "
         "tid2eid a buffer, moe_n_hash_layers): priced as a learned router")

MODEL_SOURCES = {"megatron": {"hyper_connections": _HC, "deepseek_v4_attention": _DSV4,
                              "hash_routing": _HASH}}
