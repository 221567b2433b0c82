"""One layer of a decoder: its FLOPs, and the tensors it saves for backward.

``flops`` counts model FLOPs per token (matmuls and the attention over each layer's keys);
``saved_tensors`` writes down, per implementation (Korthikanti's GPT layer, Megatron-Core
with Transformer Engine, torch/torchtitan, transformers' modules, the project's plain
block), what one layer keeps; ``activations`` prices those tables for a layer under TP,
SP, CP, recompute and expert routing (``selective``: Megatron's recompute modules;
``layer_formulas``: a GPT or Llama layer from its shape's numbers alone);
``recurrent`` what a hybrid's recurrent mixers
(Mamba, linear attention, short convolutions) keep and compute; ``compressed`` what
DeepSeek-V4's attention and mHC residual streams keep.

``adapters`` adds what LoRA adapters save and compute. May import: the specs
(``ledger.model``, ``ledger.config``, ``ledger.memory``), ``ledger.frameworks`` (FP8
saved inputs), ``ledger.finetune`` (peft's adapters) and ``ledger.anatomy.mixers``.
"""
from ledger.arch.adapters import (
                                     adapter_activation_bytes,
                                     adapter_flops_per_token,
                                     finetune_flops_per_token,
                                     frozen_wgrad_flops_per_token,
)
from ledger.arch.activations import (
                                     LayerActivations,
                                     head_bytes,
                                     kind_counts,
                                     layer_activations,
                                     layers_activation_bytes,
                                     recompute_working_bytes,
)
from ledger.arch.checkpointing import op_share
from ledger.arch.flops import (
                                     attention_flops_per_token,
                                     keys_factor,
                                     local_keys_factor,
                                     matmul_params_per_token,
                                     model_flops_per_token,
                                     recurrent_flops_per_token,
)
from ledger.arch.layer_formulas import (activation_bytes_per_layer,
                                        llama_activation_bytes_per_layer)
from ledger.arch.saved_tensors import HF, KORTHIKANTI, MEGATRON, PLAIN, TORCH, SavedTensors, table
from ledger.arch.selective import selected

__all__ = ["HF", "KORTHIKANTI", "LayerActivations", "MEGATRON", "PLAIN", "SavedTensors", "TORCH",
           "activation_bytes_per_layer", "adapter_activation_bytes", "adapter_flops_per_token",
           "attention_flops_per_token", "finetune_flops_per_token",
           "frozen_wgrad_flops_per_token", "head_bytes",
           "keys_factor", "kind_counts", "local_keys_factor",
           "layer_activations", "layers_activation_bytes", "llama_activation_bytes_per_layer",
           "matmul_params_per_token", "model_flops_per_token", "op_share",
           "recompute_working_bytes",
           "recurrent_flops_per_token", "selected", "table"]
