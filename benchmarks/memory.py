"""The memory model against measured peaks: every row of ledger.validation.memory in its
source's own definition (torchtitan: max reserved over the ranks; Megatron-LM: the last
rank's max allocated, and its allocated bytes after the step; outcomes: ran or out of
memory), calibration and prediction rows apart, mean and max |error| per source.
docs/memory.md shows this output; tests/test_memory.py holds the page to it."""
from ledger.render import memory_table

if __name__ == "__main__":
    print(memory_table())
