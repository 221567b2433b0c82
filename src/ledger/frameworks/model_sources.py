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
         "L878-968 @ v0.6.0), which tests/test_deepseek_v4.py holds the ledger's to. "
         "What Megatron runs of it is read off the Megatron-LM dev commit Megatron-Bridge "
         "v0.6.0 pins for it (.dev.commit 43e45e13): mla_up_proj re-runs q_b, the per-head "
         "q norm, kv_proj, kv_norm and RoPE and drops their outputs after the kernel "
         "(experimental_attention_variant/deepseek_v4_hybrid_attention.py L691-878, "
         "L340-343: ledger.step.recompute.CSA_UP, ledger.arch.compressed)")
_DSA_LOSS = ("DeepSeek-V4's indexer KL loss as Megatron-LM 43e45e13 (Megatron-Bridge v0.6.0's "
             ".dev.commit) runs it: transformer_config.py L337-342 (dsa_indexer_loss_coeff, "
             "default None; dsa_indexer_use_sparse_loss, default False), experimental_"
             "attention_variant/csa.py L1870-1921 (the fused training path, the indexer's "
             "inputs detached L1886-1887), csa_kernels.py L1098-1110 (the indexer's scores), "
             "L1198-1272 (the target: the attention's scores again over the top-k or every "
             "causal entry), L1274-1367 (the indexer's backward run in the forward), "
             "L1368-1371 (zeros without the loss), L1014-1016 (the backward only scales "
             "it): ledger.frameworks.dsa_loss, ledger.step.indexer_loss; Megatron-Bridge "
             "perf_recipes/deepseek/gb200/deepseek_v4.py L82-83 @ v0.6.0 (coeff 0.01, sparse)")
_HASH = ("hash-routed first layers keep the router's learned h x E weight and GEMM; only the "
         "choice of experts is a token-id buffer (transformers modeling_deepseek_v4.py "
         "L1100-1128; Megatron-Bridge deepseek_v4_bridge.py L51-55, L500-501 @ v0.6.0: "
         "tid2eid a buffer, moe_n_hash_layers): priced as a learned router")

_WINDOW = ("gpt-oss: a sliding-window layer's core is the band cuDNN's fused kernel is handed "
           "(TransformerEngine v2.12 5671fd36 common/fused_attn/fused_attn.cpp L403-437, "
           "sinks L443-447, Blackwell's non-deterministic backward L448-455), priced at that "
           "kernel's measured time on gpt-oss's own shape: NVIDIA/cudnn-frontend benchmark/"
           "sdpa_benchmark_training/results/gpt_oss/{gb200,gb300}/*.csv @ fb682ce7 (window "
           "128, head dim 64; BF16 161 / 182 TFLOP/s at 4K keys on GB200; its FP8 backward "
           "grows as s^2): ledger.system.attention")
_ROPE = ("gpt-oss: YaRN's rotary embedding in eager PyTorch - NVIDIA/Megatron-LM@d7288711 "
         "(Megatron-Bridge v0.4.x's pin; the same at 55ac7082 and 0d8e0714) models/common/"
         "embeddings/rope_utils.py L279-284 (an mscale other than 1 takes the unfused RoPE), "
         "L92-126 (_apply_rotary_pos_emb_bshd), transformer/attention.py L1104-1125 (YaRN's "
         "factor passed as mscale), yarn_rotary_pos_embedding.py L252-283; gpt-oss's factor "
         "(Megatron-Bridge models/gpt_oss/gpt_oss_bridge.py L94-100 @ v0.4.0: scaling 32, "
         "mscale None): ledger.step.eager")

# Framework.mtp_embedding: where MTP modules find the embedding they share under a pipeline
_MTP_EMBEDDING = ("Megatron-LM d98e8a64 megatron/core/models/gpt/gpt_model.py L166-181 (every "
                  "model chunk holding MTP builds a LanguageModelEmbedding: 'if self.pre_process "
                  "or self.mtp_process'; L289-290: the output layer skips its weight only on the "
                  "first stage), models/common/language_module/language_module.py L253-291 "
                  "('we also need to maintain duplicated embedding weights in mtp process stage', "
                  "zeroed, marked shared_embedding and all-reduced from the first stage, L314) - a "
                  "parameter like any other (its gradient, its optimizer state; its gradient "
                  "all-reduced with the first stage's, distributed/finalize_model_grads.py L146)")
_MTP_SHARED = ("DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.3, 'Shared Embedding and Output "
               "Head for Multi-Token Prediction': DualPipe puts the shallowest layers (with the "
               "embedding) and the deepest (with the output head) on the same PP rank, which "
               "'enables the physical sharing of parameters and gradients' between the MTP "
               "module and the main model; a rank without the first stage keeps a copy, as "
               "Megatron-Core does")
MODEL_SOURCES = {"megatron": {"hyper_connections": _HC, "deepseek_v4_attention": _DSV4,
                              "hash_routing": _HASH, "attention_window_kernel": _WINDOW,
                              "dsa_indexer_loss": _DSA_LOSS,
                              "yarn_eager_rope": _ROPE, "mtp_embedding": _MTP_EMBEDDING},
                 "deepseek": {"mtp_embedding": _MTP_SHARED},
                 "torchtitan": {"mtp_embedding": "torchtitan b5bcd76c torchtitan/models/"
                                "deepseek_v3/MTP.md L43 ('explicitly rejects CP and PP when MTP "
                                "is enabled'): no copy"},
                 "deepspeed": {"mtp_embedding": "DeepSpeed's pipeline engine builds no MTP "
                               "modules of its own: n/a"},
                 "hf": {"mtp_embedding": "no pipeline schedule in transformers: n/a"}}
