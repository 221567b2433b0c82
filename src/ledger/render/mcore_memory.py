"""DeepSeek-V3's memory per GPU as the Megatron Core MoE report states it (sec. 4.1, Tables 3
and 4: ``ledger.validation.mcore_moe.MEMORY``) against the ledger at the configuration
``MEMORY_RULE`` sets: Table 11's GB200 MXFP8 run (``ledger.render.bridge``'s path) in BF16,
with none of Table 3's remedies. Each saving is the ledger's difference with the one
technique on, on the rank the baseline peaks on:

- ``recompute X``: Megatron's ``--recompute-granularity selective --recompute-modules X``
  (``ledger.arch.selective``, ``ledger.arch.activations``), the step's peak allocation;
- memory-efficient permutation: the standard formulation keeps each expert's output for
  the router's backward (sec. 4.1.2, eq. 1), one h-wide tensor per routed token in the
  activation dtype - in the ledger's Megatron table, ``routed_output_copies`` 1 where
  Megatron-Core keeps 0 (``ledger.arch.saved_tensors.MEGATRON``). It is priced from the
  ledger's ``moe_act`` saving, one f-wide tensor per routed token of the same layers and
  micro-batches in flight: times h / f (tests/test_mcore_memory.py prices it with the table
  changed and finds the same bytes);
- FP8 activations: the row's own recipe (``precision_of``: MXFP8, FP8 weights gathered),
  the saved activations.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ledger.validation import mcore_moe

GB = mcore_moe.GB  # the paper's GB, its one reading (2^30 B)
MODULES = {"recompute mla_up_proj": ("mla_up_proj",), "recompute moe_act": ("moe_act",),
           "recompute layernorm": ("layernorm",),
           "recompute all three": ("mla_up_proj", "moe_act", "layernorm")}


def table3_row():
    """Table 11's GB200 DeepSeek-V3 MXFP8 run, the one Table 17's GB200 column reprints."""
    return next(r for r in mcore_moe.rows() if r.model == "deepseek-v3" and r.gpu == "gb200"
                and r.precision_published == "MXFP8").as_run()


@lru_cache(maxsize=1)
def table3_config():
    """(model, cfg, gpu) of Table 3 (``MEMORY_RULE``)."""
    from ledger.render.bridge import config_of, model_of, system_of

    row = table3_row()
    model = model_of(row)
    cfg, _ = config_of(row, None, model)  # None: BF16
    cfg = replace(cfg, recompute="none", recompute_modules=None, cuda_graph=())
    return model, cfg, system_of(row).gpu


@lru_cache(maxsize=None)
def _ranks(**change):
    from ledger.placement import place

    model, cfg, gpu = table3_config()
    return place(model, replace(cfg, **change), gpu=gpu).memory_by_rank


def peak_rank() -> int:
    """The rank the baseline's allocation peaks on."""
    return max(_ranks(), key=lambda m: m.allocated_bytes).rank


def _bytes(m, kind: str) -> float:
    return m.allocated_bytes if kind == "peak" else m.activations_bytes


def _saved(kind: str, **change) -> float:
    r = peak_rank()
    return _bytes(_ranks()[r], kind) - _bytes(_ranks(**change)[r], kind)


def ledger_bytes(what: str, kind: str) -> float:
    """The ledger's figure for ``MEMORY``'s entry ``what``, in bytes."""
    from ledger.render.bridge import precision_of

    if what.startswith("activations"):
        return _ranks()[peak_rank()].activations_bytes
    if what in MODULES:
        return _saved(kind, recompute="selective", recompute_modules=MODULES[what])
    if what == "memory-efficient permutation":
        model = table3_config()[0]
        act = _saved("activations", recompute="selective", recompute_modules=("moe_act",))
        return act * model.expert_hidden / model.moe_ffn_hidden
    if what == "FP8 activations":
        return _saved(kind, precision=precision_of(table3_row())[0])
    raise KeyError(what)


def rows() -> list[tuple[str, float, float, str, int]]:
    """(what, published bytes (its GB as 2^30 B), the ledger's bytes, where, page) of each
    entry."""
    return [(what, gb * GB, ledger_bytes(what, kind), where, page)
            for what, gb, where, page, kind in mcore_moe.MEMORY]


def lines() -> list[str]:
    model, cfg, gpu = table3_config()
    out = [f"DeepSeek-V3, Table 3's configuration: TP {cfg.tp} PP {cfg.pp} VPP {cfg.vp} "
           f"EP {cfg.ep} DP {cfg.dp}, micro-batch {cfg.micro_batch} x {model.seq_len:,} "
           f"tokens, {cfg.num_microbatches} micro-batches, BF16, {gpu.name}; rank "
           f"{peak_rank()} peaks",
           f"{'what':<40} {'where':<16} {'paper GiB':>9} {'ledger GiB':>10} {'error':>7}"]
    for what, pub, mine, where, page in rows():
        out.append(f"{what:<40} {where + f' p.{page}':<16} {pub / GB:9.1f} {mine / GB:10.1f} "
                   f"{mine / pub - 1:+7.1%}")
    return out


__all__ = ["GB", "MODULES", "ledger_bytes", "lines", "peak_rank", "rows", "table3_config",
           "table3_row"]


def table5_readings_table() -> str:
    """Table 5's rows under the other readings (``ledger.validation.memory_mcore.
    modelzoo_readings``), each against the measured max-alloc (benchmarks/
    mcore_table5_readings.py; docs/memory.md quotes it)."""
    from ledger.validation.memory import predicted
    from ledger.validation.memory_mcore import modelzoo_readings

    lines = [f"{'row':45s} {'reading':27s} {'measured':>9s} {'priced':>9s}   error  "
             f"(GiB = 2^30 B)"]
    for how, row in modelzoo_readings():
        got = predicted(row)
        lines.append(f"{row.label:45s} {how:27s} {row.measured / 2**30:9.2f} "
                     f"{got / 2**30:9.2f} {got / row.measured - 1:+7.1%}")
    return "\n".join(lines)
