"""Fine-tuning: what trains and what it is stored in.

``spec`` holds ``FineTune`` (full, or LoRA / QLoRA on a frozen base; module kinds or a
layer range frozen); ``modules`` the weight matrices of each layer kind as transformers
builds them, under the names (``names``, family by family) peft matches; ``lora``
peft's adapters on them; ``nf4`` bitsandbytes' 4-bit bytes; ``trainable`` a layer's
parameters by state class (trained, frozen, NF4, adapters) and by how TP and EP divide
them.

May import: ``ledger.errors``, ``ledger.anatomy``, ``ledger.model``, ``ledger.memory``.
"""
from ledger.finetune.lora import Adapter, Targets, edge_adapters, layer_adapters, resolve
from ledger.finetune.nf4 import dequantized_bytes, nf4_bytes, nf4_bytes_per_param
from ledger.finetune.spec import ALL_LINEAR, KINDS, METHODS, FineTune
from ledger.finetune.trainable import CLASSES, Counts, edge_state, layer_state, trainable

__all__ = ["ALL_LINEAR", "Adapter", "CLASSES", "Counts", "FineTune", "KINDS", "METHODS",
           "Targets", "dequantized_bytes", "edge_adapters", "edge_state", "layer_adapters",
           "layer_state", "nf4_bytes", "nf4_bytes_per_param", "resolve", "trainable"]
