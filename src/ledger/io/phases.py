"""``--phases FILE``: a run as phases, read from TOML (``[[phase]]`` tables) or JSON
(``{"phase": [...]}``), each phase a ``ledger.run.Phase``:

    [[phase]]
    name = "8K context"            # optional, names the phase in errors and tables
    tokens = 14.8e12               # or steps = 1000
    seq_len = 8192                 # default: the model's
    global_batch = 2048            # sequences per step, or global_batch_tokens = 16777216;
                                   # default: the command line's placement
    rampup = [192, 16, 9765625]    # optional: Megatron's --rampup-batch-size
    placement = { gpus = 16384, tp = 8, cp = 1, pp = 16, dp = 128 }   # optional: its own

A placement changes the command line's in the keys it gives (tp cp pp dp ep vp zero
micro_batch recompute schedule); without dp, dp is the phase's gpus (or the run's) over
tp x cp x pp; gpus, when given with dp, must equal tp x cp x pp x dp.
Every problem of a file is reported at once, on one line.
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ledger.errors import LedgerError
from ledger.io.files import read_table
from ledger.io.limits import MAX_GLOBAL_BATCH, MAX_GPUS, MAX_MODEL_SIZE, MAX_STEPS, MAX_TOKENS
from ledger.run import MAX_PHASES, Phase

_KEYS = ("name", "tokens", "steps", "seq_len", "global_batch", "global_batch_tokens",
         "rampup", "placement")
_AXES = {"tp": "tp", "cp": "cp", "pp": "pp", "dp": "dp", "ep": "ep", "vp": "vp",
         "micro_batch": "micro_batch", "zero": "zero_stage"}
_PLACEMENT = (*_AXES, "gpus", "recompute", "schedule")


def _integer(where: str, value, limit: float, low: int = 1) -> int | str:
    """The value as an integer in low..limit, or the problem as text."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= limit:
        return f"{where} must be an integer in {low}..{limit:,.0f}, got {value!r}"
    return value


def _number(where: str, value, limit: float) -> float | str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not (math.isfinite(value) and 0 < value <= limit):
        return f"{where} must be a finite number in (0, {limit:g}], got {value!r}"
    return float(value)


def _placement(where: str, raw, base, problems: list[str]):
    """The phase's ParallelConfig: the base with the keys given replaced."""
    if not isinstance(raw, dict):
        problems.append(f"{where}.placement must be a table, got {raw!r}")
        return None
    unknown = sorted(set(raw) - set(_PLACEMENT))
    if unknown:
        problems.append(f"{where}.placement has unknown keys {', '.join(unknown)} (known: "
                        f"{', '.join(_PLACEMENT)})")
    over, n = {}, len(problems)
    for key, name in _AXES.items():
        if key in raw:
            got = _integer(f"{where}.placement.{key}", raw[key], MAX_GPUS, 0 if key == "zero"
                           else 1)
            problems.append(got) if isinstance(got, str) else over.update({name: got})
    for key in ("recompute", "schedule"):
        if key in raw:
            over[key] = raw[key]
    gpus = _integer(f"{where}.placement.gpus", raw["gpus"], MAX_GPUS) if "gpus" in raw else None
    if isinstance(gpus, str):
        problems.append(gpus)
    if len(problems) > n:
        return None
    fixed = {k: over.get(k, getattr(base, k)) for k in ("tp", "cp", "pp")}
    model_par = math.prod(fixed.values())
    if "dp" not in over:  # the phase's GPUs, or the run's, over its model-parallel ranks
        world = base.world if gpus is None else gpus
        if world % model_par:
            problems.append(f"{where}.placement: {'gpus' if gpus else 'the run'}({world}) is "
                            f"not divisible by tp * cp * pp = {model_par}")
            return None
        over["dp"] = world // model_par
    world = model_par * over["dp"]
    if gpus is not None and world != gpus:
        problems.append(f"{where}.placement: tp * cp * pp * dp = {world} != gpus({gpus})")
        return None
    if {"pp", "vp"} & set(over) and "schedule" not in over:
        over["schedule"] = None  # derived again for the new pipeline
    resets = dict(reshard_after_forward=None, grad_accumulation=None)  # the framework's
    if {"dp", "cp"} & set(over):
        resets["hsdp_shard"] = None
    try:
        return replace(base, **resets, **over)
    except LedgerError as e:
        problems.append(f"{where}.placement: {e}")
        return None


def _phase(i: int, raw, base, seq_len: int, problems: list[str]) -> Phase | None:
    where = f"phase[{i}]"
    if not isinstance(raw, dict):
        problems.append(f"{where} must be a table, got {raw!r}")
        return None
    if raw.get("name"):
        where = f"phase[{i}] ({raw['name']})"
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        problems.append(f"{where} has unknown keys {', '.join(unknown)} (known: "
                        f"{', '.join(_KEYS)})")
    n = len(problems)
    kw = {"name": str(raw.get("name", ""))}
    if ("tokens" in raw) == ("steps" in raw):
        problems.append(f"{where} needs tokens or steps (one of them)")
    checks = {"tokens": (_number, MAX_TOKENS), "steps": (_integer, MAX_STEPS),
              "seq_len": (_integer, MAX_MODEL_SIZE), "global_batch": (_integer, MAX_GLOBAL_BATCH),
              "global_batch_tokens": (_integer, MAX_GLOBAL_BATCH * MAX_MODEL_SIZE)}
    for key, (check, limit) in checks.items():
        if key in raw:
            got = check(f"{where}.{key}", raw[key], limit)
            problems.append(got) if isinstance(got, str) else kw.update({key: got})
    if "global_batch" in kw and "global_batch_tokens" in kw:
        problems.append(f"{where} gives global_batch and global_batch_tokens: one of them")
    if "rampup" in raw:
        ramp = raw["rampup"]
        if not (isinstance(ramp, list) and len(ramp) == 3):
            problems.append(f"{where}.rampup must be [start, increment, samples], got {ramp!r}")
        else:
            got = [_integer(f"{where}.rampup[{k}]", v, MAX_GLOBAL_BATCH * MAX_TOKENS, 0)
                   for k, v in enumerate(ramp)]
            bad = [g for g in got if isinstance(g, str)]
            problems.extend(bad) if bad else kw.update({"rampup": tuple(got)})
    config = _placement(where, raw["placement"], base, problems) if "placement" in raw \
        else None
    if len(problems) > n:
        return None
    tokens_per_batch = kw.pop("global_batch_tokens", None)
    if tokens_per_batch is not None:
        seq = kw.get("seq_len", seq_len)
        if tokens_per_batch % seq:
            problems.append(f"{where}.global_batch_tokens({tokens_per_batch:,}) is not a "
                            f"multiple of seq_len({seq:,})")
            return None
        kw["global_batch"] = tokens_per_batch // seq
    try:
        return Phase(**kw, config=config)
    except LedgerError as e:
        problems.append(f"{where}: {e}")
        return None


def load_phases(path: str | Path, cfg, seq_len: int) -> list[Phase]:
    """The phases of ``path`` over the run's placement ``cfg`` and sequence length."""
    path = Path(path)
    raw = read_table(path, "phases")
    unknown = sorted(set(raw) - {"phase"})
    phases = raw.get("phase")
    if unknown or not isinstance(phases, list) or not phases:
        raise LedgerError("phases", f"{path} must hold a non-empty list 'phase' of tables "
                                    f"([[phase]] in TOML)" + (f"; unknown keys: "
                                                              f"{', '.join(unknown)}" if unknown
                                                              else ""))
    if len(phases) > MAX_PHASES:
        raise LedgerError("phases", f"{len(phases):,} phases exceed the limit of {MAX_PHASES}")
    problems: list[str] = []
    out = [_phase(i, p, cfg, seq_len, problems) for i, p in enumerate(phases)]
    if problems:
        raise LedgerError("phases", f"{path}: " + "; ".join(problems))
    batch = cfg.dp * cfg.micro_batch * cfg.num_microbatches
    tokens = sum(p.tokens or p.steps * (p.global_batch or batch) * (p.seq_len or seq_len)
                 for p in out)
    if tokens > MAX_TOKENS:  # steps times batch times sequence, bounded as tokens are
        raise LedgerError("phases", f"{path}: the phases train on {tokens:,.4g} tokens, "
                                    f"past the limit of {MAX_TOKENS:,.0g} (docs/inputs.md)")
    return out
