"""Megatron-LM's functional tests (``ledger.validation.megatron_goldens``) run on report's own
path: each case's launch written as a file of flags and given to ``report --from-megatron``
with its world (``--gpus``), its platform's GPU (``--gpu``) and, where the rule states it,
the tokenizer's size (``--vocab-size``) - the flags parsed, the launch read and merged, the
placement built and priced exactly as for a user's file (``ledger.cli.commands``). A launch
the reader refuses is listed with the reader's own one-line reason; what it names as not
modelled marks the row approximate.

Compared like with like (``ledger.validation.memory.predicted``'s definitions): the golden's
``mem-max-allocated-bytes`` against the last pipeline rank's ``allocated_bytes``, and its
``mem-allocated-bytes`` after the step against that rank's state plus the buffers kept for
the run and what the step leaves allocated (``MemoryBreakdown.resident_bytes``).
"""
from __future__ import annotations

import os
import tempfile

from ledger.errors import LedgerError
from ledger.validation.megatron_goldens import (HARNESS_ENV, Golden, Priced, command,
                                                flags_text, goldens)

METRICS = ("allocated", "resident")


def case_unpriced(g: Golden, unpriced: tuple[str, ...]) -> tuple[str, ...]:
    """What the case itself sets that the reader names: all but the harness's environment
    (``HARNESS_ENV``, named on every row; NCCL's algorithm, protocol and buffers change
    time, not the allocator's bytes) where the case does not set it otherwise."""
    own = dict(g.env)
    return tuple(u for u in unpriced if not any(
        u.startswith(f"{k}={v} ") and own.get(k) == v for k, v in HARNESS_ENV.items()))


def features(g: Golden, model, cfg, named: tuple[str, ...]) -> tuple[str, ...]:
    """The groups a row is summed in: its family, platform, the settings it exercises and
    each flag or variable the case sets that the reader names as not modelled (``named``,
    beyond the harness's environment)."""
    peak = g.max_allocated_bytes / 2**30  # the run's size: a fixed buffer shows on small
    size = next(f"{lo}-{hi} GiB" for lo, hi in ((0, 1), (1, 4), (4, 16), (16, 1 << 20))
                if peak < hi).replace(f"-{1 << 20} GiB", "+ GiB")
    out = [f"family {g.family}", f"platform {g.platform}", f"peak {size}",
           f"world {'from the family recipe' if g.world_assumed else 'stated'}"]
    on = {"tp": cfg.tp > 1, "pp": cfg.pp > 1, "vp": cfg.vp > 1, "cp": cfg.cp > 1,
          "sp": cfg.tp > 1 and cfg.sequence_parallel, "ep": cfg.ep > 1,
          "moe": bool(model.num_experts), "mla": model.attention == "mla",
          "dist-optimizer": cfg.zero_stage >= 1, "recompute": cfg.recompute != "none",
          "fp8/fp4": str(cfg.precision).startswith(("fp8", "fp4")),
          "unfused attention": not cfg.flash_attention}
    names = sorted({n.split(" ")[0].split("=")[0] for n in named})
    return (*out, *(f"feature {k}" for k, v in on.items() if v),
            *(f"named {n}" for n in names))


def _argv(g: Golden, path: str) -> list[str]:
    argv = ["report", "--from-megatron", command(g, path), "--gpus", str(g.world),
            "--gpu", g.gpu]
    return argv + (["--vocab-size", str(g.vocab)] if g.vocab else [])


def price_one(g: Golden, folder: str) -> tuple[list[Priced], str]:
    """The golden's rows (allocated, resident), or none and the reader's reason."""
    from ledger.cli.commands import parse_args, report_placement
    from ledger.cli.inputs import source, unpriced_settings

    path = os.path.join(folder, f"{g.case}.args")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(flags_text(g))
    try:
        a = parse_args(_argv(g, path))
        a.launch = source(a)
        model, cfg, _, pl = report_placement(a)
        unpriced = tuple(unpriced_settings(a)[0])
    except LedgerError as e:
        return [], str(e).replace(path, f"{g.case}.args")
    last = pl.memory_by_rank[-1]
    groups = features(g, model, cfg, case_unpriced(g, unpriced))
    return [Priced(g, "allocated", g.max_allocated_bytes, last.allocated_bytes, unpriced,
                   groups),
            Priced(g, "resident", g.allocated_bytes, last.resident_bytes,
                   unpriced, groups)], ""


def price(rows: list[Golden] | None = None) -> tuple[list[Priced], list[tuple[Golden, str]]]:
    """(the priced rows, the goldens left out with why): the rule's reasons first, then
    the reader's."""
    rows = goldens() if rows is None else rows
    priced, left = [], []
    with tempfile.TemporaryDirectory() as folder:
        for g in rows:
            if g.skip:
                left.append((g, g.skip))
                continue
            got, why = price_one(g, folder)
            priced += got
            if why:
                left.append((g, why))
    return priced, left


__all__ = ["METRICS", "case_unpriced", "features", "price", "price_one"]
