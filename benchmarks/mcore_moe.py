"""NVIDIA's Megatron Core MoE report (arXiv 2603.07685v2), Table 11: nine measured runs of
DeepSeek-V3 and Qwen3-235B on GB300 / GB200 / H100 as prediction rows
(ledger.validation.mcore_moe states the one rule that sets each run's settings): published
vs predicted tokens/s/GPU, the memory verdict, a summary by GPU, the pairs, and the FLOPs per
token the paper counts against the ledger's (ledger.render.mcore_moe)."""
from ledger.render.mcore_moe import lines

if __name__ == "__main__":
    print("\n".join(lines()))
