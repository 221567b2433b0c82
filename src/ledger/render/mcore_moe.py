"""The Megatron Core MoE report's Table 11 (``ledger.validation.mcore_moe``) through the
ledger: each run on the path a Megatron-Bridge table row takes (``ledger.render.bridge.
outcome``: report's memory verdict, estimate's tokens/s/GPU at the shipped constants),
against the published tokens/s/GPU; a summary by GPU, model and precision; the pairs the
table invites (GB300 over GB200, MXFP8 over BF16, GB200 over H100), published against
predicted, with the ledger's GB300 / GB200 ratio at one row's settings on both GPUs; and
the FLOPs per token the paper's TFLOPS/GPU imply against the ledger's counts.
Error = (predicted - published) / published tokens/s/GPU: negative, the ledger too slow.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ledger.validation import mcore_moe

GIB = 2**30
ORDER = ("gb300", "gb200", "h100")
SHORT = {"deepseek-v3": "DeepSeek-V3", "qwen3-235b-a22b": "Qwen3-235B"}


@lru_cache(maxsize=1)
def outcomes() -> tuple:
    """Every row's ``ledger.render.bridge.Outcome`` (shipped constants)."""
    from ledger.render.bridge import outcome

    return tuple(outcome(r) for r in mcore_moe.rows())


def label(row) -> str:
    return (f"{row.gpu} {SHORT[row.model]} {row.precision_published} {row.gpus}g "
            f"seq {row.seq_len:,}")


def _summary(name: str, outs) -> str:
    errs = [o.error for o in outs if o.status == "ran" and o.error is not None]
    fit = sum(1 for o in outs if o.status == "ran" and o.fits)
    if not errs:
        return f"  {name:<16}no prediction"
    mean = sum(abs(e) for e in errs) / len(errs)
    signed = sum(errs) / len(errs)
    worst = max(errs, key=abs)
    return (f"  {name:<16}mean |error| {mean:6.1%}  signed {signed:+6.1%}  max {worst:+7.1%}"
            f"  n {len(errs)}   fits {fit} of {len(outs)}")


def _tok(outs, **kw) -> tuple[float, float] | None:
    """(published, predicted) tokens/s/GPU of the one row matching ``kw``."""
    hit = [o for o in outs if all(getattr(o.row, k) == v for k, v in kw.items())]
    if len(hit) != 1 or hit[0].status != "ran":
        return None
    return hit[0].row.tokens_per_s_per_gpu, hit[0].tokens_per_s_per_gpu


# the pairs of Table 11 a user compares: (label, numerator row, denominator row)
PAIRS = (
    ("GB300 / GB200  DeepSeek-V3 MXFP8", dict(model="deepseek-v3", gpu="gb300"),
     dict(model="deepseek-v3", gpu="gb200", precision="fp8_mx")),
    ("GB300 / GB200  Qwen3-235B MXFP8 4K", dict(model="qwen3-235b-a22b", gpu="gb300",
                                             seq_len=4096),
     dict(model="qwen3-235b-a22b", gpu="gb200", precision="fp8_mx")),
    ("MXFP8 / BF16   DeepSeek-V3 GB200", dict(model="deepseek-v3", gpu="gb200",
                                           precision="fp8_mx"),
     dict(model="deepseek-v3", gpu="gb200", precision="bf16")),
    ("MXFP8 / BF16   Qwen3-235B GB200", dict(model="qwen3-235b-a22b", gpu="gb200",
                                          precision="fp8_mx"),
     dict(model="qwen3-235b-a22b", gpu="gb200", precision="bf16")),
    ("GB200 / H100   DeepSeek-V3 FP8", dict(model="deepseek-v3", gpu="gb200",
                                         precision="fp8_mx"),
     dict(model="deepseek-v3", gpu="h100")),
    ("GB200 / H100   Qwen3-235B BF16", dict(model="qwen3-235b-a22b", gpu="gb200",
                                         precision="bf16"),
     dict(model="qwen3-235b-a22b", gpu="h100")))


def pair_ratios(outs=None) -> list[tuple[str, float, float]]:
    """(label, published ratio, predicted ratio) of tokens/s/GPU for ``PAIRS`` (each row
    at its own Table 20 / B.2 settings)."""
    outs = outcomes() if outs is None else outs
    got = []
    for name, a, b in PAIRS:
        x, y = _tok(outs, **a), _tok(outs, **b)
        if x and y:
            got.append((name, x[0] / y[0], x[1] / y[1]))
    return got


def same_settings_ratio(row_id_part: str, gpu: str) -> float:
    """The ledger's tokens/s/GPU of one row's settings on ``gpu`` over its own GPU's: the
    GPUs' ratio alone, the row's optimizations held."""
    from ledger.render.bridge import outcome

    row = next(r for r in mcore_moe.rows() if row_id_part in r.id)
    own, other = outcome(row), outcome(replace(row, gpu=gpu, system=gpu))
    return other.tokens_per_s_per_gpu / own.tokens_per_s_per_gpu


def flops_rows() -> list[tuple]:
    """(row, paper FLOPs/token = TFLOPS/GPU / tokens/s/GPU, the ledger's model FLOPs per
    token - estimate's MFU numerator -, the same in Megatron's convention)."""
    from ledger.arch.flops import model_flops_per_token
    from ledger.render.bridge import model_of

    out = []
    for r in mcore_moe.rows():
        m = model_of(r)
        out.append((r, r.model_tflops_per_gpu * 1e12 / r.tokens_per_s_per_gpu,
                    model_flops_per_token(m), mcore_moe.megatron_flops_per_token(m)))
    return out


def lines(outs=None) -> list[str]:
    from ledger.render.bridge import outcome

    outs = outcomes() if outs is None else outs
    src = mcore_moe.SOURCE
    out = [f"{src['title']} (arXiv {src['arxiv']}), Table 11 p.{mcore_moe.TABLE_11_PAGE}: "
           f"predictions",
           f"  ({src['repo']} {src['path'].rsplit('/', 1)[-1]} @ {src['commit'][:10]}; "
           f"settings: Table 20 / B.2 p.{mcore_moe.TABLE_20_PAGE}, Tables 17-18 "
           f"p.{mcore_moe.TABLE_17_PAGE})",
           f"{'row':<40}{'published':>10}{'predicted':>10}{'error':>8}  "
           f"{'memory (report)':<28}notes"]
    key = (lambda o: (ORDER.index(o.row.gpu), o.row.model, o.row.precision, o.row.seq_len))
    for o in sorted(outs, key=key):
        r = o.row
        if o.status != "ran":
            out.append(f"{label(r):<40}{r.tokens_per_s_per_gpu:>10,.0f}  {o.status}: "
                       f"{o.reason}")
            continue
        mem = (f"{'fits' if o.fits else 'does NOT fit'} {o.peak_bytes / GIB:.1f} of "
               f"{o.capacity_bytes / GIB:.0f} GiB")
        notes = "; ".join(list(o.approx) + [n for n in r.notes
                                            if n not in mcore_moe.UNPRICED])
        out.append(f"{label(r):<40}{r.tokens_per_s_per_gpu:>10,.0f}"
                   f"{o.tokens_per_s_per_gpu:>10,.0f}{o.error:>+8.1%}  {mem:<28}{notes}")
    out += [f"every row: {'; '.join(mcore_moe.UNPRICED)}", "",
            "summary (error = (predicted - published) / published tokens/s/GPU; fits: "
            "judged to fit on report's path)"]
    groups: dict[str, list] = {"all": list(outs)}
    for o in outs:
        groups.setdefault(f"gpu {o.row.gpu}", []).append(o)
    for o in outs:
        groups.setdefault(SHORT[o.row.model], []).append(o)
    for o in outs:
        groups.setdefault("BF16" if o.row.precision == "bf16" else "FP8 (MX / BLK)",
                          []).append(o)
    out += [_summary(k, v) for k, v in groups.items()]
    out += ["", "pairs (tokens/s/GPU ratios; each row at its own settings, so a pair's "
            "settings may differ)",
            f"  {'pair':<36}{'published':>10}{'predicted':>10}{'error':>8}"]
    for name, pub, pred in pair_ratios(outs):
        out.append(f"  {name:<36}{pub:10.3f}{pred:10.3f}{pred / pub - 1:+8.1%}")
    for part in ("gb200/deepseek-v3/fp8_mx", "gb200/qwen3-235b-a22b/fp8_mx"):
        out.append(f"  ledger GB300 / GB200 at the {part} row's settings on both: "
                   f"{same_settings_ratio(part, 'gb300'):.3f}")
    alt = outcome(mcore_moe.other_reading())
    if alt.status == "ran":
        out += ["", "the H100 DeepSeek-V3 row at the reading the rule sets aside (Table 17 / sec. "
                "9.2.2: PP 8, DP 64, recompute mlp, mla_up_proj, moe_act, layernorm, layout "
                "Et*3|(tt|)*29m|L):",
                f"  predicted {alt.tokens_per_s_per_gpu:,.0f} against "
                f"{alt.row.tokens_per_s_per_gpu:,.0f} ({alt.error:+.1%}), "
                f"{'fits' if alt.fits else 'does NOT fit'} {alt.peak_bytes / GIB:.1f} of "
                f"{alt.capacity_bytes / GIB:.0f} GiB"]
    out += ["", "FLOPs per token (GFLOP): the paper's TFLOPS/GPU over its tokens/s/GPU, "
            "against the ledger's model FLOPs (estimate's MFU numerator: causal s/2, "
            "router in, MTP out) and the same less the router plus the MTP depth "
            "(Megatron-Core's count: causal s/2, router out, MTP in)",
            f"  {'row':<40}{'paper':>8}{'ledger':>9}{'Megatron':>10}{'paper/Megatron':>16}"]
    for r, paper, ledger, meg in flops_rows():
        out.append(f"  {label(r):<40}{paper / 1e9:8.2f}{ledger / 1e9:9.2f}{meg / 1e9:10.2f}"
                   f"{paper / meg - 1:+16.2%}")
    return out
