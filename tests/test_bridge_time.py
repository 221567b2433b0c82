"""The time model against Megatron-Bridge's published tables (ledger.render.bridge): the
declared calibration set, the micro-batch pairs, and issue 32's bar on the prediction rows
- held as strict xfails with the figures measured, until the model meets them."""
import pytest

from ledger.validation.bridge import CALIBRATION_RELEASE, rows


def _ran(role=None, moe=None):
    from ledger.render.bridge import outcomes

    return [o for o in outcomes() if o.status == "ran" and o.error is not None
            and (role is None or o.row.role == role) and (moe is None or o.row.moe == moe)]


def _pairs():
    """Rows of one model, GPU, precision and parallel sizes published at two micro-batch
    sizes: (key, smallest mb, largest mb, published ratio, predicted ratio) of their
    tokens/s/GPU (means over releases)."""
    groups = {}
    for o in _ran():
        r = o.row
        key = (r.model, r.gpu, r.precision, r.tp, r.pp, r.cp, r.vp, r.ep, r.gpus)
        groups.setdefault(key, {}).setdefault(r.mbs, []).append(
            (r.tokens_per_s_per_gpu, o.tokens_per_s_per_gpu))
    out = []
    for key, by in sorted(groups.items(), key=str):
        if len(by) < 2:
            continue
        lo, hi = by[min(by)], by[max(by)]

        def ratio(i):
            return (sum(x[i] for x in hi) / len(hi)) / (sum(x[i] for x in lo) / len(lo))
        out.append((key, min(by), max(by), ratio(0), ratio(1)))
    return out


def test_calibration_is_one_declared_release_and_at_most_a_quarter():
    every = rows()
    calib = [r for r in every if r.role == "calibration"]
    assert {r.release for r in calib} == {CALIBRATION_RELEASE}
    assert 0 < len(calib) <= len(every) / 4  # 36 of 283


def test_qwen3_30b_b200_gains_from_four_sequences_a_micro_batch_as_published():
    """26.02 at micro-batch 1 publishes 9,691 tokens/s/GPU, 26.02.01 to 26.04.01 at 4 about
    26,900 (x2.8; the recipe also moved to HybridEP and graphed attention). Priced without
    the host's launches the two moved 4% apart; with them, more than twice."""
    pair = [p for p in _pairs() if p[0][:2] == ("qwen3-30b-a3b", "b200")]
    assert len(pair) == 1
    _, lo, hi, published, predicted = pair[0]
    assert (lo, hi) == (1, 4) and published == pytest.approx(2.8, abs=0.05)
    assert 2.0 < predicted < 4.0, predicted


def test_every_micro_batch_pair_moves_within_25_percent_of_the_table():
    off = [(k[:2], lo, hi, round(pub, 2), round(pred, 2)) for k, lo, hi, pub, pred in _pairs()
           if abs(pred / pub - 1) > 0.25]
    assert not off, off


@pytest.mark.xfail(strict=True, reason="measured (benchmarks/bridge.py): prediction rows "
                   "dense mean |error| 5.3% (max +28.8%: 25.09 GB200 Llama 3.1 405B MXFP8), "
                   "MoE 8.3% (max +33.7%: 25.09 B200 Qwen3-30B-A3B FP8-CS under whole-layer "
                   "CUDA graphs); 6 prediction rows of 244 beyond 25% - those two, B300 "
                   "Nemotron 3 Super 26.06 (-28% / -31%, 64 experts a GPU), 25.11 B200 "
                   "Qwen3-235B-A22B (-29%) and 25.11 B200 DeepSeek-V3 (+25.1%)")
def test_bridge_prediction_rows_meet_issue_32s_bar():
    dense = [abs(o.error) for o in _ran("prediction", moe=False)]
    moe = [abs(o.error) for o in _ran("prediction", moe=True)]
    assert sum(dense) / len(dense) <= 0.05 and sum(moe) / len(moe) <= 0.10
    assert max(dense + moe) <= 0.25
