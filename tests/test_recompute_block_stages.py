"""Megatron's --recompute-method block on pipeline stages of unequal layer counts: each model
chunk's TransformerBlock runs its own first --recompute-num-layers layers under a checkpoint
and the rest whole (Megatron-LM d98e8a64 megatron/core/recompute.py L167-180, the loop over
num_layers_per_pipeline_rank = len(self.layers), transformer_block.py L334), and the MTP
block skips block recompute (multi_token_prediction.py L1630-1640: "not supported for MTP
yet ... Skipping recompute"). Hand-evaluated here on a split of 2 4 4 4 layers."""
from dataclasses import replace

import pytest

from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.parallel import place

SPLIT = (2, 4, 4, 4)


def _model(mtp: int = 0) -> ModelSpec:
    return ModelSpec(name="t", layers=sum(SPLIT), hidden=1024, heads=16, vocab=32000,
                     ffn_hidden=4096, seq_len=2048, mtp_layers=mtp)


def _cfg(**kw) -> ParallelConfig:
    return ParallelConfig(pp=4, micro_batch=1, num_microbatches=8, stage_layers=SPLIT,
                          recompute="full", recompute_layers=3, **kw)


def _kept_whole(model, cfg):
    """One layer's saved bytes recomputed (full recompute of every layer) and run whole
    (no recompute): the two prices block recompute mixes."""
    from ledger.placement.layers import layer_activation_bytes

    kept = layer_activation_bytes(model, replace(cfg, recompute_layers=None))
    whole = layer_activation_bytes(model, replace(cfg, recompute="none", recompute_layers=None))
    return kept, whole


def test_each_stage_recomputes_its_own_first_layers():
    """Rank r holds stage r under 1F1B with min(pp - r, m) micro-batches in flight
    (schedules.py L957); its activations: that many x (min(3, L_r) recomputed + the rest
    whole) - rank 0 both its layers recomputed, ranks 1-3 three of four."""
    model, cfg = _model(), _cfg()
    kept, whole = _kept_whole(model, cfg)
    ranks = place(model, cfg).memory_by_rank
    for r in (0, 1, 2):  # the last rank also holds the output head's activations
        n = SPLIT[r]
        want = (4 - r) * (min(3, n) * kept + (n - min(3, n)) * whole)
        assert ranks[r].activations_bytes == pytest.approx(want, rel=1e-9), r


def test_the_step_recomputes_the_pacing_rank_s_own_layers():
    """The step's recomputed share is the busiest rank's (4 layers, 3 of them again):
    3 / 4, not 3 over the mean chunk of 3.5."""
    from ledger.placement.layers import recomputed_share

    assert recomputed_share(_model(), _cfg()) == pytest.approx(3 / 4)
    even = replace(_cfg(), stage_layers=None)  # 14 over 4: 3 4 4 3
    assert recomputed_share(_model(), even) == pytest.approx(3 / 4)
    # the hardware FLOPs count every stage's own: 2 + 3 + 3 + 3 of 14
    assert recomputed_share(_model(), _cfg(), whole=True) == pytest.approx(11 / 14)


def test_the_mtp_layers_run_whole_under_block():
    """The last stage's MTP layer is not checkpointed by block recompute."""
    from ledger.placement.chunks import stage_weights
    from ledger.placement.layers import layer_kinds

    model, cfg = _model(mtp=1), _cfg()
    kinds = layer_kinds(model, 4, 1, "1f1b", list(SPLIT))[0]
    per_kind = [1.0] * len(kinds)
    got = stage_weights(model, cfg, list(SPLIT), kinds, per_kind)
    kept, whole = _kept_whole(model, cfg)
    assert got[-1] == pytest.approx(3 * kept + 2 * whole, rel=1e-9)  # 3 again, 1 + MTP whole
    assert got[0] == pytest.approx(2 * kept, rel=1e-9)


def test_interleaved_chunks_each_recompute_their_own_first_layers():
    """PP 2 x VP 2 over 1 3 3 3 layers, block 2: rank 0 holds chunk 0 (its one layer
    recomputed) and chunk 2 (two recomputed, one whole), priced with the micro-batches
    Megatron's interleaved schedule holds of each (test_pipeline_chunks.megatron_peak)."""
    from test_pipeline_chunks import megatron_peak

    split = (1, 3, 3, 3)
    model = ModelSpec(name="t", layers=10, hidden=1024, heads=16, vocab=32000,
                      ffn_hidden=4096, seq_len=2048)
    cfg = ParallelConfig(pp=2, vp=2, micro_batch=1, num_microbatches=4, stage_layers=split,
                         recompute="full", recompute_layers=2)
    kept, whole = _kept_whole(model, cfg)
    weight = [min(2, n) * kept + (n - min(2, n)) * whole for n in split]
    got = place(model, cfg).memory_by_rank[0].activations_bytes
    assert got == pytest.approx(megatron_peak(2, 4, 2, 0, [weight[0], weight[2]]), rel=1e-9)
