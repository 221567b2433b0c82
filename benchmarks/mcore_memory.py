"""NVIDIA's Megatron Core MoE report (arXiv 2603.07685v2), sec. 4.1: DeepSeek-V3's
activation memory per GPU at Table 3's configuration and what each technique saves (Table
4's recompute modules, memory-efficient permutation, FP8 activations), published against
the ledger at the configuration ledger.validation.mcore_moe.MEMORY_RULE sets
(ledger.render.mcore_memory)."""
from ledger.render.mcore_memory import lines

if __name__ == "__main__":
    print("\n".join(lines()))
