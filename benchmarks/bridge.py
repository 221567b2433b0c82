"""NVIDIA Megatron-Bridge's published pre-training rows (ledger.validation.bridge) through the
ledger: each row's memory verdict on report's path and its tokens/s/GPU on estimate's path
against the published figure, by GPU, dense / MoE and family, with a summary per group
(ledger.render.bridge states the one rule that turns a row into a run)."""
from ledger.render.bridge import bridge_table

if __name__ == "__main__":
    print(bridge_table())
