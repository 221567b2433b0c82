"""Where each low-precision recipe fact (``ledger.frameworks.fp8``) was read: file and line at
a named snapshot (TransformerEngine d0067d0d, Megatron-LM d98e8a64, Megatron-Bridge 067f987d,
pytorch/ao 36027d82 and 06f5ff43, torchtitan 238fa995; DeepSeek-V3: arXiv:2412.19437; NVFP4
training: arXiv:2509.25149). The bytes per element of each format are ``ledger.formats``'."""

# Each recipe fact and where it was read (TransformerEngine d0067d0d, Megatron-LM d98e8a64,
# pytorch/ao 36027d82; DeepSeek-V3: arXiv:2412.19437).
SOURCES = {
    "recipe names": "Megatron-LM megatron/core/transformer/transformer_config.py L594-600 "
                    "(fp8_recipe: tensorwise, delayed (default), mxfp8, blockwise, custom); "
                    "torchao torchao/float8/config.py L141-160 (Float8LinearRecipeName: "
                    "tensorwise (default), rowwise, rowwise_with_gw_hp)",
    "weight_cache_bytes (TE)": "TE transformer_engine/pytorch/module/linear.py L466-475 (the "
                               "weight quantized rowwise and columnwise, i.e. FP8 + its "
                               "transpose), L1958-1960 and L2068-2071 (kept in _fp8_workspaces "
                               "across micro-batches when is_first_microbatch is given); "
                               "Megatron core/extensions/transformer_engine.py L1338-1345 "
                               "(passes it unless disable_parameter_transpose_cache, "
                               "transformer_config.py L1175: False)",
    "act_bytes (TE)": "TE linear.py L378-398 (input quantized before the SP all-gather), "
                      "L598-621 (the quantized local input is what is saved for backward)",
    "tp_gather_bytes (TE)": "TE linear.py L403-411 (forward all-gather with the quantizer), "
                            "L979-999 (backward re-gather of the input in FP8), module/base.py "
                            "L1720-1750 (row-parallel grad output all-gathered in FP8); the "
                            "reduce-scatters carry BF16 outputs and input grads",
    "blockwise": "TE transformer_engine/common/recipe/__init__.py L392-440 (Float8BlockScaling: "
                 "x and grad 1D 1x128 blocks, w 2D 128x128 blocks, float32 scales; FP8 tensor "
                 "and transpose quantized separately)",
    "delayed meta": "TE recipe/__init__.py L173, L255 (DelayedScaling amax_history_len 1024 "
                    "in TE); Megatron transformer_config.py L621 (fp8_amax_history_len 1)",
    "param_gather (Megatron)": "Megatron megatron/training/arguments.py L2016-2018 "
                               "(--fp8-param-gather: the compute param kept in FP8, "
                               "all-gathered in FP8), L1097 (distributed optimizer or FSDP); "
                               "transformer_config.py L602-608 (fp8_param: GEMM weights only, "
                               "biases unchanged)",
    "torchao": "torchao torchao/float8/float8_linear.py L29-45 (matmul_with_hp_or_float8_args "
               "saves input_hp and weight_hp_t: BF16 saved, FP8 cast per use, no cache); "
               "config.py L225, L272-273 (enable_fsdp_float8_all_gather, tensorwise only)",
    "deepseek-v3": "arXiv:2412.19437 sec. 3.3 (fig. 6: Fprop, Dgrad, Wgrad in FP8; embedding, "
                   "output head, MoE gating, normalization and attention kept in BF16/FP32), "
                   "sec. 3.3.2 (1x128 activation tiles, 128x128 weight blocks), sec. 3.3.3 "
                   "(BF16 AdamW moments, FP32 master weights and gradients; activations cached "
                   "in FP8 for the linear layers' backward; the attention output in E5M6; the "
                   "MoE SwiGLU input cached in FP8 and its output recomputed; activations "
                   "before the MoE up-projections and gradients before the down-projections "
                   "dispatched in FP8, forward and backward combine in BF16; DeepEP, its "
                   "all-to-all library, benchmarks 'FP8 dispatching and BF16 combining': "
                   "deepseek-ai/DeepEP README.md, Performance). Not stated there "
                   "and assumed here: BF16 working weights with cached FP8 copies, as TE's "
                   "blockwise recipe keeps them",
    "mxfp8 (TE)": "TE transformer_engine/common/recipe/__init__.py L337-373 (MXFP8BlockScaling: "
                  "32-element blocks, E8M0 scales, the tensor and its transpose both quantized "
                  "from the high-precision input); pytorch/tensor/mxfp8_tensor.py L78-95 and "
                  "L139-176 (row- and column-wise uint8 data and scale grids: "
                  "ledger.formats); module/linear.py L466-475 (the weight quantized both ways, "
                  "cached as the FP8 recipes' weights are); L604-619 (the saved input keeps its "
                  "column-wise copy only: MXFP8 and NVFP4 quantizers gather column-wise, "
                  "quantized_tensor.py L607-609); Megatron transformer_config.py L594-600 "
                  "('mxfp8' for Blackwell architecture only)",
    "mxfp8 param gather (Megatron)": "Megatron core/distributed/param_and_grad_buffer.py "
                                     "L1160-1179 (with the distributed optimizer and MXFP8 params "
                                     "the param all-gather runs in BF16 through the gradient "
                                     "buffer, then re-quantizes: _post_param_sync L301-333); "
                                     "TE pytorch/tensor/utils.py L30-99 (replace_raw_data has no "
                                     "MXFP8 case); Megatron-Bridge 067f987d src/megatron/bridge/"
                                     "training/mixed_precision.py L255-266 (bf16_with_mxfp8_mixed: "
                                     "fp8_param_gather and reuse_grad_buf_for_mxfp8_param_ag on)",
    "nvfp4 (TE)": "TE common/recipe/__init__.py L489-608 (NVFP4BlockScaling: E2M1, 16-element "
                  "E4M3 block scales and an fp32 per-tensor scale; 16x16 blocks for weights "
                  "L600-604; the random Hadamard transform on the column-wise input and "
                  "gradient, stochastic rounding on the gradient, L593-608: the wgrad path); "
                  "pytorch/tensor/nvfp4_tensor.py L273-399 (scale grids, packed data, amax: "
                  "ledger.formats); common/hadamard_transform/hadamard_transform.cu L43-62 (the "
                  "16x16 transform as bf16 mma_m16_n16_k16); hadamard_transform_cast_fusion.cu "
                  "(cvt.rs.satfinite.e2m1x4.f32: stochastic rounding in the cast)",
    "nvfp4 quantization reads (TE)": "TE v2.11 (c188b533) transformer_engine/pytorch/csrc/"
                                     "quantizer.cpp L1091-1103 (MXFP8Quantizer::quantize: one "
                                     "nvte_quantize_v2, both copies from one read), L1446-1646 "
                                     "(NVFP4Quantizer::quantize_impl: hadamard_transform_amax "
                                     "L1498, the row-wise cast L1570, the column-wise Hadamard "
                                     "cast L1640 - three reads of a BF16 input or gradient); "
                                     "common/recipe/__init__.py L452-468 (RHT on fp4_quant_fwd_"
                                     "inp and fp4_quant_bwd_grad, not the weights); pytorch/"
                                     "distributed.py L1349 (the SP shard quantized before its "
                                     "all-gather) - ledger.step.quantize",
    "nvfp4 param gather (Megatron)": "Megatron param_and_grad_buffer.py L1181-1186 (the param "
                                     "buffer holds the packed NVFP4 bytes: "
                                     "nvfp4_packed_numel); TE pytorch/tensor/utils.py L752-966 "
                                     "(_cast_master_weights_to_nvfp4_2d: each rank casts its "
                                     "shard, the fp32 amax of every 16x16 tile all-reduced, L834-"
                                     "851; the column-wise copy made after the gather); "
                                     "Megatron-Bridge mixed_precision.py L405-417 "
                                     "(bf16_with_nvfp4_mixed: fp4_param_gather on)",
    "bf16 layers": "Megatron transformer_config.py L649-658 (first_last_layers_bf16, "
                   "num_layers_at_start_in_bf16 / _at_end_ default 1 / 1); Megatron-Bridge "
                   "mixed_precision.py L421-429 (Nemotron 3 Super's NVFP4: the last 14 layers "
                   "BF16); arXiv:2509.25149 (NVFP4 pretraining: a few first and last blocks "
                   "kept in BF16); keep_mtp_spec_in_bf16 (Megatron-Bridge recipes/nemotronh/"
                   "nemotron_3_super.py L94-98 @ v0.4.0: mtp_num_layers 2, the MTP block in "
                   "BF16; te_quant.cfg's mtp_bf16 'mtp.*') - the step times those 4 layers "
                   "with the BF16 ends at the BF16 peak (ledger.step.gemm.bf16_share)",
    "module formats (time)": "Megatron-LM d98e8a64 megatron/core/extensions/"
                             "transformer_engine.py L312-323 (a module whose quantization "
                             "file config names no FP8 / FP4 recipe runs under "
                             "fp8_autocast(enabled=False): BF16), L350 (an mxfp8 config: "
                             "MXFP8BlockScaling), L363-369, L1341-1344 (TELinear.forward runs "
                             "under that context, its backward under the forward's recipe); "
                             "TE common/recipe/__init__.py L593-608 (the Hadamard transform is "
                             "NVFP4BlockScaling's, no other recipe's); Megatron-Bridge "
                             "scripts/performance/configs/nemotronh/te_quant.cfg @ v0.4.0 "
                             "(Nemotron 3 Super's NVFP4: linear_qkv, linear_proj, "
                             "fc1/fc2_latent_proj BF16, mixer.out_proj MXFP8, mtp.* BF16)",
    "mxfp8 (torchao)": "pytorch/ao 06f5ff43 torchao/prototype/mx_formats/mx_linear.py (mx_mm."
                       "forward: ctx.save_for_backward(input_hp, weight_hp) - BF16 saved, every "
                       "operand cast to MXFP8 per use, all three GEMMs in MXFP8); torchtitan "
                       "238fa995 components/quantization/mx.py L27-97 (MXLinearConverter; SM100 "
                       "or gfx950 only, L42-44), config/job_config.py L766-790 (recipe "
                       "mxfp8_cublas, filter_fqns ['output']); the grouped GEMMs of routed "
                       "experts need their own converter, quantize.grouped_mm.mx (L793-805)",
}
