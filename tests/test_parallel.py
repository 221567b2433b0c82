"""Placement semantics: hand arithmetic, the seed's ZeRO table, and properties."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.arch import activation_bytes_per_layer
from ledger.errors import LedgerError
from ledger.memory import state_bytes
from ledger.model import ModelSpec, llama3_70b, llama3_405b, mixtral_8x7b
from ledger.parallel import MoESpec, ParallelConfig, per_gpu_state, place, pp_bubble_fraction
from ledger.placement import coll_bytes

N70 = 70_553_706_496


@pytest.mark.parametrize("zero,per_param,gb", [
    (0, 16, 1128.9),                     # 16N
    (1, 4 + 12 / 64, 295.4),             # 4N + 12N/N_d
    (2, 2 + 14 / 64, 156.5),             # 2N + 14N/N_d
    (3, 16 / 64, 17.6),                  # 16N/N_d
])
def test_zero_table_70b_nd64(zero, per_param, gb):
    """The seed's per-GPU table for 70.6B at N_d = 64, in GB (10^9 B)."""
    m = llama3_70b()
    st = per_gpu_state(m, state_bytes(m), ParallelConfig(dp=64, zero_stage=zero))
    assert st.total_bytes == pytest.approx(per_param * N70, abs=3)
    assert round(st.total_bytes / 1e9, 1) == gb


def test_zero1_removes_74_percent():
    m = llama3_70b()
    full = per_gpu_state(m, state_bytes(m), ParallelConfig(dp=64)).total_bytes
    z1 = per_gpu_state(m, state_bytes(m), ParallelConfig(dp=64, zero_stage=1)).total_bytes
    assert round(1 - z1 / full, 2) == 0.74


def test_hsdp_shard_8_does_not_fit_70b():
    """The seed: HSDP with N_s = 8 needs 141 GB per GPU for 70B; N_s = 64 needs 17.6 GB."""
    m = llama3_70b()
    for shard, gb in ((8, 141.1), (64, 17.6)):
        cfg = ParallelConfig(dp=1024, zero_stage=3, hsdp_shard=shard)
        assert round(per_gpu_state(m, state_bytes(m), cfg).total_bytes / 1e9, 1) == gb


def test_dp_allreduce_is_282_gb_and_nearly_independent_of_nd():
    """DP moves 2(N_d-1)/N_d x N bf16 grads: 282 GB for 70B; 1.75N at 8, 1.998N at 1024."""
    m = llama3_70b()
    for nd, elems in ((8, 1.75), (1024, 1.998)):
        pl = place(m, ParallelConfig(framework="ideal", dp=nd))
        assert round(pl.total_bytes("dp") / 2 / N70, 3) == elems
    assert round(place(m, ParallelConfig(framework="ideal", dp=1024)).total_bytes("dp") / 1e9) == 282


def test_zero3_moves_3n_and_2n_without_reshard():
    m = llama3_70b()
    n = 64
    base = coll_bytes("all_gather", n, 2 * N70)
    z3 = place(m, ParallelConfig(framework="ideal", dp=n, zero_stage=3)).total_bytes("dp")
    z3_keep = place(m, ParallelConfig(framework="ideal", dp=n, zero_stage=3, reshard_after_forward=False))
    assert z3 == pytest.approx(3 * base)
    assert z3_keep.total_bytes("dp") == pytest.approx(2 * base)
    # without resharding the full bf16 params stay resident: ZeRO-2's memory
    z2 = per_gpu_state(m, state_bytes(m), ParallelConfig(framework="ideal", dp=n, zero_stage=2))
    assert z3_keep.per_gpu == z2


def test_korthikanti_activation_figures():
    """34sbh ~ 2.3 GB for 70B at s = 8192 (180 GB over 80 layers); 34sbh/8 ~ 9 GB for
    405B at s = 131072."""
    a70 = activation_bytes_per_layer(seq_len=8192, micro_batch=1, hidden=8192, heads=64)
    assert round(a70 / 1e9, 1) == 2.3
    assert 180 <= a70 * 80 / 1e9 < 185
    a405 = activation_bytes_per_layer(seq_len=131072, micro_batch=1, hidden=16384,
                                      heads=128, tp=8)
    assert round(a405 / 1e9) == 9


def test_activation_without_sp_keeps_the_10sbh_term():
    kw = dict(seq_len=1024, micro_batch=2, hidden=512, heads=8, tp=4)
    sbh = 1024 * 2 * 512
    assert activation_bytes_per_layer(**kw, sequence_parallel=False) == sbh * (10 + 24 / 4)
    assert activation_bytes_per_layer(**kw) == sbh * 34 / 4
    with_scores = activation_bytes_per_layer(**kw, flash=False)
    assert with_scores == sbh * (34 + 5 * 8 * 1024 / 512) / 4


@pytest.mark.parametrize("p,m,v,expected", [
    (16, 16, 1, 0.484), (16, 16, 8, 0.105),  # the seed: 48% -> 10.5% with v = 8
    (8, 16, 1, 7 / 23), (8, 16, 4, (7 / 4) / (16 + 7 / 4)), (4, 8, 1, 3 / 11),
])
def test_bubble(p, m, v, expected):
    assert pp_bubble_fraction(p, m, v) == pytest.approx(expected, abs=5e-4)


def test_gpipe_needs_135_microbatches_for_10_percent_at_p16():
    assert pp_bubble_fraction(16, 135) <= 0.1 < pp_bubble_fraction(16, 134)


def test_ep_example_from_the_seed():
    """h = 8192, k = 2, 8192 tokens, N_e = 8: 4 x 7/8 x 8192 x 32 KiB ~ 0.9 GB per layer."""
    m = ModelSpec(name="moe", layers=1, hidden=8192, heads=64, vocab=1000, seq_len=8192,
                  ffn_hidden=8192, num_experts=8, top_k=2)
    pl = place(m, ParallelConfig(dp=8, ep=8))
    ep = pl.total_bytes("ep")
    assert ep == 4 * 7 / 8 * 8192 * 2 * 8192 * 2
    assert round(ep / 1e9, 1) == 0.9


def test_moe_experts_split_by_ep_and_reduce_over_dp_over_ep():
    m = mixtral_8x7b()
    cfg = ParallelConfig(framework="ideal", dp=8, ep=4, zero_stage=1)
    pl = place(m, cfg)
    f = m.expert_params / m.params
    st = state_bytes(m)
    assert pl.per_gpu.params_bytes == int(st.params_bytes * (1 - f) + st.params_bytes * f / 4)
    expert_rs = [c for c in pl.comms if c.what == "expert grads"]
    assert expert_rs[0].bytes == pytest.approx(
        coll_bytes("reduce_scatter", 2, st.grads_bytes * f / 4))
    # the capacity factor pads the routed payload
    padded = place(m, ParallelConfig(framework="ideal", dp=8, ep=4, moe=MoESpec(capacity_factor=1.25)))
    assert padded.total_bytes("ep") == pytest.approx(1.25 * pl.total_bytes("ep"))


def test_seed_moespec_for_a_dense_described_model():
    m = llama3_70b()
    cfg = ParallelConfig(dp=8, ep=8, moe=MoESpec(num_experts=8, topk=2, expert_fraction=0.5))
    pl = place(m, cfg)
    full = state_bytes(m).params_bytes
    assert pl.per_gpu.params_bytes == int(full * 0.5 + full * 0.5 / 8)
    assert pl.total_bytes("ep") > 0


def test_ulysses_mha_is_the_seeds_16sbh_over_nc():
    m = ModelSpec(name="mha", layers=1, hidden=1024, heads=16, vocab=100, seq_len=4096,
                  ffn_hidden=4096)
    cp = 8
    pl = place(m, ParallelConfig(dp=1, cp=cp, cp_kind="ulysses"))
    s_local = 4096 // cp * 1024 * 2
    assert pl.total_bytes("cp") == pytest.approx(8 * (cp - 1) / cp * s_local)


def test_links_follow_the_layout():
    m = llama3_70b()
    pl = place(m, ParallelConfig(tp=2, pp=4, dp=1, num_microbatches=4))
    assert {c.axis: c.link for c in pl.comms} == {"tp": "nvlink", "pp": "nvlink"}
    pl = place(m, ParallelConfig(tp=8, dp=2))
    assert {c.axis: c.link for c in pl.comms} == {"tp": "nvlink", "dp": "ib"}


# ---- validation: every refusal names its field --------------------------------------
@pytest.mark.parametrize("kw,field", [
    (dict(tp=0), "tp"), (dict(pp=-1), "pp"), (dict(dp=0), "dp"), (dict(cp=-2), "cp"),
    (dict(ep=0), "ep"), (dict(micro_batch=0), "micro_batch"), (dict(vp=0), "vp"),
    (dict(num_microbatches=0), "num_microbatches"), (dict(zero_stage=4), "zero_stage"),
    (dict(zero_stage=-1), "zero_stage"), (dict(cp_kind="tree"), "cp_kind"),
    (dict(dp=8, zero_stage=3, hsdp_shard=3), "hsdp_shard"),
    (dict(dp=8, hsdp_shard=4), "hsdp_shard"), (dict(dp=6, ep=4), "ep"),
    (dict(pp=4, vp=2, num_microbatches=6), "num_microbatches"), (dict(vp=2), "vp"),
])
def test_config_refusals_name_the_field(kw, field):
    with pytest.raises(LedgerError) as e:
        ParallelConfig(**kw)
    assert e.value.field == field
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kw,field,numbers", [
    (dict(tp=3), "heads", ("64", "3")),
    (dict(tp=16), "kv_heads", ("8", "16")),
    (dict(pp=42, vp=2, num_microbatches=42), "layers", ("80", "42", "2", "84")),
    (dict(cp=3), "seq_len", ("8192", "6")),
    (dict(cp=2, tp=8, cp_kind="ulysses"), "kv_heads", ("8", "16")),
    (dict(ep=2, dp=2), "ep", ("2",)),
])
def test_model_refusals_show_the_numbers(kw, field, numbers):
    with pytest.raises(LedgerError) as e:
        place(llama3_70b(), ParallelConfig(**kw))
    assert e.value.field == field
    for n in numbers:
        assert n in str(e.value)


def test_experts_must_divide_by_ep():
    with pytest.raises(LedgerError, match=r"num_experts\(8\) is not divisible by ep\(16\)"):
        place(mixtral_8x7b(), ParallelConfig(dp=16, ep=16))


def test_uneven_layer_split_is_legal():
    pl = place(llama3_405b(), ParallelConfig(tp=8, pp=16, num_microbatches=16))
    assert pl.layers_per_stage == 126 / 16


# ---- properties ------------------------------------------------------------------
sizes = st.sampled_from([1, 2, 4, 8])


@given(n=st.integers(1, 4096), S=st.floats(0, 1e12))
def test_all_reduce_is_reduce_scatter_plus_all_gather(n, S):
    assert coll_bytes("all_reduce", n, S) == pytest.approx(
        coll_bytes("reduce_scatter", n, S) + coll_bytes("all_gather", n, S))


@settings(max_examples=150, deadline=None)
@given(tp=sizes, pp=sizes, dp=st.sampled_from([1, 2, 4, 16, 64]), cp=st.sampled_from([1, 2]),
       reshard=st.booleans())
def test_state_never_grows_with_zero_stage(tp, pp, dp, cp, reshard):
    m = llama3_70b()
    totals = []
    for z in range(4):
        cfg = ParallelConfig(tp=tp, pp=pp, dp=dp, cp=cp, zero_stage=z,
                             reshard_after_forward=reshard)
        pl = place(m, cfg)
        totals.append((pl.per_gpu.total_bytes, pl.heaviest_stage.total_bytes))
    for a, b in zip(totals, totals[1:]):
        assert b[0] <= a[0] and b[1] <= a[1]


@settings(max_examples=100, deadline=None)
@given(tp=sizes, pp=sizes, m=st.integers(1, 32), mb=st.integers(1, 4))
def test_tp_bytes_same_with_and_without_sp(tp, pp, m, mb):
    model = llama3_70b()
    on = place(model, ParallelConfig(framework="ideal", tp=tp, pp=pp, num_microbatches=m, micro_batch=mb))
    off = place(model, ParallelConfig(framework="ideal", tp=tp, pp=pp, num_microbatches=m, micro_batch=mb,
                                      sequence_parallel=False))
    assert on.total_bytes("tp") == pytest.approx(off.total_bytes("tp"))


@settings(max_examples=100, deadline=None)
@given(tp=sizes, dp=st.sampled_from([2, 4, 8, 32]), cp=st.sampled_from([1, 2, 4]),
       reshard=st.booleans())
def test_hsdp_with_full_shard_group_is_zero3(tp, dp, cp, reshard):
    m = llama3_70b()
    kw = dict(tp=tp, dp=dp, cp=cp, zero_stage=3, reshard_after_forward=reshard)
    a = place(m, ParallelConfig(**kw))
    b = place(m, ParallelConfig(**kw, hsdp_shard=dp * cp))
    assert a.per_gpu == b.per_gpu and a.comms == b.comms


FIELDS = ["tp", "pp", "dp", "cp", "ep", "micro_batch", "num_microbatches", "vp", "act_bytes"]


@given(field=st.sampled_from(FIELDS), value=st.integers(-1000, 0))
def test_every_non_positive_size_is_refused_by_name(field, value):
    with pytest.raises(LedgerError) as e:
        ParallelConfig(**{field: value})
    assert e.value.field == field and str(value) in str(e.value)


def test_schedule_default_and_in_flight_memory():
    """1F1B by default, interleaved with vp > 1; in-flight activations from the
    simulator. The seed's upper bound for 405B: 16 micro-batches x 8 layers x 544 MiB
    ~ 73 GB; Megatron's layout puts 7 layers on stage 0, so the true peak is rank 1's
    15 x 8 layers."""
    m405 = llama3_405b()
    cfg = ParallelConfig(framework="ideal", tp=8, pp=16, dp=128, zero_stage=1, num_microbatches=16)
    assert cfg.schedule == "1f1b"
    assert ParallelConfig(framework="ideal", pp=4, vp=2, num_microbatches=8).schedule == "interleaved"
    pl = place(m405, cfg)
    per_layer = pl.activation_bytes_per_layer
    assert int(per_layer * 8 * 16 / 1e9) == 73  # the seed's "up to 73 GB"
    assert pl.peak_inflight == tuple(float(16 - i) for i in range(16))
    assert pl.peak_rank == 1 and pl.activation_bytes == per_layer * 8 * 15
    zb = place(m405, ParallelConfig(framework="ideal", tp=8, pp=16, dp=128, zero_stage=1, num_microbatches=16,
                                    schedule="zb-h1"))
    assert zb.bubble_fraction < pl.bubble_fraction
    with pytest.raises(LedgerError) as e:
        ParallelConfig(framework="ideal", pp=4, num_microbatches=8, schedule="zb-v", vp=3)
    assert e.value.field == "vp"
