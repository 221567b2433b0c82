"""FineTune: what trains in a run - everything, everything but some module kinds or a
range of layers, or low-rank adapters on a frozen (QLoRA: 4-bit) base, as peft and
bitsandbytes build them. A frozen input, checked at construction; the model-dependent
checks (a target that matches nothing, a layer range past the last layer) are
``ledger.finetune.lora.check``.

>>> FineTune(method="lora", lora_rank=16, lora_alpha=32, lora_targets="all-linear").scaling
2.0
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError, require_positive

METHODS = ("full", "lora", "qlora")
# module kinds a run may freeze: the components of ModelSpec.breakdown
KINDS = ("embedding", "positions", "attention", "ssm", "linear_attention", "conv", "mlp",
         "experts", "shared_experts", "router", "norms", "output")
ALL_LINEAR = "all-linear"  # peft's INCLUDE_LINEAR_LAYERS_SHORTHAND (utils/constants.py L404)


@dataclass(frozen=True, kw_only=True)
class FineTune:
    """One fine-tuning setup. Defaults are peft 0.21.2's LoraConfig (r 8, lora_alpha 8,
    dropout 0, target_modules None: the family's default, tuners/lora/config.py) and the
    QLoRA recipe's BitsAndBytesConfig (NF4, double quantisation, bf16 compute; QLoRA paper
    sec. 3 and artidoro/qlora qlora.py L288-297) - transformers' own BitsAndBytesConfig
    defaults are fp4 without double quantisation and fp32 compute."""

    method: str = "full"  # full: the base trains; lora / qlora: adapters on a frozen base
    freeze: tuple[str, ...] = ()  # module kinds kept frozen (KINDS)
    freeze_layers: tuple[int, int] | None = None  # [start, stop): layers with nothing trained
    lora_rank: int = 8
    lora_alpha: float = 8.0
    lora_targets: tuple[str, ...] | str | None = None  # names, "all-linear", None: peft's default
    lora_dropout: float = 0.0
    dora: bool = False  # DoRA: a magnitude vector of out_features per adapted matrix
    double_quant: bool = True  # bnb_4bit_use_double_quant
    quant_block: int = 64  # bitsandbytes' NF4 block size
    compute_bytes: int = 2  # bnb_4bit_compute_dtype: bf16 (the dequantised copy's dtype)
    kbit_upcast: bool = False  # peft prepare_model_for_kbit_training: unquantised params to fp32

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise LedgerError("finetune", f"must be one of {', '.join(METHODS)}, got "
                                          f"{self.method!r}")
        bad = [k for k in self.freeze if k not in KINDS]
        if bad:
            raise LedgerError("freeze", f"unknown module kind {bad[0]!r}; known: "
                                        f"{', '.join(KINDS)}")
        if self.freeze and self.method != "full":
            raise LedgerError("freeze", f"{self.method} already freezes the whole base; "
                                        f"--freeze applies to --finetune full")
        require_positive("lora_rank", self.lora_rank)
        if not self.lora_alpha > 0:
            raise LedgerError("lora_alpha", f"must be > 0, got {self.lora_alpha}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise LedgerError("lora_dropout", f"must lie in [0, 1), got {self.lora_dropout}")
        if self.freeze_layers is not None:
            start, stop = self.freeze_layers
            if not 0 <= start < stop:
                raise LedgerError("freeze_layers", f"needs 0 <= start < stop, got "
                                                   f"{start}:{stop}")
        if isinstance(self.lora_targets, str) and self.lora_targets != ALL_LINEAR:
            raise LedgerError("lora_targets", f"a single string must be {ALL_LINEAR!r} (a list "
                                              f"of module names otherwise), got "
                                              f"{self.lora_targets!r}")
        if self.quant_block not in (32, 64, 128, 256, 512, 1024, 2048, 4096):
            raise LedgerError("quant_block", f"bitsandbytes takes blocks of 32..4096 (powers of "
                                             f"2), got {self.quant_block}")

    @property
    def adapters(self) -> bool:
        return self.method != "full"

    @property
    def quantized(self) -> bool:
        return self.method == "qlora"

    @property
    def scaling(self) -> float:
        """peft's LoRA scaling lora_alpha / r (tuners/lora/layer.py L278-281, no rsLoRA)."""
        return self.lora_alpha / self.lora_rank

    def frozen_layer(self, i: int) -> bool:
        """Layer ``i`` trains nothing (no base weights, no adapters)."""
        return self.freeze_layers is not None and self.freeze_layers[0] <= i < self.freeze_layers[1]
