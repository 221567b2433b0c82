"""Expert parallelism as Megatron-Core runs it: the expert grid (ETP x EP x EDP), the
dispatchers' bytes, node-limited routing and routing imbalance. Expected values are hand
arithmetic from Megatron's dispatcher code (token_dispatcher.py at d98e8a64) and the
DeepSeek-V3 report (arXiv:2412.19437), written out in the comments."""
from dataclasses import replace

import pytest

from ledger.cli import main
from ledger.errors import LedgerError
from ledger.model import deepseek_v3, mixtral_8x7b
from ledger.parallel import MoESpec, ParallelConfig, place
from ledger.placement import Layout

GiB = 2**30
MiB = 2**20


def ep_rows(pl):
    return {(c.kind, c.link, c.what): c.bytes for c in pl.comms if c.axis == "ep"}


# ---- the expert grid ------------------------------------------------------------------
def test_expert_grid_folds_ep_into_tp_at_etp_1():
    """tp 2, dp 4 (8 ranks, one PP stage). Megatron's expert grid keeps the order
    tp-cp-ep-dp-pp with tp -> etp, cp -> 1, dp -> edp = 8 / (etp ep)."""
    folded = Layout(tp=2, dp=4, ep=4, etp=1)  # edp = 8 / 4 = 2
    assert folded.groups("etp") == [[r] for r in range(8)]
    assert folded.groups("ep") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert folded.groups("edp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    default = Layout(tp=2, dp=4, ep=4)  # etp = tp = 2: edp = 8 / 8 = 1
    assert default.groups("etp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert default.groups("ep") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert default.groups("edp") == [[r] for r in range(8)]
    assert default.groups("etp_ep") == [list(range(8))]


def test_expert_grid_keeps_the_pp_groups():
    """Both grids share their PP groups (parallel_state.py L904-907): pp stride tp cp dp."""
    lay = Layout(tp=2, dp=4, pp=2, ep=8, etp=1)
    assert lay.groups("pp")[:2] == [[0, 8], [1, 9]]
    assert lay.groups("ep") == [list(range(8)), list(range(8, 16))]


def test_deepseek_v3_ep64_spans_8_nodes():
    """PP 16 x DP 128 at tp 1: an EP group is 64 consecutive ranks, 8 per node; EDP is
    2048 / (16 x 64) = 2 ranks, 64 apart (other nodes)."""
    lay = Layout(pp=16, dp=128, ep=64)
    assert lay.groups("ep")[0] == list(range(64))
    assert lay.per_node("ep") == 8
    assert lay.groups("edp")[0] == [0, 64]
    assert (lay.link("ep"), lay.link("edp")) == ("ib", "ib")


# ---- Mixtral: ETP 1 vs ETP = TP, alltoall vs allgather ----------------------------------
MIXTRAL = dict(tp=2, dp=4, ep=4, zero_stage=1, num_microbatches=1)
# Mixtral 8x7B: 32 layers x 8 experts x 3 x 4096 x 14336 routed params; the rest dense
EXPERTS = 32 * 8 * 3 * 4096 * 14336  # 45,097,156,608
DENSE = 46_702_792_704 - EXPERTS  # transformers' count of Mixtral-8x7B


def test_mixtral_counts():
    m = mixtral_8x7b()
    assert (m.params, m.expert_params) == (46_702_792_704, EXPERTS)


@pytest.mark.parametrize("etp,edp", [(1, 2), (2, 1)])
def test_mixtral_expert_state_splits_over_etp_ep_and_shards_over_edp(etp, edp):
    """Megatron bf16 params, fp32 main grads, ZeRO-1 optimizer (12 B) over its DP group:
    dense over tp 2 and dp 4; experts over etp x ep and their optimizer over EDP =
    tp dp / (etp ep): etp 1 -> 2, etp 2 -> 1 (theoretical_memory_usage.py L205-212)."""
    pl = place(mixtral_8x7b(), ParallelConfig(**MIXTRAL, etp=etp))
    expert_gpu = EXPERTS / (etp * 4)
    assert pl.per_gpu.params_bytes == int(2 * DENSE / 2 + 2 * expert_gpu)
    assert pl.per_gpu.grads_bytes == int(4 * DENSE / 2 + 4 * expert_gpu)
    assert pl.per_gpu.optim_bytes == int(12 * DENSE / 2 / 4 + 12 * expert_gpu / edp)
    # the expert grads reduce over EDP: 2 ranks at etp 1 (ZeRO-1: a reduce-scatter of the
    # fp32 grads, half of them leave), nothing at etp 2
    expert_rs = [c for c in pl.comms if c.what == "expert grads"]
    if edp == 1:
        assert expert_rs == []
    else:
        assert expert_rs[0].kind == "reduce_scatter"
        assert expert_rs[0].bytes == pytest.approx(4 * expert_gpu / 2)


def test_mixtral_alltoall_etp_1_vs_etp_tp():
    """One node (8 GPUs). Alltoall: each rank routes its SP shard, 4096 / 2 = 2048 tokens x
    top-2 = 4096 rows of 4096 x 2 B = 32 MiB; 4 all-to-alls per layer (dispatch, combine,
    and their backward), 3/4 leaves the rank: 4 x 24 MiB x 32 layers = 3 GiB.
    At etp 2 the received 32 MiB are all-gathered over ETP (half of the 64 MiB gathered
    comes from the peer: 32 MiB) in the dispatch and the combine's backward, and the
    outputs reduce-scattered twice: 2 x 32 MiB x 32 layers = 2 GiB each."""
    m = mixtral_8x7b()
    one = ep_rows(place(m, ParallelConfig(**MIXTRAL, etp=1)))
    assert one == {("all_to_all", "nvlink", "routed tokens, same node"): 3 * GiB}
    two = ep_rows(place(m, ParallelConfig(**MIXTRAL)))
    assert two == {("all_to_all", "nvlink", "routed tokens, same node"): 3 * GiB,
                   ("all_gather", "nvlink", "routed tokens, ETP gather"): 2 * GiB,
                   ("reduce_scatter", "nvlink", "expert outputs, ETP reduce"): 2 * GiB}


def test_mixtral_allgather_dispatcher():
    """Allgather over ETP x EP of the SP shard [2048, 4096] (L281-303): etp 2 -> 8 ranks,
    16384 rows, 7/8 of 128 MiB = 112 MiB per pass; forward + the combine's backward, and
    the reduce-scatter twice: 2 x 112 MiB x 32 = 7 GiB each. The routing map (1 B) and
    probs (2 B) for 16384 tokens x 8 experts gather forward: 7/8 x 16384 x 8 x 3 B; the
    probs' gradient reduce-scatters backward: 7/8 x 16384 x 8 x 2 B. At etp 1 the group
    is EP alone: 4 ranks, 8192 rows, 3/4 of 64 MiB = 48 MiB per pass -> 3 GiB."""
    m = mixtral_8x7b()
    rows = ep_rows(place(m, ParallelConfig(**MIXTRAL, moe_dispatcher="allgather")))
    assert rows == pytest.approx({
        ("all_gather", "nvlink", "tokens of the ETP x EP group"): 7 * GiB,
        ("reduce_scatter", "nvlink", "expert outputs, combined"): 7 * GiB,
        ("all_gather", "nvlink", "routing map + probs"): 7 / 8 * 16384 * 8 * 3 * 32,
        ("reduce_scatter", "nvlink", "routing probs grads"): 7 / 8 * 16384 * 8 * 2 * 32})
    one = ep_rows(place(m, ParallelConfig(**MIXTRAL, etp=1, moe_dispatcher="allgather")))
    assert one[("all_gather", "nvlink", "tokens of the ETP x EP group")] == 3 * GiB


# ---- DeepSeek-V3 as its report runs it ------------------------------------------------
# PP 16, EP 64, ZeRO-1, 2048 GPUs -> DP 128; seq 4096; m = 15360 sequences / dp 128 = 120
DSV3 = dict(pp=16, dp=128, ep=64, zero_stage=1, num_microbatches=120)
ROW = 7168 * 2  # one token, bf16


# ---- routing imbalance -----------------------------------------------------------------
def test_imbalance_scales_the_busiest_ranks_expert_side():
    """rho = 1.5: the token side (dispatch forward, combine backward) sends T k rows
    whatever the routing; the expert side (combine forward, dispatch backward) sends what
    the busiest rank received: 3 GiB x (1 + 1.5) / 2 = 3.75 GiB. The ETP gathers carry
    received rows only: 2 GiB x 1.5. The allgather dispatcher gathers every token: no
    change."""
    m = mixtral_8x7b()
    rows = ep_rows(place(m, ParallelConfig(**MIXTRAL, moe=MoESpec(imbalance=1.5))))
    assert rows == {("all_to_all", "nvlink", "routed tokens, same node"): 3.75 * GiB,
                    ("all_gather", "nvlink", "routed tokens, ETP gather"): 3 * GiB,
                    ("reduce_scatter", "nvlink", "expert outputs, ETP reduce"): 3 * GiB}
    ag = dict(MIXTRAL, moe_dispatcher="allgather")
    assert ep_rows(place(m, ParallelConfig(**ag, moe=MoESpec(imbalance=1.5)))) == \
        ep_rows(place(m, ParallelConfig(**ag)))


def test_imbalance_scales_the_busiest_ranks_expert_activations():
    """The busiest rank's experts take 1.5 x the even rows: only the routed-expert
    activations grow, by half of themselves, on every MoE layer (32, one micro-batch)."""
    from ledger.arch import MEGATRON, layer_activations

    m = mixtral_8x7b()
    even = place(m, ParallelConfig(**MIXTRAL)).memory.activations_bytes
    busy = place(m, ParallelConfig(**MIXTRAL, moe=MoESpec(imbalance=1.5))).memory
    # Megatron/TE per routed token (tests/test_activations.py): the permuted copy 2h and the
    # fp32 prob 4 B, gathered over etp 2 of the SP shard (tp 2): x 2 / 2; fc1 out + swiglu
    # out 3f x 2 B over tp 2. T k = 4096 x 2 routed rows a layer.
    experts = 4096 * 2 * ((8192 + 4) * 2 / 2 + 86016 / 2)
    assert experts == layer_activations(m, micro_batch=1, tp=2, etp=2, table=MEGATRON
                                        ).experts_bytes
    assert busy.activations_bytes - even == pytest.approx(0.5 * experts * 32)


# ---- refusals ------------------------------------------------------------------------
@pytest.mark.parametrize("kw,field", [
    (dict(tp=2, dp=4, ep=4, etp=3), "etp"),  # 3 x 4 does not divide 8
    (dict(tp=2, dp=4, ep=4, etp=0), "etp"),
    (dict(dp=4, ep=4, moe_dispatcher="ring"), "moe_dispatcher"),
    (dict(tp=2, dp=4, ep=4, moe_dispatcher="flex"), "etp"),  # flex modelled at etp 1
    (dict(tp=2, dp=4, ep=4, etp=1, framework="torchtitan"), "etp"),
])
def test_refusals_name_the_field(kw, field):
    with pytest.raises(LedgerError) as e:
        ParallelConfig(**kw)
    assert e.value.field == field and "\n" not in str(e.value)


@pytest.mark.parametrize("kw", [dict(imbalance=0.8), dict(imbalance=1.2, capacity_factor=1.25),
                                dict(imbalance=1.2, pad_to_capacity=True)])
def test_imbalance_refusals(kw):
    with pytest.raises(LedgerError) as e:
        MoESpec(**kw)
    assert e.value.field == "imbalance" and "\n" not in str(e.value)


def test_drop_and_pad_gives_every_expert_its_capacity():
    """Megatron's drop-and-pad (the 25.09 token-drop recipes: capacity factor 1.0, inputs
    padded) keeps ceil(T k / E x 1.0) rows per expert whatever the routing - for Qwen3-30B's
    4096 tokens, top-8 of 128 experts, 256 rows each, T k in all: the even share, so padding
    adds no GEMM rows at factor 1.0 and an imbalance cannot be set beside it (refused by
    name, not silently priced as a busier rank)."""
    assert MoESpec(pad_to_capacity=True).load_factor == 1.0
    with pytest.raises(LedgerError, match=r"imbalance\(1\.3\) with pad_to_capacity"):
        MoESpec(imbalance=1.3, pad_to_capacity=True)
    with pytest.raises(LedgerError, match=r"with capacity_factor\(1\.25\)"):
        MoESpec(imbalance=1.3, capacity_factor=1.25, pad_to_capacity=True)


def test_cli_refuses_an_imbalance_beside_drop_and_pad_with_exit_2(capsys):
    assert main(["report", "mixtral-8x7b", "--dp", "8", "--ep", "8", "--moe-imbalance", "1.3",
                 "--moe-pad-expert-input-to-capacity"]) == 2
    err = capsys.readouterr().err
    assert "imbalance(1.3) with pad_to_capacity" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_refuses_a_bad_etp_with_exit_2(capsys):
    assert main(["report", "mixtral-8x7b", "--tp", "2", "--dp", "4", "--ep", "4",
                 "--etp", "3"]) == 2
    err = capsys.readouterr().err
    assert "etp(3) * ep(4) does not divide" in err and "Traceback" not in err


def test_router_groups_are_checked():
    m = deepseek_v3()
    with pytest.raises(LedgerError) as e:
        replace(m, router_group_topk=9)
    assert e.value.field == "router_group_topk"


def test_ep_rows_price_a_grid_like_one_placement():
    """The planner's path: sizes as numpy arrays (categorical fields plain) give, row by
    row, the bytes place() gives each placement alone (alltoall and allgather)."""
    from types import SimpleNamespace

    import numpy as np

    from ledger.placement import ep_comms

    m = mixtral_8x7b()
    shapes = [(1, 16, 8), (2, 8, 8), (2, 8, 4), (4, 4, 2), (8, 2, 2), (2, 16, 8)]  # (tp, dp, ep)
    tp, dp, ep = (np.array(col) for col in zip(*shapes))
    for kind in ("alltoall", "allgather"):
        grid = SimpleNamespace(tp=tp, dp=dp, ep=ep, cp=np.ones_like(tp), pp=np.ones_like(tp),
                               num_microbatches=np.full_like(tp, 4), act_bytes=2,
                               sequence_parallel=True, framework="megatron", recompute="none",
                               moe=MoESpec(), moe_dispatcher=kind)
        lay = Layout(tp=tp, dp=dp, ep=ep, cp=grid.cp, pp=grid.pp)
        rows = ep_comms(m, grid, 4096, lay)
        for i, (t, d, e) in enumerate(shapes):
            cfg = ParallelConfig(tp=t, dp=d, ep=e, num_microbatches=4, moe_dispatcher=kind)
            alone = place(m, cfg).comms
            for link in ("nvlink", "ib"):
                want = sum(c.bytes for c in alone if c.axis == "ep" and c.link == link)
                got = sum(np.broadcast_to(r.bytes, tp.shape)[i]
                          * (np.broadcast_to(r.link, tp.shape)[i] == link) for r in rows)
                assert got == pytest.approx(want), (kind, shapes[i], link)


def test_one_pass_is_one_layer_one_microbatch_one_direction():
    """For the time model: DeepSeek-V3 alltoall, one direction of one MoE layer and one
    micro-batch: the dispatch and the combine all-to-all, 2 of the 4 per layer, of
    4096 x 8 rows each."""
    from ledger.placement import ep_pass_comms

    m, cfg = deepseek_v3(), ParallelConfig(**DSV3)
    lay = Layout(pp=16, dp=128, ep=64)
    one = {(c.kind, c.link): c.bytes for c in ep_pass_comms(m, cfg, 4096, lay)}
    assert one[("all_to_all", "ib")] == pytest.approx(2 * 4096 * 8 * ROW * 56 / 64)
    assert one[("all_to_all", "nvlink")] == pytest.approx(2 * 4096 * 8 * ROW * 7 / 64)


def test_layout_command_draws_the_expert_grid(capsys):
    """tp 2, dp 8, ep 8, etp 1 on 2 nodes: EP folds into TP x DP inside each node; the
    2-rank EDP groups pair the nodes."""
    assert main(["layout", "--tp", "2", "--dp", "8", "--ep", "8", "--etp", "1"]) == 0
    out = capsys.readouterr().out
    assert "ep groups (nvlink):\n    [0, 1, 2, 3, 4, 5, 6, 7]" in out
    assert "edp groups (ib):\n    [0, 8]   <- crosses nodes" in out


def test_mtp_modules_train_on_the_last_stage():
    """DeepSeek-V3's MTP module (sec. 2.2) sits with the output head on the last stage:
    its params there (and Megatron's embedding copy), one more MoE layer of activations,
    and a second set of logits."""
    from dataclasses import replace

    from ledger.model import preset
    from ledger.parallel import ParallelConfig, place
    from ledger.placement import stage_params

    m = preset("deepseek-v3").with_seq(4096)
    plain = replace(m, mtp_layers=0)
    cfg = ParallelConfig(pp=16, dp=8, ep=8, zero_stage=1, num_microbatches=16)
    with_mtp, without = stage_params(m, cfg), stage_params(plain, cfg)
    assert with_mtp[:-1] == without[:-1]
    # by hand, DeepSeek-V3's MoE layer (h 7168, MLA: q 7168x1536 + 1536 norm + 1536x(128x192);
    # kv 7168x(512+64) + 512 norm + 512x(128x(128+128)); o 128x128x7168; 2 RMSNorms;
    # router 256x7168 - its e_score_correction_bias is a buffer, not a parameter:
    # modeling_deepseek_v3.py:131; one shared SwiGLU expert of 2048 and 256 routed ones)
    # plus the MTP projection 7168 x 14336 and its three norms
    h = 7168
    mla = (h * 1536 + 1536 + 1536 * 128 * 192 + h * 576 + 512 + 512 * 128 * 256
           + 128 * 128 * h)
    dense = mla + 2 * h + 256 * h + 3 * h * 2048 + 2 * h * h + 3 * h
    routed = 256 * 3 * h * 2048
    # and Megatron-Core's copy of the embedding for the MTP module on a stage without it
    # (gpt_model.py L166-181 @d98e8a64): its 129,280 x 7168 table (tp 1)
    assert with_mtp[-1][0] - without[-1][0] == dense + 129_280 * h
    assert with_mtp[-1][1] - without[-1][1] == routed / 8  # ep 8
    assert dense + routed == m.mtp_params
    a, b = place(m, cfg).memory_by_rank[-1], place(plain, cfg).memory_by_rank[-1]
    assert a.logits_bytes == 2 * b.logits_bytes
    # one more MoE layer's saved bytes on the last rank, which holds one micro-batch (1F1B)
    from ledger.placement import layer_activation_bytes
    one = layer_activation_bytes(m, cfg, (True, None))
    assert a.activations_bytes - b.activations_bytes == pytest.approx(one)


def test_expert_gemms_read_the_etp_gathered_tokens():
    """Megatron's alltoall dispatcher all-gathers the routed tokens over ETP before the
    expert GEMMs (token_dispatcher.py L741-751): each h-wide routed copy (bf16 input, fp32
    gate weight) is kept for etp x the SP shard. Mixtral, s 4096, tp 2: T k = 8192 rows;
    per row 4096 x 2 + 4 B; etp 2 keeps the other half too: 8192 x 8196 / 2 more bytes."""
    from ledger.arch import MEGATRON, layer_activations

    m = mixtral_8x7b()
    one, two = (layer_activations(m, micro_batch=1, tp=2, etp=e, table=MEGATRON).experts_bytes
                for e in (1, 2))
    assert two - one == 8192 * (4096 * 2 + 4) / 2


def test_mla_context_parallel_passes_decompressed_k_and_v():
    """Megatron-Core runs MLA's core attention on per-head K (nope + rope = 192) and V
    (128) under context parallelism: a ring block of s/cp tokens x 128 heads x (192 + 128)
    x 2 B, 3 (cp - 1) blocks per layer."""
    from ledger.model import preset

    m = preset("deepseek-v3").with_seq(4096)
    pl = place(m, ParallelConfig(cp=2, dp=4, ep=8, zero_stage=1))
    block = 4096 / 2 * 128 * (192 + 128) * 2
    assert pl.total_bytes("cp") == pytest.approx(3 * block * 61)
