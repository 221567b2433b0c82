"""The memory model's one fit: the caching allocator's fragmentation (reserved over
allocated at the peak, eager and compiled) on the declared calibration rows of
ledger.validation.memory, as a share of every allocated byte and as a share of the bytes
freed and requested again every step (ledger.validation.memory.BASES); the shipped
ledger.frameworks.conventions.FRAGMENTATION is the first line of the better basis
(tests/test_memory.py checks it still is)."""
from ledger.render import fit_table
from ledger.validation.memory import BASES, fit_fragmentation

if __name__ == "__main__":
    print(fit_table({basis: fit_fragmentation(basis=basis) for basis in BASES}))
