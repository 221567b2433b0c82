"""The memory model's one fit: the caching allocator's fragmentation (reserved over
allocated at the peak, eager and compiled) on the declared calibration rows of
ledger.validation.memory, as a share of every allocated byte and as a share of the bytes
freed and requested again every step (ledger.validation.memory.BASES); the shipped
ledger.frameworks.conventions.FRAGMENTATION is the first line of the better basis
(tests/test_memory.py checks it still is).

Then the second: of that fragmentation, the share in split blocks the allocator keeps
through a failed cudaMalloc (ledger.frameworks.conventions.UNRETURNABLE, what the verdict
counts) - reserved peaks cannot tell it from cached whole blocks, so it is bounded by the
outcome rows: every run that ran (the Megatron-Bridge tables' rows, DeepSeek-V3 on H800,
torchtitan's) must fit and every run out of memory must not; the shipped figure is the
midpoint of the shares that allows (tests/test_memory_unreturnable.py)."""
from ledger.render import fit_table
from ledger.render.bridge_fit import outcome_shares as bridge_outcomes
from ledger.render.peaks import unreturnable_table
from ledger.validation.memory import BASES, fit_fragmentation
from ledger.validation.outcomes import outcome_shares

if __name__ == "__main__":
    print(fit_table({basis: fit_fragmentation(basis=basis) for basis in BASES}))
    print()
    print(unreturnable_table(outcome_shares() + bridge_outcomes()))
