"""Megatron-LM's own pipeline splits, as layers per model stage: a
--pipeline-model-parallel-layout string, or --decoder-first/last-pipeline-num-layers.

Sources (Megatron-LM d98e8a64): megatron/core/transformer/pipeline_parallel_layer_layout.py
L283-325 (the string: commas dropped, ``(...)*n`` then ``x*n`` unrolled, ``|`` between
stages; E embedding, L loss, t decoder layer, m MTP layer), L40-55 (the stages divide by
pp; stage i on rank i % pp, virtual stage i // pp), L86-151 (E once, first; L once, last;
as many t as layers, m as MTP layers); transformer_block.py L104-150 (first / last: the
first and last rank hold the given layers, the rest divide evenly over the middle ranks,
and every rank's layers divide over its virtual stages, transformer_config.py L2298-2330).
"""
from __future__ import annotations

import re

from ledger.errors import LedgerError, clip
from ledger.io.limits import MAX_VP

FLAG = "pipeline_model_parallel_layout"
MAX_LAYOUT_CHARS = 1 << 22  # an unrolled layout string, at most


def parse_layout(text: str, pp: int, layers: int, mtp_layers: int = 0) -> tuple[tuple[int, ...], int]:
    """(transformer layers per model stage, vp) of a layout string over ``pp`` ranks.

    >>> parse_layout("Et|(tt|)*30mL", 8, 61, 1)[1]
    4
    """
    # Every character of the unrolled string is a layer, E, L or a stage's "|": no more
    # than the model's layers, E and L and MAX_VP stages per rank (and never past 4 Mi
    # characters). Unrolled within that budget, each repetition counted before it is
    # built: 't*99999999999999' is refused without a byte of it.
    limit = min(layers + mtp_layers + 2 + pp * MAX_VP, MAX_LAYOUT_CHARS)
    flat = text.replace(",", "")
    for pattern, budget in ((r"\(([^)]+)\)\*(\d+)", 4 * limit + len(text)),
                            (r"(.)\*(\d+)", limit)):
        flat = re.sub(pattern, _unroll([budget], text, limit), flat)
    stages = flat.split("|")
    bad = sorted(set(flat) - set("ELtm|"))
    problems = []
    if bad:
        problems.append(f"unknown layer characters {''.join(bad)!r} (known: E L t m)")
    if len(stages) % pp:
        problems.append(f"{len(stages)} stages do not divide over pp({pp})")
    if flat.count("E") != 1 or "E" not in stages[0]:
        problems.append("the embedding E must appear once, in the first stage")
    if flat.count("L") != 1 or "L" not in stages[-1]:
        problems.append("the loss L must appear once, in the last stage")
    if flat.count("t") != layers:
        problems.append(f"{flat.count('t')} decoder layers t, the model has {layers}")
    if flat.count("m") != mtp_layers:
        problems.append(f"{flat.count('m')} MTP layers m, the model has {mtp_layers}")
    if problems:
        raise LedgerError(FLAG, f"{clip(repr(text))}: " + "; ".join(problems))
    return tuple(s.count("t") for s in stages), len(stages) // pp


def _unroll(budget: list, text: str, limit: int):
    """re.sub's replacement for ``x*n``: ``x`` n times, while the characters built so far
    stay within ``budget[0]``."""
    def repeat(m: re.Match) -> str:
        digits = m.group(2)
        size = len(m.group(1)) * int(digits) if len(digits) <= 12 else budget[0] + 1
        budget[0] -= size
        if budget[0] < 0:
            raise LedgerError(FLAG, f"{clip(repr(text))} unrolls to more than {limit:,} "
                                    f"characters: the model's layers, E, L and the stages' "
                                    f"'|' can be no more")
        return m.group(1) * int(digits)
    return repeat


def uneven_layers(pp: int, vp: int, layers: int, first: int | None,
                  last: int | None) -> tuple[int, ...]:
    """Layers per model stage under --decoder-first/last-pipeline-num-layers."""
    left, ranks = layers - (first or 0) - (last or 0), pp - (first is not None) - (last is not None)
    if left < 0 or (ranks > 0 and left % ranks) or (ranks == 0 and left):
        raise LedgerError("decoder_first_pipeline_num_layers",
                          f"first({first or 0}) + last({last or 0}) of {layers} layers leave {left} for "
                          f"{ranks} middle ranks of pp({pp}): Megatron needs them to divide")
    middle = left // ranks if ranks else 0
    per_rank = [middle] * pp
    if first is not None:
        per_rank[0] = first
    if last is not None:
        per_rank[-1] = last
    if any(n % vp for n in per_rank):
        raise LedgerError("decoder_first_pipeline_num_layers",
                          f"ranks hold {per_rank} layers; with vp({vp}) each must divide by vp")
    return tuple(per_rank[s % pp] // vp for s in range(pp * vp))
