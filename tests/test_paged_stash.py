"""Megatron-Core's MoE paged stash (moe_paged_stash, megatron/core/transformer/moe/
paged_stash.py and experts.py L643-691 @ Megatron-LM cd4afffa, Megatron-Bridge 0.6.0's
pin): the routed experts' saved rows held in one kept stash buffer of ``buffer`` times the
peak in-flight average rows (ledger.placement.stash), the layer computing or reloaded
holding them padded to ``capacity``."""
from dataclasses import replace

import pytest

from ledger.arch import layer_activations
from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.frameworks.paged_stash import of_megatron
from ledger.model import qwen3_30b_a3b
from ledger.placement import memory_points, place
from ledger.placement.layers import (_layer_kw, layer_activation_bytes, layer_stashed_bytes,
                                     layer_working_bytes)


def _cfg(stash=None):
    return ParallelConfig(tp=1, pp=1, dp=8, ep=8, micro_batch=4, num_microbatches=16,
                          zero_stage=1, framework="megatron", recompute="none",
                          paged_stash=stash)


def test_the_layer_leaves_its_experts_rows_to_the_stash_and_pads_the_live_one():
    """Qwen3-30B-A3B (48 MoE layers): a layer's own kept bytes drop by its routed experts'
    saved bytes (their rows live in the stash buffer, the padded originals freed,
    paged_stash.py L499-509 @cd4afffa), its working set grows by 1.5 x them."""
    m = qwen3_30b_a3b()
    plain, stash = _cfg(), _cfg((1.2, 1.5))
    experts = layer_activations(m, **_layer_kw(m, plain)).experts_bytes
    assert experts > 0 and layer_stashed_bytes(m, stash) == experts
    assert layer_stashed_bytes(m, plain) == 0
    kept = layer_activation_bytes(m, stash) - layer_activation_bytes(m, plain)
    assert kept == pytest.approx(-experts)
    work = layer_working_bytes(m, stash) - layer_working_bytes(m, plain)
    assert work == pytest.approx(1.5 * experts)
    # what the layer's kernels write (the step's elementwise bytes) is not the stash's
    assert layer_activation_bytes(m, stash, offload=False) == \
        layer_activation_bytes(m, plain, offload=False)


@pytest.mark.parametrize("pp,want", [(1, [1.2 * 1 * 48]),  # one micro-batch of 48 layers
                                     (2, [1.2 * 2 * 24, 1.2 * 1 * 24])])  # 1F1B: pp - r
def test_the_stash_is_one_kept_buffer_sized_at_the_peak(pp, want):
    """allocate_stash_buffers (paged_stash.py L546-628 @cd4afffa) sizes one static buffer at
    capture, buffer x the peak in-flight rows, kept for the run: at PP 2 (1F1B) rank 0 holds 2
    micro-batches of its 24 layers in flight, rank 1 one. It is a kept buffer: there at the
    optimizer step and after the step, where the layers' activations are not; at the
    forward's peak it adds (1.2 - 1) x the in-flight experts' bytes."""
    m = qwen3_30b_a3b()
    plain, stash = (replace(_cfg(s), pp=pp, dp=8 // pp, ep=8 // pp) for s in (None, (1.2, 1.5)))
    experts = layer_stashed_bytes(m, stash)
    for r, (a, b) in enumerate(zip(place(m, plain).memory_by_rank,
                                   place(m, stash).memory_by_rank)):
        assert dict(b.named)["MoE paged stash"] == pytest.approx(want[r] * experts)
        assert b.resident_bytes - a.resident_bytes == pytest.approx(want[r] * experts)
    a, b = memory_points(m, plain, 0), memory_points(m, stash, 0)
    assert b["optimizer step"] - a["optimizer step"] == pytest.approx(want[0] * experts)
    assert b["forward"] - a["forward"] == pytest.approx((want[0] - want[0] / 1.2) * experts)


def test_a_dense_model_s_layers_do_not_move():
    from ledger.model import llama3_8b
    m = llama3_8b()
    assert layer_activation_bytes(m, replace(_cfg((1.2, 1.5)), ep=1)) == \
        layer_activation_bytes(m, replace(_cfg(), ep=1))


@pytest.mark.parametrize("stash", [(0.0, 1.5), (1.2, 0.5), (1.2,), "on"])
def test_an_odd_stash_is_refused_naming_the_field(stash):
    with pytest.raises(LedgerError) as err:
        _cfg(stash)
    assert str(err.value).startswith("paged_stash:")


@pytest.mark.parametrize("args,want", [
    ((True, 1.2, 1.5), (1.2, 1.5)), ((False, 1.2, 1.5), None), ((None, 1.2, 1.5), None),
    ((True, None, 1.5), (1.10, 1.5)),  # Megatron's default CUDA factor (L1274)
    ((True, -1.1, 2), (1.1, 2.0)),  # sized by the actual peak: its magnitude
    ((True, 1.2, None), None)])  # Megatron requires the capacity factor (L1904-1920)
def test_the_stash_megatron_runs(args, want):
    assert of_megatron(*args) == want


def test_the_bridge_rows_price_it_and_plan_agrees():
    """The 26.08 MoE recipes under full-iteration CUDA graphs set moe_paged_stash with a
    1.2 CUDA buffer and a 1.5 rank capacity: priced, no longer named as not priced; plan
    pinned to the DeepSeek-V4-Flash row holds it as report does."""
    from ledger.render.bridge import config_of, model_of, precision_of, rows
    from ledger.render.plan_agrees import compare

    got = [r.as_run() for r in rows() if r.release == "26.08" and r.moe
           and r.setting("moe_paged_stash") is True]
    assert len(got) >= 8
    for row in got:
        cfg, approx = config_of(row, precision_of(row)[0], model_of(row))
        assert cfg.paged_stash == (1.2, 1.5)
        assert not [a for a in approx if "stash" in a]
    v4 = next(r for r in got if r.model == "deepseek-v4-flash" and r.gpu == "gb200")
    step, memory = compare(v4)
    assert abs(step) < 1e-9 and abs(memory) < 1e-9
