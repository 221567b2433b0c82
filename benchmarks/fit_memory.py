"""The memory model's one fit: the caching allocator's fragmentation (reserved over
allocated at the peak, eager and compiled) on the declared calibration rows of
ledger.validation.memory; the shipped ledger.frameworks.conventions.FRAGMENTATION is its
first line (tests/test_memory.py checks it still is)."""
from ledger.render import fit_table
from ledger.validation.memory import fit_fragmentation

if __name__ == "__main__":
    print(fit_table(fit_fragmentation()))
