"""Framework conventions as data: what Megatron-Core, torchtitan (FSDP2), DeepSpeed, Hugging
Face modules and ``ideal`` (the seed's accounting) keep and send.

``conventions`` holds one ``Framework`` record (its fields and methods: ``framework``) per
framework (and per version where a
published measurement needs the code of its day: ``torchtitan@2024-12``) and
``get``/``of`` to pick one; ``losses`` what each loss implementation keeps of the
logits; ``cp`` context parallelism's attention buffers;
``dtypes`` the state dtypes a launch sets beside the framework's (BF16 gradients,
the precision-aware optimizer's moments);
``sources`` the file and line (at a named snapshot) behind every field (the PyTorch facts
several frameworks share: ``torch_sources``); ``fp8`` the FP8,
MXFP8 and NVFP4 recipes (what stays BF16/FP32, what moves low, which GEMMs run at which
peak; their sources ``fp8_sources``, the weights they quantize ``gemm_weights``). Nothing
outside this package branches on a framework's name: every other layer reads the fields.

May import: ``ledger.errors``, ``ledger.memory`` (the bytes-per-parameter tables).
"""
from ledger.frameworks.conventions import DEFAULT, FRAMEWORKS, Framework, get, of
from ledger.frameworks.cp import CP_BUFFERS
from ledger.frameworks.fp8 import (
                                   RECIPES,
                                   ep_element_bytes,
                                   ep_wire_ratio,
                                   gemm_input_bytes,
                                   gemm_precision,
                                   mlp_width_bytes,
                                   peak_flops,
                                   saved_inputs,
                                   spell,
                                   with_weights,
)
from ledger.frameworks.losses import LOSSES, loss
from ledger.frameworks.sources import SOURCES

__all__ = ["CP_BUFFERS", "DEFAULT", "FRAMEWORKS", "Framework", "LOSSES", "RECIPES", "SOURCES",
           "ep_element_bytes", "ep_wire_ratio", "gemm_input_bytes", "gemm_precision", "get",
           "loss", "mlp_width_bytes", "of", "peak_flops", "saved_inputs", "spell",
           "with_weights"]
