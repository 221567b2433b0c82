"""Interleaved model chunks of unequal layer counts, each priced with its own layers and
its own micro-batches in flight (ledger.placement.chunks), against Megatron-LM's schedule
walked by hand here and its functional-test golden.

Megatron-LM d98e8a64 megatron/core/pipeline_parallel/schedules.py: the warm-up
(p - r - 1) * 2 + (v - 1) * g forwards (L957-965), the schedule table of (micro-batch,
chunk) in groups of g micro-batches, every chunk of a group in turn (get_schedule_table
L989-1016), a backward's chunk v - 1 - the forward's (get_model_chunk_id L1244-1249), the
steady state's forward of k + warm-up then backward of k (L1731-1749); the chunks' layers
from transformer_block.py get_num_layers_to_build L147-201 (--account-for-embedding- and
--account-for-loss-in-pipeline-split: one slot off the first and the last model chunk).
"""
import pytest

from ledger.config import ParallelConfig
from ledger.model import ModelSpec

GOLDEN = "gpt/gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split"


def megatron_layers(layers: int, p: int, v: int, emb: bool, loss: bool) -> list[int]:
    """get_num_layers_to_build per model stage (chunk c of rank r is stage c p + r)."""
    per = (layers + emb + loss) // (p * v)
    out = [per] * (p * v)
    out[0] -= emb
    out[-1] -= loss
    return out


def megatron_peak(p: int, m: int, v: int, r: int, weight: list[float]) -> float:
    """Rank r's most saved bytes at once under Megatron's interleaved 1F1B (module
    docstring): each forward holds one micro-batch of its chunk until its backward."""
    g = p  # microbatch_group_size_per_vp_stage: pp unless set
    table = []
    for lo in range(0, m, g):
        hi = m if lo + g >= m else lo + g
        table += [(mb, c) for c in range(v) for mb in range(lo, hi)]
    total = m * v
    warm = min((p - r - 1) * 2 + (v - 1) * g, total)
    held, best = [0] * v, 0.0

    def fwd(k):
        held[table[k][1]] += 1
        return sum(n * w for n, w in zip(held, weight))
    for k in range(warm):
        best = max(best, fwd(k))
    for k in range(total - warm):
        best = max(best, fwd(k + warm))
        held[v - 1 - table[k][1]] -= 1
    return best


def test_megatron_layers_match_the_ledger_split_of_the_golden():
    """6 layers, the embedding and the loss over PP 4 x VP 2: a slot each, the first and
    last model chunks empty - the split the ledger's rule gives this case too."""
    from ledger.placement.stages import split_layers

    assert megatron_layers(6, 4, 2, True, True) == [0, 1, 1, 1, 1, 1, 1, 0]
    assert split_layers(6, 4, 2) == [0, 1, 1, 1, 1, 1, 1, 0]


@pytest.mark.parametrize("m", [4, 8, 16])
@pytest.mark.parametrize("split", [(0, 1, 1, 1, 1, 1, 1, 0), (1, 2, 2, 2, 2, 2, 2, 3)])
def test_each_chunk_in_flight_as_megatron_runs_it(m, split):
    """Every rank's saved stage activations at its peak: one layer's bytes x the
    micro-batches Megatron's schedule holds of each chunk, not the even weighting."""
    from ledger.pipeline import placement_pipeline
    from ledger.placement.chunks import own_chunks, stage_weights
    from ledger.placement.layers import layer_kinds

    model = ModelSpec(name="t", layers=sum(split), hidden=512, heads=8, vocab=50304,
                      ffn_hidden=2048, seq_len=1024)
    cfg = ParallelConfig(pp=4, vp=2, micro_batch=4, num_microbatches=m, stage_layers=split)
    kinds = layer_kinds(model, 4, 2, "interleaved", list(split))[0]
    weights = stage_weights(model, cfg, list(split), kinds, [1.0] * len(kinds))
    inflight = placement_pipeline("interleaved", 4, m, 2)[1]
    for r in range(4):
        own, _ = own_chunks(cfg, weights, r, inflight[r])
        want = megatron_peak(4, m, 2, r, [split[r], split[4 + r]])
        got = (split[r] + split[4 + r]) * inflight[r] if own is None else own * inflight[r]
        assert got == pytest.approx(want), r


def test_the_planner_prices_the_chunks_as_report_does():
    """plan, pinned to one interleaved placement of a 30-layer model over PP 4 x VP 2 (the
    rule's split 3 4 4 4 4 4 4 3), against report's bytes."""
    from ledger.plan import Pins, plan
    from ledger.step import estimate
    from ledger.system import system

    model = ModelSpec(name="t", layers=30, hidden=1024, heads=16, vocab=50304,
                      ffn_hidden=4096, seq_len=2048)
    cfg = ParallelConfig(pp=4, vp=2, dp=2, micro_batch=1, num_microbatches=8)
    sysm = system("h100-sxm")
    res = plan(model, 8, sysm, 16, pins=Pins(tp=1, cp=1, pp=4, vp=2, dp=2, zero=0,
                                             micro_batch=1, recompute="none",
                                             schedule="interleaved"), headroom_bytes=0, top=1)
    est = estimate(model, cfg, sysm)
    assert res.plans[0].memory_bytes == pytest.approx(est.memory_per_gpu_bytes, rel=1e-9)


def test_the_golden_with_unequal_chunks_is_priced_within_a_point(tmp_path):
    """Megatron-LM's golden (PP 4 x VP 2, a 0-layer first and last chunk): the last rank's
    max allocated, measured on each platform, within 1% (it was 13% under with every chunk
    weighed alike)."""
    from test_megatron_goldens import _golden

    from ledger.cli.goldens import price_one

    for platform in ("dgx_a100", "dgx_gb200", "dgx_h100"):
        rows, _ = price_one(_golden(GOLDEN, platform), str(tmp_path))
        allocated = next(r for r in rows if r.metric == "allocated")
        assert abs(allocated.error) < 0.01, (platform, allocated.error)


def test_alike_chunks_are_priced_as_before():
    """Equal chunks: the even weighting is exact, no rank is re-weighed."""
    from ledger.placement.chunks import uneven_ranks
    from ledger.placement.layers import layer_kinds

    model = ModelSpec(name="t", layers=8, hidden=512, heads=8, vocab=50304, ffn_hidden=2048,
                      seq_len=1024)
    kinds = layer_kinds(model, 2, 2, "interleaved")[0]
    assert uneven_ranks(model, 2, 2, "interleaved", [2, 2, 2, 2], 4, kinds) == {}
    assert list(uneven_ranks(model, 2, 2, "interleaved", [1, 2, 2, 3], 4, kinds)) == [0, 1]


@pytest.mark.parametrize("flags,want", [
    ("--account-for-loss-in-pipeline-split", [8, 8, 8, 7]),  # the ends rule: 7 8 8 8
    ("--account-for-embedding-in-pipeline-split", [7, 8, 8, 8]),
    ("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
     "--num-layers 30 --num-virtual-stages-per-pipeline-rank 2", [3, 4, 4, 4, 4, 4, 4, 3])])
def test_a_launch_s_account_for_split_is_megatron_s(tmp_path, flags, want):
    """The layer slots' split as get_num_layers_to_build makes it (module docstring): the
    embedding's slot off the first model stage, the loss's off the last."""
    from test_importers import megatron

    from ledger.cli.commands import parse_args, report_placement
    from ledger.cli.inputs import source

    text = megatron(flags).replace("--num-layers 32", "--num-layers 31") \
        .replace("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2",
                 "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4")
    if "--num-layers 30" in flags:
        text = text.replace("--num-layers 31 ", "")
    path = tmp_path / "a.sh"
    path.write_text(text)
    a = parse_args(["report", "--from-megatron", str(path), "--gpus", "64"])
    a.launch = source(a)
    cfg = report_placement(a)[1]
    assert list(cfg.stage_layers) == want
    assert megatron_layers(sum(want), 4, len(want) // 4, "embedding" in flags,
                           "loss" in flags) == want
