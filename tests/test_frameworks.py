"""Framework conventions: each correction of the frameworks issue as a worked example
whose expected value is hand arithmetic or a framework's own published formula."""
import dataclasses
import json

import pytest

from ledger.cli import main
from ledger.frameworks import FRAMEWORKS, SOURCES, Framework, get
from ledger.model import ModelSpec, llama3_8b, llama3_70b, llama3_405b, mixtral_8x7b
from ledger.parallel import ParallelConfig, place

GB, GiB = 1e9, 2**30
N8B = 8_030_261_248  # llama3-8b's exact parameter count (test_model.py holds it)
FACTS = [f.name for f in dataclasses.fields(Framework) if f.name not in ("name", "summary")]


def dp_rows(pl):
    return {(c.kind, c.what): c.bytes for c in pl.comms if c.axis == "dp"}


def test_every_fact_of_every_real_framework_has_a_source():
    for name in FRAMEWORKS:
        if name == "ideal":  # the seed's own accounting: the seed is its source
            continue
        missing = [f for f in FACTS if not SOURCES[name].get(f)]
        assert not missing, (name, missing)


def test_zero3_gathers_per_microbatch_as_fsdp2_does():
    """llama3-8b, dp 64, ZeRO-3 resharded, m = 4: FSDP2 gathers the bf16 params twice per
    micro-batch: 8 x 2 B x N x 63/64 = 126.5 GB; the seed's accounting says a quarter."""
    m = llama3_8b()
    for fw, gathers in (("torchtitan", 8), ("deepspeed", 8), ("ideal", 2)):
        pl = place(m, ParallelConfig(dp=64, zero_stage=3, num_microbatches=4, framework=fw))
        assert dp_rows(pl)[("all_gather", "params")] == pytest.approx(
            gathers * 2 * N8B * 63 / 64)
    assert round(8 * 2 * N8B * 63 / 64 / GB, 1) == 126.5


def test_sharded_grads_reduce_every_microbatch_unsharded_once():
    """ZeRO-2 (DeepSpeed, bf16 grads): m reduce-scatters of 2 B x N x 63/64; accumulating
    unsharded reduces once but keeps the whole gradient (2 B x N) in memory."""
    m, kw = llama3_8b(), dict(dp=64, zero_stage=2, num_microbatches=8, framework="deepspeed")
    sharded = place(m, ParallelConfig(**kw))
    once = place(m, ParallelConfig(**kw, grad_accumulation="unsharded"))
    rs = 2 * N8B * 63 / 64
    assert dp_rows(sharded)[("reduce_scatter", "grads")] == pytest.approx(8 * rs)
    assert dp_rows(once)[("reduce_scatter", "grads")] == pytest.approx(rs)
    assert sharded.per_gpu.grads_bytes == pytest.approx(2 * N8B / 64, abs=1)
    assert once.per_gpu.grads_bytes == pytest.approx(2 * N8B, abs=1)


@pytest.mark.parametrize("zero,scales", [(1, False), (3, True)])
def test_report_json_dp_bytes_scale_with_microbatches_for_zero3_only(capsys, zero, scales):
    def dp_bytes(m):
        assert main(["report", "llama3-8b", "--gpus", "64", "--zero", str(zero),
                     "--microbatches", str(m), "--framework", "torchtitan" if zero == 3
                     else "megatron", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        return {c["kind"]: c["bytes"] for c in out["comms"] if c["axis"] == "dp"}
    one, four = dp_bytes(1), dp_bytes(4)
    for kind in ("all_gather", "reduce_scatter"):
        assert four[kind] == pytest.approx(one[kind] * (4 if scales else 1))


def test_megatron_fp32_main_grads_and_distributed_optimizer():
    """bf16 params 2 B, fp32 main grads 4 B, 12 B of optimizer over dp: 6 + 12/dp."""
    m = llama3_8b()
    st = place(m, ParallelConfig(dp=8, zero_stage=1)).per_gpu
    assert (st.params_bytes, st.grads_bytes) == (2 * N8B, 4 * N8B)
    assert st.optim_bytes == 12 * N8B // 8


def test_fsdp2_keeps_fp32_shards_and_gathers_bf16():
    m = llama3_8b()
    pl = place(m, ParallelConfig(dp=8, zero_stage=3, framework="torchtitan"))
    st = pl.per_gpu
    assert (st.params_bytes, st.grads_bytes, st.optim_bytes) == (
        4 * N8B // 8, 4 * N8B // 8, 8 * N8B // 8)
    # at the peak (the loss backward) FSDP2 holds gathered in bf16 the root unit - the
    # 128256 x 4096 embedding and output and the final norm, which fully_shard does not
    # reshard after forward - and the last layer (218,112,000 params), no gradient yet
    root = 2 * 128256 * 4096 + 4096
    assert pl.memory.moment == "loss backward"
    assert pl.memory.buffers_bytes == 2 * root + 2 * 218_112_000


def test_megatron_sp_regathers_inputs_in_backward():
    """Per layer: 2 all-gathers forward, 4 backward (2 re-gathers for wgrad, 2 of the
    output gradients) against 4 reduce-scatters: 6:4 of s b h x (t-1)/t each."""
    m = llama3_70b()
    cfg = dict(tp=8, pp=1, dp=1, num_microbatches=1)
    one = 8192 * 8192 * 2 * 7 / 8  # one all-gather of s b h bf16 on 8 ranks
    for fw, ag in (("megatron", 6), ("ideal", 4), ("torchtitan", 4)):
        rows = {c.kind: c.bytes for c in place(m, ParallelConfig(**cfg, framework=fw)).comms
                if c.axis == "tp"}
        assert rows == pytest.approx({"all_gather": ag * one * 80,
                                      "reduce_scatter": 4 * one * 80})
    full = {c.kind: c.bytes for c in place(m, ParallelConfig(**cfg, recompute="full")).comms
            if c.axis == "tp"}
    assert full == pytest.approx({"all_gather": 8 * one * 80, "reduce_scatter": 6 * one * 80})


def test_ep_under_sp_sends_the_sp_shard():
    """Mixtral, tp 2, ep 4: Megatron's alltoall dispatcher routes s/(tp) tokens per rank."""
    m = mixtral_8x7b()
    kw = dict(tp=2, dp=4, ep=4, num_microbatches=1)
    rows = place(m, ParallelConfig(**kw)).comms
    mega = sum(c.bytes for c in rows if c.axis == "ep" and c.kind == "all_to_all")
    whole = place(m, ParallelConfig(**kw, framework="ideal")).total_bytes("ep")
    # 4 all-to-alls per MoE layer of tokens x top-2 x h bf16, 3/4 of it leaving the rank
    assert whole == pytest.approx(4 * 4096 * 2 * 4096 * 2 * 3 / 4 * 32)
    assert mega == pytest.approx(whole / 2)
    # Updated for expert TP: at Megatron's default etp = tp = 2 the dispatcher also
    # all-gathers the received rows over ETP and reduce-scatters the expert outputs
    # (token_dispatcher.py L741-751, L824-833): per pass (2 of each) 1/2 of 2 x 2048 x 2
    # rows x h x 2 B, so those rows are counted apart from the all-to-all above.
    etp = {c.kind: c.bytes for c in rows if c.axis == "ep" and c.kind != "all_to_all"}
    assert etp == pytest.approx({k: 2 * 2048 * 2 * 4096 * 2 * 32
                                 for k in ("all_gather", "reduce_scatter")})


def test_tied_embedding_grads_all_reduce_between_first_and_last_stage():
    m = ModelSpec(name="tied", layers=8, hidden=1024, heads=8, vocab=32000, seq_len=1024,
                  ffn_hidden=4096, tied_embeddings=True)
    pl = place(m, ParallelConfig(tp=2, pp=4, num_microbatches=4))
    rows = [c for c in pl.comms if c.what == "tied embedding grads"]
    # a group of two: the all-reduce sends 2 (2-1)/2 = 1 x its fp32 main-grad buffer
    assert len(rows) == 1 and rows[0].bytes == 32000 * 1024 / 2 * 4
    assert not [c for c in place(m, ParallelConfig(tp=2, pp=1)).comms
                if c.what == "tied embedding grads"]


def test_logits_on_the_last_stage_at_least_fp32():
    m = llama3_8b()
    pl = place(m, ParallelConfig(tp=2, pp=4, num_microbatches=8))
    last = pl.memory_by_rank[-1]
    assert last.logits_bytes >= 8192 * 128256 * 4 / 2
    assert last.logits_bytes == 8192 * 128256 / 2 * (4 + 2)  # Megatron: fp32 softmax, bf16 grad
    assert all(r.logits_bytes == 0 for r in pl.memory_by_rank[:-1])


def test_full_recompute_counts_the_working_layer():
    from ledger.placement import layer_working_bytes

    m = llama3_8b()
    none = place(m, ParallelConfig(dp=8, zero_stage=1, dropout=0.0))
    full = ParallelConfig(dp=8, zero_stage=1, recompute="full", dropout=0.0)
    # the layer being recomputed holds all of Megatron/TE's saved tensors again but the
    # kept input - 139,400 B per token (tests/test_activations.py works it out) less
    # 4096 x 2 - and SwiGLU's three 14336-wide input gradients, x 8192 tokens
    assert layer_working_bytes(m, full) == (139_400 - 8192 + 3 * 14336 * 2) * 8192
    assert none.activation_bytes_per_layer == 139_400 * 8192
    assert place(m, full).memory.activations_bytes == pytest.approx(
        32 * 8192 * 4096 * 2  # the layers' inputs, and the head: the final RMSNorm's
        + 8192 * (4096 * 2 + 4 + 4096 * 2))  # input and fp32 rstd, the output GEMM's input


def test_seed_convention_is_state_and_activations_only():
    m = llama3_405b()
    pl = place(m, ParallelConfig(tp=8, pp=16, dp=128, zero_stage=1, num_microbatches=16,
                                 framework="ideal"))
    mem = pl.memory
    assert mem.logits_bytes == mem.buffers_bytes == mem.overhead_bytes == 0
    # the seed's peak: PP rank 1 (8 layers, 15 micro-batches in flight, 34 sbh / 8 = 544 MiB
    # each) plus its 2 + 2 + 12/128 B per parameter of state: 75.90 GiB (the seed prints it)
    assert mem.rank == 1 and mem.activations_bytes == 8 * 15 * 544 * 2**20
    assert round(mem.total_bytes / 2**30, 2) == 75.90


def megatron_weight_and_optimizer_bytes(h, heads, groups, kv_channels, ffn, layers, vocab,
                                        tp, pp, dp, untied=True, swiglu=True):
    """Megatron-LM megatron/training/theoretical_memory_usage.py (d98e8a64, L12-303) for a
    dense RMSNorm model, re-derived here term by term: the most-loaded (first) shard's
    params x (6 + 12/dp) bytes with the distributed optimizer."""
    attn = 2 * h * h * (1 + groups / heads) * (kv_channels * heads / h)
    mlp = 2 * h * ffn * (3 / 2 if swiglu else 1)
    norms = 2 * h
    embedding = h * vocab
    tp_sharded = ((attn + mlp) * layers / pp + embedding) / tp
    replicated = (norms * layers + h) / pp  # the final norm, smeared over pp
    if untied and pp == 1:
        tp_sharded += embedding / tp
    return (tp_sharded + replicated) * (6 + 12 / dp)


@pytest.mark.parametrize("tp,pp,dp", [(1, 1, 8), (8, 1, 16), (8, 4, 8), (4, 16, 32)])
def test_weights_and_optimizer_agree_with_megatrons_estimator(tp, pp, dp):
    m = llama3_70b()
    pl = place(m, ParallelConfig(tp=tp, pp=pp, dp=dp, zero_stage=1, num_microbatches=pp))
    first = pl.memory_by_rank[0].state_bytes
    theirs = megatron_weight_and_optimizer_bytes(8192, 64, 8, 128, 28672, 80, 128256,
                                                 tp, pp, dp)
    # Megatron puts 1/pp of the final norm on every stage; the ledger puts it on the last
    smear = 0 if pp == 1 else 8192 / pp * (6 + 12 / dp)
    assert first == pytest.approx(theirs - smear, abs=3)  # whole bytes, three floors


def test_korthikanti_table2_rows_under_ideal():
    """Korthikanti et al. 2022 Table 2 for a GPT-3 175B layer (s 2048, h 12288, a 96,
    t 8), bytes: TP sbh(10 + 24/t + 5as/(ht)); TP+SP sbh(34 + 5as/h)/t; selective
    sbh(10 + 24/t); SP + selective 34 sbh/t; full recompute 2 sbh."""
    s, h, a, t = 2048, 12288, 96, 8
    m = ModelSpec(name="gpt3", layers=96, hidden=h, heads=a, vocab=51200, seq_len=s,
                  ffn_hidden=4 * h, gated_mlp=False, norm="layernorm")
    sbh = s * h

    def act(**kw):
        return place(m, ParallelConfig(tp=t, framework="ideal", flash_attention=False, **kw)
                     ).activation_bytes_per_layer
    assert act(sequence_parallel=False) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert act() == pytest.approx(sbh * (34 + 5 * a * s / h) / t)
    assert act(sequence_parallel=False, recompute="selective") == pytest.approx(
        sbh * (10 + 24 / t))
    assert act(recompute="selective") == pytest.approx(34 * sbh / t)
    assert act(sequence_parallel=False, recompute="full") == pytest.approx(2 * sbh)


def test_framework_refusals_name_the_field():
    with pytest.raises(ValueError, match="framework: unknown framework 'nemo'"):
        ParallelConfig(framework="nemo")
    with pytest.raises(ValueError, match="zero_stage: torchtitan offers zero stages 0, 3"):
        ParallelConfig(dp=8, zero_stage=1, framework="torchtitan")
    with pytest.raises(ValueError, match="grad_accumulation"):
        ParallelConfig(grad_accumulation="lazy")
    assert get("torchtitan").reshard_after_forward(4) is False


def test_ideal_prices_an_moe_layer_as_the_seeds_gpt_layer():
    """The seed's accounting has one activation figure for every layer: 34 sbh / t with SP
    (Mixtral at tp 2: 34 x 4096 x 4096 / 2 B = 272 MiB), experts or not."""
    pl = place(mixtral_8x7b(), ParallelConfig(tp=2, dp=4, ep=4, framework="ideal"))
    assert pl.activation_bytes_per_layer == 34 * 4096 * 4096 / 2


def test_pipeline_schedules_and_splits_each_framework_runs():
    """Megatron-Core: 1F1B and interleaved (schedules.py L161-168), an even split where the
    embedding and the loss may take one slot each (account_for_*_in_pipeline_split); torch
    pipelining: GPipe, 1F1B, interleaved, interleaved zero bubble, ZB-V, any split;
    DeepSpeed: 1F1B."""
    mg = get("megatron")
    assert mg.pipeline_problem(126, 16, 8, "interleaved") is None  # 126 + 2 = 128 = 16 x 8
    assert mg.pipeline_problem(126, 16, 4, "interleaved") is None
    assert mg.pipeline_problem(127, 16, 8, "interleaved") is None  # one slot for the embedding
    assert mg.pipeline_problem(126, 16, 7, "interleaved")[0] == "vp"  # 112 stages: 98 empty
    assert mg.pipeline_problem(32, 4, 3, "interleaved")[0] == "vp"
    assert mg.pipeline_problem(125, 16, 8, "interleaved")[0] == "layers"  # 3 slots short
    assert mg.pipeline_problem(32, 4, 2, "zb-v")[0] == "schedule"
    assert mg.pipeline_problem(32, 4, 1, "gpipe")[0] == "schedule"
    assert mg.pipeline_problem(32, 1, 1, "zb-v") is None  # no pipeline, no schedule
    assert mg.pipeline_problem(32, 5, 1, "1f1b") is None  # 6, 6, 7, 7, 6: a layout builds it
    assert mg.pipeline_problem(126, 16, 1, "1f1b") is None  # 7, 8 x 14, 7
    tt = get("torchtitan")
    assert tt.pipeline_problem(126, 16, 7, "interleaved") is None
    assert tt.pipeline_problem(32, 5, 1, "1f1b") is None
    assert tt.pipeline_problem(32, 4, 2, "zb-v") is None
    assert tt.pipeline_problem(32, 17, 2, "zb-v") is None  # 34 stages: embedding, output
    assert tt.pipeline_problem(32, 4, 1, "zb-h1")[0] == "schedule"
    assert tt.pipeline_problem(32, 7, 5, "interleaved")[0] == "layers"  # 35 stages > 32 + 2
    assert get("deepspeed").pipeline_problem(32, 4, 1, "1f1b") is None
    assert get("deepspeed").pipeline_problem(32, 4, 2, "interleaved")[0] == "schedule"
    assert get("ideal").pipeline_problem(32, 4, 1, "zb-h1") is None
