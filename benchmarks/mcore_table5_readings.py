"""Table 5 of NVIDIA's Megatron Core MoE report (ledger.validation.memory_mcore) under other
readings than the rule's: the pre-MLP norm recomputed (what Megatron-Core's kept output
under TE's router graph adds), and the report's model scripts' offloaded modules and
optimizer dtypes (Megatron-MoE-ModelZoo@020b8136, tests/fixtures/modelzoo). docs/memory.md
quotes this output (tests/test_mcore_table5_readings.py holds it). A few seconds."""
from ledger.render.mcore_memory import table5_readings_table

if __name__ == "__main__":
    print(table5_readings_table())
