"""A real training step measured here: transformers' Llama and Mixtral on CPU under each
recompute policy and loss, every allocation recorded by torch's profiler, point by point
against the ledger (ledger.verify.steps; tests/test_memory_measured.py holds the points it
marks 'held'). Needs the torch extra and transformers."""
from ledger.verify.steps import table

if __name__ == "__main__":
    print(table())
