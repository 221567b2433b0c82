"""The Megatron-Bridge precision tutorial's run (``ledger.validation.tutorial``) through the
ledger: each precision's step time on ``estimate``'s path, as a Megatron-Bridge table row is
priced (``ledger.render.bridge``: model, placement, precision and its BF16 layers), with the
one difference the tutorial's recipe makes - the library recipe reduces gradients in FP32
(``tutorial.GRAD_DTYPE``), the perf scripts in BF16. Printed: published vs predicted step
time and the error in tokens/s/GPU (the bridge table's sign: negative, the ledger too slow),
then each precision's speed-up over BF16 and over FP8, published against predicted."""
from __future__ import annotations

from dataclasses import replace

from ledger.validation import tutorial


def predicted_step_s(precision: str) -> float:
    """The ledger's step time of the tutorial's run in one precision (shipped constants)."""
    from ledger.render.bridge import config_of, model_of, precision_of, system_of, tp_overlap
    from ledger.step import estimate

    row = tutorial.row(precision)
    model = model_of(row)
    prec, approx = precision_of(row)
    cfg, approx2 = config_of(row, prec, model)
    if approx or approx2:  # every setting of this run is priced; say so if that changes
        raise ValueError(f"{row.id}: not priced: {'; '.join(approx + approx2)}")
    cfg = replace(cfg, grad_dtype=tutorial.GRAD_DTYPE)
    est = estimate(model, cfg, system_of(row), precision=prec, optimizer="adam",
                   tp_overlap=tp_overlap(row))
    return float(est.step_time_s)


def predicted() -> dict[str, float]:
    return {p: predicted_step_s(p) for p in tutorial.PUBLISHED}


def lines(pred: dict[str, float] | None = None) -> list[str]:
    pred = pred or predicted()
    pub = {p: v[0] for p, v in tutorial.PUBLISHED.items()}
    src = tutorial.SOURCE
    out = [f"Llama 3.1 8B on {tutorial.GPUS} {tutorial.GPU.upper()}, TP 1 PP 1 CP 1 DP 4, "
           f"MBS {tutorial.MBS} GBS {tutorial.GBS} seq {tutorial.SEQ} (predictions; "
           f"{src['repo']} {src['path']} @ {src['commit'][:10]})",
           f"{'precision':<10}{'published s':>12}{'predicted s':>12}{'error':>8}"]
    for p in pub:
        err = pub[p] / pred[p] - 1  # tokens/s/GPU: (pred - pub) / pub
        out.append(f"{p:<10}{pub[p]:12.2f}{pred[p]:12.2f}{err:+8.1%}")
    out.append(f"{'speed-up':<18}{'published':>10}{'predicted':>10}{'error':>8}")
    for base in ("bf16", "fp8_cs"):
        for p in (q for q in pub if q != base and (base == "bf16" or q != "bf16")):
            r_pub, r_pred = pub[base] / pub[p], pred[base] / pred[p]
            out.append(f"{p + ' over ' + base:<18}{r_pub:10.3f}{r_pred:10.3f}"
                       f"{r_pred / r_pub - 1:+8.1%}")
    return out
