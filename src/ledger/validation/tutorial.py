"""A third-party measurement of one run in four precisions, held as prediction rows: NVIDIA's
Megatron-Bridge low-precision training tutorial, Llama 3.1 8B on 4 GB200, step time in BF16,
FP8 (current scaling), MXFP8 and NVFP4 (``SOURCE``; the figures, ``PUBLISHED``, as the
notebook prints them). None of these rows is fitted on or used to choose anything; the
precisions' ratios are what a user choosing a precision acts on
(``ledger.render.bridge_tutorial`` prices them; ``benchmarks/validation.py`` prints them).

The run, read from the notebook at ``SOURCE["commit"]`` (the commit that added it; the
figures are unchanged at 4d7ce7908a, which only renames the recipe import) and the recipe it
calls, ``llama31_8b_pretrain_config`` (``RECIPE``):
- placement: 4 GPUs, ``torchrun --nproc-per-node 4`` (cells 12, 16, 20, 24); TP 1, PP 1
  (recipe llama3.py L367-368) and CP 1 (the notebook's ``context_parallel_size=1`` over the
  recipe's 2), so DP 4; MBS 2, GBS 128 (cells 11, 15, 19, 23); sequence 8192
  (``_llama3_common`` seq_length default, L453); no recompute (the recipe sets none).
- state: the distributed optimizer, gradient reduction and parameter gather overlapped,
  gradients reduced in FP32 (L553-561; ``bf16_mixed`` grad_reduce_in_fp32 True,
  mixed_precision.py L178-184) - the library recipe, not the perf scripts' BF16 reduction;
  TE's fused cross-entropy (llama3.py L522); no CUDA graphs, no TP overlap (TP 1).
- precisions (``MixedPrecisionConfig.setup`` copies every field onto the model and DDP
  configs, mixed_precision.py L100-143): FP8 is ``bf16_with_fp8_current_scaling_mixed``
  (L272-290: tensorwise, the first and the last layer in BF16, FP8 param gather); MXFP8
  ``bf16_with_mxfp8_mixed`` (L242-253: FP8 param gather, no BF16 layers); NVFP4
  ``bf16_with_nvfp4_mixed`` (L392-403, no param gather) with the notebook's
  ``first_last_layers_bf16 = True``, ``num_layers_at_end_in_bf16 = 4`` (cell 23: "keep 4 out
  of the 32 layers in BF16"), the first ones at the config's default 0 (L66).
"""
from __future__ import annotations

from ledger.validation.bridge import BridgeRow

SOURCE = {"repo": "NVIDIA-NeMo/Megatron-Bridge",
          "path": "tutorials/training/reduced_precision_training.ipynb",
          "commit": "1e9a459b43aa1f62ca1356e554d2b0196ebdd546"}
RECIPE = {"path": "src/megatron/bridge/recipes/llama/llama3.py", "function":
          "llama31_8b_pretrain_config", "line": 360, "commit": SOURCE["commit"],
          "precisions": "src/megatron/bridge/training/mixed_precision.py"}
GPU, GPUS, GBS, MBS, SEQ = "gb200", 4, 128, 2, 8192
# precision -> (step time s, TFLOP/s/GPU, the notebook cell that prints them)
PUBLISHED = {"bf16": (11.65, 1158.1, 13), "fp8_cs": (8.57, 1574.0, 17),
             "fp8_mx": (8.63, 1562.8, 21), "nvfp4": (7.47, 1805.6, 25)}
# the MixedPrecisionConfig fields each precision's function (and cell 23) sets that the
# ledger prices (``ledger.render.bridge.precision_of`` reads them)
PRECISION_SETTINGS = {
    "bf16": {},
    "fp8_cs": {"first_last_layers_bf16": True, "num_layers_at_start_in_bf16": 1,
               "num_layers_at_end_in_bf16": 1, "fp8_param_gather": True},
    "fp8_mx": {"fp8_param_gather": True},
    "nvfp4": {"first_last_layers_bf16": True, "num_layers_at_start_in_bf16": 0,
              "num_layers_at_end_in_bf16": 4, "fp4_param_gather": False}}
GRAD_DTYPE = "fp32"  # bf16_mixed's grad_reduce_in_fp32 (mixed_precision.py L183)


def row(precision: str) -> BridgeRow:
    """The run in one precision as a Megatron-Bridge row (its tokens/s/GPU from the step
    time: GBS x sequence / GPUs / step time)."""
    step_s, _, cell = PUBLISHED[precision]
    return BridgeRow(
        id=f"tutorial/{GPU}/llama3-8b/{precision}/{GPUS}g/gbs{GBS}/mbs{MBS}", release="tutorial",
        table_model="Llama 3.1 8B", model="llama3-8b", model_variant=None, system=GPU, gpu=GPU,
        gpus=GPUS, precision_published=precision, precision=precision, gbs=GBS, mbs=MBS,
        seq_len=SEQ, tp=1, pp=1, cp=1, vp=None, ep=1, etp=None, fsdp=False, ga=None,
        tokens_per_s_per_gpu=GBS * SEQ / GPUS / step_s, model_tflops_per_gpu=PUBLISHED[
            precision][1], published_as="step time", source={**SOURCE, "cell": cell},
        recipe={**RECIPE, "ref": "tutorial", "settings": {"cross_entropy_fusion_impl": "te"},
                "precision": {"settings": PRECISION_SETTINGS[precision]}})


def rows() -> tuple[BridgeRow, ...]:
    return tuple(row(p) for p in PUBLISHED)
