"""Megatron-Bridge's published rows compared in pairs (``ledger.render.bridge`` runs them):
one row's ``Outcome`` through the ledger, and the two paired tables of ``bridge_table`` - a
rack GPU over its HGX twin at equal GPU count (``ratios``), and consecutive micro-batches of
runs alike but for it (``mbs_pairs``): published ratio against predicted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ledger.validation.bridge import BridgeRow


@dataclass(frozen=True)
class Outcome:
    """One row through the ledger: 'ran', or why not (status and the reason)."""
    row: BridgeRow
    status: str  # ran | preset missing | precision missing | model lacks | cannot run
    reason: str = ""
    fits: bool | None = None
    peak_bytes: float | None = None
    capacity_bytes: float | None = None
    tokens_per_s_per_gpu: float | None = None  # predicted
    approx: tuple[str, ...] = field(default=())
    # the largest unreturnable share at which the worst rank still fits (MemoryBreakdown.
    # critical_share): benchmarks/fit_memory.py bounds Framework.unreturnable with it
    critical_share: float = float("inf")

    @property
    def error(self) -> float | None:
        """(predicted - published) / published tokens/s/GPU; None without both."""
        pub = self.row.tokens_per_s_per_gpu
        if self.tokens_per_s_per_gpu is None or not pub:
            return None
        return (self.tokens_per_s_per_gpu - pub) / pub


PAIRS = (("gb300", "b300"), ("gb200", "b200"))


def _ran_by(out: list[Outcome], key) -> dict[tuple, list[Outcome]]:
    """The outcomes that ran and have a published figure, grouped by ``key(row)``."""
    groups: dict[tuple, list[Outcome]] = {}
    for o in out:
        if o.status == "ran" and o.error is not None:
            groups.setdefault(key(o.row), []).append(o)
    return groups


def ratios(out: list[Outcome]) -> list[tuple[str, str, float, float]]:
    """(label, pair, published ratio, predicted ratio) of tokens/s/GPU for the same release,
    model, precision and GPU count on a rack GPU and its HGX twin (each at its own
    published placement), where both rows ran; a side with two such rows takes the one at
    the other side's GBS (26.06's DeepSeek-V3 on GB300 publishes GBS 4096 and 15360)."""
    ran = _ran_by(out, lambda r: (r.release, r.model, r.precision, r.gpus, r.gpu))
    got = []
    for (rel, model, prec, gpus, gpu), sides in sorted(ran.items()):
        for rack, hgx in PAIRS:
            twins = ran.get((rel, model, prec, gpus, hgx))
            if gpu != rack or not twins:
                continue
            pairs = [(a, b) for a in sides for b in twins
                     if len(sides) == len(twins) == 1 or a.row.gbs == b.row.gbs]
            if len(pairs) != 1:
                continue
            a, b = pairs[0]
            got.append((f"{rel} {model} {prec} {gpus}g", f"{rack}/{hgx}",
                        a.row.tokens_per_s_per_gpu / b.row.tokens_per_s_per_gpu,
                        a.tokens_per_s_per_gpu / b.tokens_per_s_per_gpu))
    return got


def ratio_lines(out: list[Outcome]) -> list[str]:
    lines = ["rack GPU over its HGX twin at equal GPU count (tokens/s/GPU ratio): published, "
             "predicted, error of the ratio"]
    rs = ratios(out)
    for label, pair, pub, pred in rs:
        lines.append(f"  {label:<44}{pair:<12}{pub:6.3f}{pred:8.3f}{pred / pub - 1:+8.1%}")
    for rack, hgx in PAIRS:
        errs = [pred / pub - 1 for _, p, pub, pred in rs if p == f"{rack}/{hgx}"]
        if errs:
            right = sum(1 for _, p, pub, pred in rs if p == f"{rack}/{hgx}"
                        and (pub - 1) * (pred - 1) > 0)
            lines.append(f"  {rack}/{hgx}: {len(errs)} pairs, right direction {right}, within "
                         f"15% {sum(1 for e in errs if abs(e) <= 0.15)}, mean |error| "
                         f"{sum(abs(e) for e in errs) / len(errs):.1%}")
    return lines


RELEASES = ("25.09", "25.11", "26.02", "26.02.01", "26.04", "26.04.01", "26.06", "26.06.01",
            "26.08")


def mbs_pairs(out: list[Outcome]) -> list[tuple[str, int, int, float, float]]:
    """(label, mbs a, mbs b, published ratio b / a, predicted ratio) of tokens/s/GPU for runs
    alike but for the micro-batch (model, GPU, precision, GPU count, TP, PP, CP, VP, EP,
    FSDP): within the latest release publishing both where there is one, else each
    micro-batch at its latest release; consecutive micro-batches paired."""
    by = _ran_by(out, lambda r: (r.model, r.gpu, r.precision, r.gpus, r.tp, r.pp, r.cp, r.vp,
                                 r.ep, r.fsdp))
    got = []
    for key, outs in sorted(by.items(), key=str):
        latest = sorted(outs, key=lambda o: RELEASES.index(o.row.release))
        runs: dict[int, Outcome] = {}
        both = [rel for rel in RELEASES
                if len({o.row.micro_batch for o in outs if o.row.release == rel}) > 1]
        for o in latest:
            if not both or o.row.release == both[-1]:
                runs[o.row.micro_batch] = o
        mbs = sorted(runs)
        for m1, m2 in zip(mbs, mbs[1:]):
            x, y = runs[m1], runs[m2]
            rel = x.row.release if x.row.release == y.row.release else \
                f"{x.row.release} / {y.row.release}"
            got.append((f"{key[1]} {key[0]} {key[2]} {key[3]}g ({rel})", m1, m2,
                        y.row.tokens_per_s_per_gpu / x.row.tokens_per_s_per_gpu,
                        y.tokens_per_s_per_gpu / x.tokens_per_s_per_gpu))
    return got


def mbs_lines(out: list[Outcome]) -> list[str]:
    lines = ["micro-batch pairs of alike runs (tokens/s/GPU at the larger over the smaller): "
             "published, predicted"]
    pairs = mbs_pairs(out)
    for label, a, b, pub, pred in pairs:
        lines.append(f"  {label:<56}mbs {a}->{b}  {pub:6.3f}{pred:8.3f}")
    right = sum(1 for *_, pub, pred in pairs if (pub - 1) * (pred - 1) > 0)
    lines.append(f"  {len(pairs)} pairs, {right} moved the way the tables do")
    return lines
