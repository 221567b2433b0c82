"""The memory model held to measured peaks (ledger.validation.memory), and its parts by
hand: what torchtitan's op policy keeps, the logits alive on the loss rank as the
schedule holds them (walked over the simulator's action lists), dropout masks, CP
buffers, and what ``report`` prints against a GPU's capacity."""
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ledger.arch import TORCH, layer_activations
from ledger.cli import main
from ledger.frameworks.conventions import FRAGMENTATION
from ledger.frameworks.cp import CP_BUFFERS
from ledger.model import llama3_8b, llama3_405b
from ledger.parallel import ParallelConfig, place
from ledger.pipeline import KINDS, build, held_closed, walk
from ledger.render import fit_table, memory_table
from ledger.validation.memory import (BASES, _placed, error, fit_fragmentation, megatron_gpt,
                                     peaks)

ROOT = Path(__file__).resolve().parents[1]
ROWS = peaks()


def errors(rows):
    """|error| of the measured rows, the 'chosen' readings apart (held to no bar)."""
    return [abs(error(r)) for r in rows if r.metric != "outcome" and r.role != "chosen"]


def test_calibration_rows_fit():
    errs = errors([r for r in ROWS if r.role == "calibration"])
    assert len(errs) == 10 and sum(errs) / len(errs) <= 0.02 and max(errs) <= 0.04, errs


def test_megatron_goldens_within_6_percent():
    """Max allocated on the last rank and allocated after the step: the GPT 7B cases on
    three platforms (within 6%), the MoE (MLA, unfused attention, Megatron's compiled
    fused loss) case on two (its max allocated 1.8% and 5.5% over: the two platforms
    measured the same launch 2.0 GiB apart; what stays after the step 5% under)."""
    rows = [r for r in ROWS if r.source.startswith("NVIDIA/Megatron-LM")]
    errs = errors(rows)
    assert len(errs) == 16 and max(errs) <= 0.06, errs
    assert max(errors([r for r in rows if r.metric == "allocated"])) <= 0.06


def test_gpt_memory_speed_rows_run_without_gradient_accumulation_fusion():
    """Both GPT 7B model_config.yaml files set --no-gradient-accumulation-fusion
    (@d98e8a64): TE hands autograd each wgrad, so the rows keep no dummy wgrads - only
    TE's cuBLAS workspace stays after the step beside the state (32 MiB + 1 KiB from
    sm_90, 4 MiB on A100: TE d0067d0d cpp_extensions/gemm.py L40-45), and on the output
    layer's rank PyTorch's two for its torch GEMMs at the files' CUBLAS_WORKSPACE_CONFIG
    :4096:8 (ledger.placement.buffers)."""
    rows = [r for r in ROWS if r.label.startswith("gpt3_7b_")]
    assert len(rows) == 12 and not any(r.cfg.grad_accumulation_fusion for r in rows)
    for r in rows:
        last = _placed(r).memory_by_rank[-1]
        size = 4 * 2**20 if r.gpu == "dgx_a100" else 32 * 2**20 + 1024
        assert dict(last.named) == {"cuBLAS workspace": size,
                                    "PyTorch cuBLAS workspaces": 2 * 4096 * 1024 * 8}, r.label


def test_every_fit_verdict_right_both_ways():
    outcomes = [r for r in ROWS if r.metric == "outcome"]
    assert {r.measured for r in outcomes} == {0.0, 1.0}  # runs that ran and OOMs
    assert [r.label for r in outcomes if error(r)] == []


def test_measured_rows_mean_error_within_5_percent():
    """What holds now, a guard against regressions (issue 31's 4% bar is the strict xfail
    below): 4.98% on 38 rows since the Megatron Core MoE report's Table 5 rows joined (its
    GB read as 2^30 B); 4.4% on the 36 rows before them. Megatron's compiled fused loss
    moves the MoE memory_speed case over (the DGXC row -0.3% -> +5.5%: every head's loss
    backward, main and MTP, is priced at once, where Megatron runs the MTP loss's after the
    main one's - multi_token_prediction.py L886-930 @d98e8a64)."""
    errs = errors(ROWS)
    assert len(errs) == 38 and sum(errs) / len(errs) <= 0.05, sum(errs) / len(errs)



def test_t5_1_and_t6_1_price_alike_and_rank_1_peaks():
    """docs/memory.md ('What it does not explain'): torchtitan's T5-1 (4 x 8,192 tokens a
    micro-batch) and T6-1 (1 x 32,768) ask for the same bytes, and the ledger prices them
    alike on every rank - yet they measured 82.5 and 75.3 GiB. T5-1 peaks on rank 1 at a
    backward, holding its 16 layers' unsharded gradients in fp32 (FSDP2's reduce dtype)
    and their fp32 shards and Adam moments over FSDP 8, by hand from Llama 3 405B's
    shapes at TP 8 (norms whole)."""
    by = {r.label.split()[0]: r for r in ROWS}
    t5, t6 = (_placed(by[k]).memory_by_rank for k in ("T5-1", "T6-1"))
    for a, b in zip(t5, t6):
        for term in ("state_bytes", "activations_bytes", "logits_bytes", "buffers_bytes",
                     "reserved_bytes"):
            assert getattr(a, term) == pytest.approx(getattr(b, term)), (a.rank, term)
    top = max(t5, key=lambda m: m.reserved_bytes)
    assert (top.rank, top.moment) == (1, "backward")
    h, f, kv = 16384, 53248, 8 * 128
    layer = (2 * h * h + 2 * h * kv + 3 * h * f) / 8 + 2 * h  # one layer on a TP rank
    grads, shards = 16 * layer * 4, 16 * layer / 8 * (4 + 8)  # fp32 grads; params + Adam
    assert top.state_bytes == pytest.approx(grads + shards, abs=8)
    assert grads / 2**30 == pytest.approx(23.752, abs=1e-3)

@pytest.mark.xfail(strict=True, reason="issue 31's bar (mean |error| <= 4%, max <= 10%, signed "
                   "mean within +-2%) does not hold: mean 4.5%, max 26.3%, signed -4.2% (under "
                   "on 32 of 38 rows; the one 'chosen' row apart). torchtitan's Dec-2024 405B pipeline rows sit under "
                   "(T5-1 -20%, T6-4 -17%, T6-1 -12%, T5-2 -6% counted stage by stage) and "
                   "70B sync TP T4-1 -12%: torch 2.6's "
                   "1F1B and Interleaved1F1B keep the same per micro-batch, and T5-1 / T6-1 "
                   "price alike yet measured 7.2 GiB apart (docs/memory.md, 'What it does not "
                   "explain'); the Megatron functional-test rows are within 2.2%; the Megatron Core MoE report's Table 5 "
                   "rows (GB read as 2^30 B, MXFP8 with Megatron-Bridge's FP8 param gather) are "
                   "-13.9% (DeepSeek-V3) and -26.3% (the Qwen3-235B TP2 EP16 baseline, its "
                   "PP / VPP / MBS unstated)")
def test_measured_rows_meet_the_issue_31_bar():
    errs = [error(r) for r in ROWS if r.metric != "outcome" and r.role != "chosen"]
    absolute = [abs(e) for e in errs]
    assert sum(absolute) / len(absolute) <= 0.04
    assert max(absolute) <= 0.10
    assert abs(sum(errs) / len(errs)) <= 0.02


def test_shipped_fragmentation_is_the_fits_argmin():
    """The shipped pair is the first line of the basis that fits the calibration rows
    better: a share of every allocated byte (1.52% mean |error|) over a share of the
    churned bytes alone (1.67%) and over every allocated byte with FSDP2's all-gather
    stream pool cached (1.77%, the compiled share at 0)."""
    fits = {basis: fit_fragmentation(basis=basis) for basis in BASES}
    best = min(BASES, key=lambda b: fits[b][0][0])
    assert best == "allocated"
    _, _, eager, compiled = fits[best][0]
    assert (eager, compiled) == FRAGMENTATION


def test_copy_in_pool_by_hand():
    """FSDP2's all-gather copy-in stream pool on Llama 3 8B (bf16 all-gathers): the root
    unit (embedding, output and final norm) and one layer (its projections, 2 h^2 + 2 h kv
    + 3 h f, and two norms) gathered at once; nothing without a shard group or outside
    FSDP2."""
    from ledger.validation.memory import copy_in_pool_bytes

    t1 = next(r for r in ROWS if r.label.startswith("T1-1"))
    h, kv, f, v = 4096, 1024, 14336, 128256
    root, layer = 2 * v * h + h, 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    assert copy_in_pool_bytes(t1, 0) == 2 * (root + layer)
    assert copy_in_pool_bytes(replace(t1, cfg=replace(t1.cfg, dp=1)), 0) == 0
    gpt = next(r for r in ROWS if r.label.startswith("gpt3_7b_tp4"))
    assert copy_in_pool_bytes(gpt, 0) == 0


def test_persistent_bytes_by_hand():
    """Allocated once for the run: torchtitan's (FSDP2) fp32 parameter shard and two fp32
    moments, 12 B a parameter over 8 ranks, its gradients freed every step by zero_grad;
    Megatron's whole state (its gradient buffer persists) and the buffers it keeps."""
    t1 = next(r for r in ROWS if r.label.startswith("T1-1"))
    m = _placed(t1).memory_by_rank[0]
    assert m.moment == "loss backward"
    assert m.persistent_bytes == llama3_8b().params * 12 / 8 == 12_045_391_872
    gpt = next(r for r in ROWS if r.label.startswith("gpt3_7b_tp4"))
    for m in _placed(gpt).memory_by_rank:
        assert m.persistent_bytes == m.state_bytes + m.kept_bytes
        assert m.churned_bytes == (m.activations_bytes + m.logits_bytes + m.buffers_bytes
                                   - m.kept_bytes)


def test_docs_show_the_benchmarks_output():
    """docs/memory.md holds benchmarks/memory.py's and benchmarks/fit_memory.py's output."""
    page = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```text\n(.*?)```", page, re.S)
    assert memory_table() + "\n" in blocks
    assert fit_table({b: fit_fragmentation(basis=b) for b in BASES}) + "\n" in blocks


def test_op_policy_keeps_by_hand():
    """Llama 3 8B under torchtitan's op policy, per token: the block input (8 KiB), wq's
    and wv's outputs (4096 + 1024 wide), the SDPA output and fp32 lse (4096 + 32 x 4 B),
    w1's (14336) and w2's (4096): the odd-numbered of wq wk wv wo w1 w3 w2."""
    r = layer_activations(llama3_8b(), micro_batch=1, recompute="selective", table=TORCH)
    per_token = 4096 * 2 + (4096 + 1024 + 4096 + 14336 + 4096) * 2 + 32 * 4
    assert per_token == 63_616 and r.total_bytes == per_token * 8192


def test_op_policy_recompute_by_hand():
    """What the op policy runs again, per token of Llama 3 8B: the even-numbered GEMMs wk
    (4096 x 1024), wo (4096 x 4096), w3 (4096 x 14336), 2 FLOPs a multiply-add, 32 layers;
    full recompute of every 2nd layer is half a forward of the stack."""
    from ledger.arch import op_share
    from ledger.step import recompute_flops_per_token

    m = llama3_8b()
    cfg = ParallelConfig(dp=8, zero_stage=3, framework="torchtitan", recompute="selective")
    assert op_share(m, cfg) == (1024 + 4096 + 14336) / (4096 + 1024 + 1024 + 4096 + 3 * 14336)
    got = recompute_flops_per_token(m, "selective", share=op_share(m, cfg))
    assert got == pytest.approx(2 * 32 * 4096 * (1024 + 4096 + 14336))
    assert op_share(m, ParallelConfig(dp=8, recompute="selective")) is None  # Megatron's core
    full = recompute_flops_per_token(m, "full")
    assert recompute_flops_per_token(m, "full", every=2) == pytest.approx(full / 2)


def test_every_nth_layer_in_full():
    """torchtitan's selective layer AC: half the layers keep their input, half all."""
    kw = dict(dp=8, zero_stage=3, framework="torchtitan")
    full = place(llama3_8b(), ParallelConfig(recompute="full", **kw))
    none = place(llama3_8b(), ParallelConfig(**kw))
    half = place(llama3_8b(), ParallelConfig(recompute="full", recompute_every=2, **kw))
    assert half.activation_bytes_per_layer == pytest.approx(
        (full.activation_bytes_per_layer + none.activation_bytes_per_layer) / 2)


def test_dropout_keeps_two_masks_a_layer():
    """Megatron's bias-dropout-add after attention and after the MLP, a 1-byte mask of
    the h-wide residual each: 2 x 4096 B per token (no SP: the whole s b h)."""
    m = megatron_gpt(131200)
    on, off = (place(m, ParallelConfig(dp=2, zero_stage=1, sequence_parallel=False,
                                       dropout=p)).activation_bytes_per_layer for p in (0.1, 0))
    assert on - off == 2 * 4096 * 8192
    with pytest.raises(Exception, match="dropout"):
        ParallelConfig(dropout=1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_what_the_loss_rank_holds_walked_on_the_schedule(kind):
    """The simulator's action lists walked point by point (ledger.pipeline.held.walk)
    against the closed form every placement uses: the same largest point for any bytes
    per activation, loss, kept logits and kept boundary (ZB-V and DualPipe(V) keeping
    outputs: an upper bound); and the other losses alive at the rank's own loss forward
    or backward (``at_loss``: DualPipe(V)'s pairs run a loss's backward before the next
    loss forward, so none, though one is alive beside the layers' backwards)."""
    rng = np.random.default_rng(0)
    vs = {"gpipe": (1,), "1f1b": (1,), "zb-h1": (1,), "zb-v": (2,), "dualpipe": (2,),
          "dualpipev": (2,)}.get(kind, (2, 3))
    for pp, m, v in [(p, m, v) for p in (2, 4) for m in (4, 8) for v in vs]:
        if kind in ("dualpipe", "dualpipev") and m < 2 * pp:
            continue  # DualPipe runs m >= 2 pp (deepseek-ai/DualPipe dualpipe.py L332-333)
        s = build(kind, pp, m, v)
        lasts = {c * s.chain + s.chain - 1 for c in range(s.chains)}  # DualPipe: two
        for keep in ("none", "last", "all"):
            for r, acts in enumerate(s.ranks):
                points = walk(acts, lasts, s.v, keep)
                *closed, at_loss = [float(x) for x in held_closed(kind, r, pp, m, s.v, keep)]
                at = [p.losses for p in points if p.event.startswith("loss")]
                assert at_loss == max(at, default=0), (kind, pp, m, r)  # at its own loss
                for w in rng.uniform(0.1, 3, (4, 4)):
                    walked = max(p.chunks * w[0] + p.losses * w[1] + p.logits * w[2]
                                 + p.boundary * w[3] for p in points)
                    priced = float(np.dot(closed, w))
                    if kind in ("zb-v", "dualpipe", "dualpipev") and keep != "none":
                        assert walked <= priced + 1e-9  # kept outputs peak at the end
                    else:
                        assert walked == pytest.approx(priced), (pp, m, v, keep, r)


def test_interleaved_last_rank_backs_up_its_first_chunk_in_the_cooldown():
    """torch 2.6's Interleaved1F1B (schedules.py L1944-2000), 8 ranks, 8 micro-batches, 2
    stages a rank: warm-up (2 - 1) x 8 + 2 (7 - rank) forwards, capped at 16 - rank 7
    runs its 8 stage-7 forwards first and their backwards only after every stage-15
    backward; ranks 0 to 3 (22, 20, 18, 16 warm-up ops) run all 16 forwards before their
    first backward. The ledger's action lists keep this order (docs/memory.md)."""
    s = build("interleaved", 8, 8, 2)
    last = [(a.kind, a.stage) for a in s.ranks[7]]
    assert last[:8] == [("F", 7)] * 8
    first_b7 = last.index(("B", 7))
    assert first_b7 == 24 and all(k == "B" and st == 7 for k, st in last[first_b7:])
    for r in range(4):
        kinds = [a.kind for a in s.ranks[r]]
        assert kinds.index("B") == 16, r


def test_logits_alive_on_the_loss_rank():
    """Megatron's interleaved schedule runs a micro-batch's last-stage backward right
    after its forward: one loss alive on the last rank, however deep the interleaving;
    GPipe holds every micro-batch's; torch pipelining of Dec 2024 kept every output to the
    step's end (pytorch/pytorch#138504)."""
    assert [float(x) for x in held_closed("interleaved", 3, 4, 8, 4)][1:] == [0, 0, 0, 0]
    assert float(held_closed("gpipe", 3, 4, 8, 1)[1]) == 7  # 7 others at the first backward
    assert float(held_closed("gpipe", 3, 4, 8, 1)[4]) == 7
    assert [float(x) for x in held_closed("1f1b", 7, 8, 8, 1, "all")][2:4] == [8, 0]
    assert [float(x) for x in held_closed("1f1b", 0, 8, 8, 1, "all")][2:4] == [0, 8]
    pl = place(llama3_405b(), ParallelConfig(tp=8, pp=16, dp=128, zero_stage=1, vp=8,
                                             num_microbatches=16, dropout=0.0))
    last = pl.memory_by_rank[-1]  # 1 micro-batch's fp32 softmax: 8192 x 128256 / 8 x 4 B
    assert last.moment == "loss backward"
    assert last.logits_bytes == 8192 * 128256 / 8 * (4 + 2)  # and its bf16 copy


def test_cp_buffers_by_hand():
    """torch's all-gather rotation, backward: fp32 dQ (4 B per Q element) and the bf16 dQ
    of a step (2); per K/V element (3 + cp) x 2 B of copies and gathers and 12 B of fp32
    accumulators and rotations."""
    b = CP_BUFFERS["torch-allgather"]
    assert b.backward_bytes(kv_elems=100, q_elems=10, e=2, cp=4) == (3 + 4) * 2 * 100 + 12 * 100 \
        + (2 + 4) * 10


def test_report_prints_allocated_reserved_and_the_device(capsys):
    argv = ["report", "llama3-8b", "--gpus", "8", "--zero", "3", "--micro-batch", "2",
            "--framework", "torchtitan@2024-12", "--recompute", "selective",
            "--no-nccl-nvls"]  # the figures below without NCCL's NVLS buffers
    assert main(argv + ["--gpu", "h100-96gb", "--json"]) == 0
    mem = json.loads(capsys.readouterr().out)["memory"]
    assert mem["reserved"] == mem["allocated"] + mem["fragmentation"]
    assert mem["total"] == mem["reserved"] + mem["context"] and mem["fits"]
    assert mem["capacity"] == 95.04 * 2**30 and mem["moment"] == "loss backward"
    # 83.46 GiB reserved + context; before failing an allocation the caching allocator
    # releases what it caches but its split blocks: 68.63 GiB allocated + 1.1% of it
    # (0.75 GiB = 773.03 MiB) + 1 GiB of context = 70.38 GiB
    assert main(argv + ["--gpu-memory", "80"]) == 0
    out = capsys.readouterr().out
    assert ("= 83.46 GiB; needs 70.38 GiB with the allocator's cached blocks handed back "
            "(its split blocks, 773.03 MiB, kept)") in out
    assert out.count("does NOT fit") == 0
    assert main(argv + ["--gpu-memory", "70"]) == 0
    assert "does NOT fit" in capsys.readouterr().out  # the same run on 70 GiB
    assert main(argv + ["--gpu-memory", "0"]) == 2
    assert "gpu_memory" in capsys.readouterr().err


def test_te_dummy_wgrads_by_hand():
    """Llama 3 8B under Megatron at TP 2: one dummy wgrad per distinct TE weight shape,
    bf16 (TE base.py L134-147): qkv 3072 x 4096, proj 4096 x 2048, fc1 14336 x 4096, fc2
    4096 x 7168, and Megatron's output layer's 64,128 x 4096 (its ColumnParallelLinear
    takes TE's cached dummy too, tensor_parallel/layers.py L733-762 @d98e8a64); the cuBLAS
    workspace 32 MiB + 1 KiB; present at every point and after the step; none under
    torchtitan's modules."""
    from ledger.placement.buffers import framework_buffers

    cfg = ParallelConfig(tp=2, dp=4, zero_stage=1)
    m = place(llama3_8b(), cfg).memory_by_rank[0]
    named = dict(m.named)
    assert named["TE dummy wgrads"] == 2 * 4096 * (3072 + 2048 + 14336 + 7168 + 128256 / 2)
    assert named["cuBLAS workspace"] == 32 * 2**20 + 1024
    assert m.kept_bytes == sum(named.values()) and m.buffers_bytes >= m.kept_bytes
    tt = ParallelConfig(dp=8, zero_stage=3, framework="torchtitan")
    assert framework_buffers(llama3_8b(), tt, []) == {}
