"""The planner's shortcuts change no bit of what it prices (issue 34: the 405B x 16,384
plan in under 0.5 s, its output unchanged). Each shortcut is switched off here and the
whole grid - every candidate's step time, peak memory, breakdown and host bytes - is
compared bit for bit with what the planner prices with it on."""
import numpy as np
import pytest

import ledger.plan.grid_memory as grid_memory
import ledger.plan.search as search
from ledger.finetune import FineTune
from ledger.model import deepseek_v3, llama3_8b, llama3_70b
from ledger.plan import Pins, plan
from ledger.system import system

SYS = system("h100-sxm")
CASES = {
    "70B on 64, every pipeline depth": (llama3_70b(), 64, 128, {}),
    "DeepSeek-V3 under DualPipe, FP8": (deepseek_v3(), 256, 1024, dict(
        framework="deepseek", precision="fp8", pins=Pins(max_tp=2, no_cp=True, max_pp=16))),
    "8B QLoRA under DeepSpeed": (llama3_8b(), 8, 64, dict(
        finetune=FineTune(method="qlora"), framework="deepspeed")),
    "8B full fine-tune, first 10 layers frozen": (llama3_8b(), 16, 64, dict(
        finetune=FineTune(method="full", freeze_layers=(0, 10)))),
    "8B under torchtitan of Dec 2024 (stage input gradients kept)": (llama3_8b(), 32, 64, dict(
        framework="torchtitan@2024-12")),
}


def priced(monkeypatch, model, gpus, batch, kw):
    """Every array ``ledger.plan.search._price`` returns, and the result's text."""
    seen = []
    price = search._price

    def keep(*a, **k):
        seen.append(price(*a, **k))
        return seen[-1]
    monkeypatch.setattr(search, "_price", keep)
    result = plan(model, gpus, SYS, batch, top=20, **kw)
    monkeypatch.setattr(search, "_price", price)
    step, mem, parts, host = seen[0]
    return [step, mem, host, *(parts[k] for k in sorted(parts))], \
        repr(result.plans), result.fitting


def same_bits(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("name", CASES)
def test_pipeline_ranks_that_stand_for_their_class_price_every_rank(monkeypatch, name):
    """A rank equal to an earlier one in every input but the micro-batches in flight
    (ledger.plan.grid_memory._stand_ins) is left out of the peak: the same bits as
    pricing every rank; and the shortcut is taken (a deep pipeline is not all priced)."""
    model, gpus, batch, kw = CASES[name]
    taken = []
    stand_ins = grid_memory._stand_ins

    def count(*a, **k):
        reps = stand_ins(*a, **k)
        taken.append((len(reps), a[8]))  # (ranks priced, pp)
        return reps
    monkeypatch.setattr(grid_memory, "_stand_ins", count)
    fast = priced(monkeypatch, model, gpus, batch, kw)
    assert any(n < pp for n, pp in taken)
    monkeypatch.setattr(grid_memory, "_stand_ins", lambda *a, **k: np.arange(a[8]))
    slow = priced(monkeypatch, model, gpus, batch, kw)
    same_bits(fast[0], slow[0])
    assert fast[1:] == slow[1:]


def test_the_fastest_rows_are_those_a_full_sort_ranks_first():
    """ledger.plan.search._first sorts only the rows up to the n-th fastest: the same rows,
    in the same order, as sorting them all - ties in time (to more memory spare, then the
    earlier row) and rows that do not fit included."""
    rng = np.random.default_rng(34)
    for n in (1, 3, 10, 50, 200):
        step = rng.integers(1, 20, 300).astype(float)  # many equal times
        mem = rng.integers(1, 5, 300).astype(float)
        fits = rng.random(300) < 0.6
        want = np.lexsort((-(10.0 - mem), np.where(fits, step, np.inf)))[: min(n, fits.sum())]
        got = search._first(step, mem, fits, 10.0, min(n, int(fits.sum())))
        assert got.tolist() == want.tolist()


def test_twins_are_the_first_of_each_class_of_equal_rows():
    """ledger.plan.grid_memory.twins, held to numpy's own unique rows: the first row of
    each class, in order, and each row's index among them."""
    rng = np.random.default_rng(7)
    g = {k: rng.choice(values, 5000) for k, values in (
        ("tp", [1, 2, 8]), ("cp", [1, 4]), ("dp", [1, 16, 16384]), ("shard", [8, 2**20]),
        ("rc", [0, 1, 2]), ("tpov", [0, 1]))}
    cols = ("tp", "cp", "dp", "shard", "rc")
    reps, of = grid_memory.twins(g, cols)
    rows = np.stack([g[k] for k in cols], axis=1)
    _, first, inv = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    assert reps.tolist() == sorted(first.tolist())
    assert (rows[reps][of] == rows).all() and len(reps) == len(first)
    assert np.array_equal(reps[of], first[inv.reshape(-1)])
    every = grid_memory.twins(g)  # all but the TP-overlap column
    assert np.array_equal(every[0], reps) and np.array_equal(every[1], of)


@pytest.mark.parametrize("name", CASES)
def test_groups_that_differ_in_zero_stage_and_tp_overlap_alone_price_as_apart(monkeypatch, name):
    """Time is priced once for groups that differ only in their ZeRO stage and TP overlap
    (ledger.plan.search._merge_groups): the same bits as pricing each group apart; and the
    merge is taken."""
    model, gpus, batch, kw = CASES[name]
    merged = []
    across = search._merge_groups

    def count(g, parts):
        out = across(g, parts)
        merged.append(len(out) < len(parts))
        return out
    monkeypatch.setattr(search, "_merge_groups", count)
    fast = priced(monkeypatch, model, gpus, batch, kw)
    assert any(merged)
    monkeypatch.setattr(search, "_merge_groups", lambda g, parts: parts)
    slow = priced(monkeypatch, model, gpus, batch, kw)
    same_bits(fast[0], slow[0])
    assert fast[1:] == slow[1:]


def test_dense_codes_number_values_as_numpy_unique_does_at_any_spread():
    """Both ways of numbering (a flag table for values near the row count, a sort for a
    column of huge values: a global batch of 2^36 sequences once made the table the work
    and Ctrl-C waited on it) give numpy's unique inverse."""
    import numpy as np

    from ledger.plan.grid_memory import dense_codes

    rng = np.random.default_rng(0)
    for n, high in ((0, 5), (1, 5), (50, 7), (3000, 300), (3000, 10**12), (20, 2**40)):
        key = rng.integers(0, high, n)
        codes, size = dense_codes(key, high)
        values, inverse = np.unique(key, return_inverse=True)
        assert size == len(values) and (codes == inverse.ravel()).all(), (n, high)
