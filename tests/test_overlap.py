"""Overlap as each launch sets it, uneven pipeline stages, and where exposed communication
comes from: framework defaults from their sources, the CLI and launch-file switches, the
splits by hand, and the time model's own terms."""
import json

import pytest

from ledger.cli import main
from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.io import parse_layout, uneven_layers
from ledger.model import llama3_70b, llama3_8b
from ledger.placement import pace, place, split_layers
from ledger.placement.stages import torchtitan_layers
from ledger.step import estimate
from ledger.system import system


@pytest.mark.parametrize("framework,zero,expected", [
    ("megatron", 0, (False, False)), ("megatron", 1, (False, False)),
    ("megatron", 3, (True, True)), ("deepspeed", 1, (False, False)),
    ("deepspeed", 3, (True, True)), ("torchtitan", 3, (True, True)),
    ("torchtitan", 0, (True, False)),
])
def test_dp_overlap_defaults(framework, zero, expected):
    """Megatron: --overlap-grad-reduce / --overlap-param-gather off (arguments.py
    L3121, L3148), forced on by Megatron-FSDP's sharded stages; DeepSpeed: overlap_comm
    only at stage 3 (zero/config.py L382-386); FSDP2 always."""
    cfg = ParallelConfig(dp=8, zero_stage=zero, framework=framework)
    assert (cfg.overlap_grad_reduce, cfg.overlap_param_gather) == expected


@pytest.mark.parametrize("argv,field", [
    (["--zero", "3", "--framework", "torchtitan", "--no-overlap-grad-reduce"],
     "overlap_grad_reduce"),
    (["--zero", "1", "--overlap-param-gather"], "overlap_param_gather"),
    (["--overlap-param-gather", "--overlap-grad-reduce"], "overlap_param_gather"),
    (["--ep-overlap"], "ep_overlap"),
])
def test_switches_a_framework_refuses(capsys, argv, field):
    assert main(["estimate", "llama3-8b", "--gpus", "64", "--global-batch", "64", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field}:"), err


def test_megatron_ep_overlap_needs_interleaving(capsys):
    """transformer_config.py L3007-3011: with PP, EP overlap needs a virtual pipeline."""
    argv = ["estimate", "qwen3-30b-a3b", "--gpus", "64", "--pp", "2", "--ep", "8",
            "--global-batch", "64", "--ep-overlap"]
    assert main(argv) == 2
    assert "interleaved" in capsys.readouterr().err
    assert main(argv + ["--vp", "2"]) == 0


def test_unoverlapped_dp_is_exposed_whole_and_says_why():
    """ZeRO-1 under Megatron's defaults: every DP call is exposed as issued, the reason
    names the switch; with both switches on the step is shorter by what they hide."""
    m, sysm = llama3_8b(), system("h100-sxm")
    kw = dict(dp=64, zero_stage=1, num_microbatches=4)
    off = estimate(m, ParallelConfig(**kw), sysm)
    on = estimate(m, ParallelConfig(**kw, overlap_grad_reduce=True, overlap_param_gather=True),
                  sysm)
    dp = [r for r in off.exposed if r.axis == "dp"]
    assert {r.call for r in dp} == {"gradient reduction at the step's end",
                                    "all_gather params after the optimizer step"}
    assert all(r.exposed_s == r.issued_s and "not overlapped" in r.why for r in dp)
    assert sum(r.exposed_s for r in dp) == pytest.approx(off.breakdown["dp_comm"])
    hidden = off.breakdown["dp_comm"] - on.breakdown.get("dp_comm", 0.0)
    assert hidden > 0 and off.step_time_s - on.step_time_s == pytest.approx(hidden)


def test_megatron_reduces_in_one_bucket_without_overlap():
    """distributed_data_parallel.py L133-137: overlapped, buckets of max(40M, 1M x dp)
    parameters; not overlapped, one. Llama 3 70B at dp 64, TP 8, PP 4: a GPU's fp32
    gradients (the ring's bytes x 64/63) in buckets of 64 M parameters, 4 B each."""
    import math

    from ledger.step.dp import buckets
    m = llama3_70b()
    for ovl in (False, True):
        cfg = ParallelConfig(tp=8, pp=4, dp=64, zero_stage=1, num_microbatches=8,
                             overlap_grad_reduce=ovl, overlap_param_gather=ovl)
        row = [c for c in place(m, cfg).comms if c.axis == "dp" and c.kind == "reduce_scatter"][0]
        expected = math.ceil(row.bytes * 64 / 63 / (4 * 64e6)) if ovl else 1
        assert buckets(cfg, row, 64) == expected and (expected > 30) == ovl


def test_layouts_by_hand():
    """Megatron's layout grammar (pipeline_parallel_layer_layout.py L283-325): the
    Megatron-Bridge DeepSeek-V3 H100 layout at PP 8 is 32 stages, vp 4: one layer, thirty
    of two, and MTP + loss; the docs' 'Et*3|(tt|)*29,m|L' at PP 16 is 32 stages, vp 2."""
    assert parse_layout("Et|(tt|)*30mL", 8, 61, 1) == ((1,) + (2,) * 30 + (0,), 4)
    assert parse_layout("Et*3|(tt|)*29,m|L", 16, 61, 1) == ((3,) + (2,) * 29 + (0, 0), 2)
    with pytest.raises(LedgerError) as e:
        parse_layout("tt|Ex|L", 2, 4, 0)
    assert all(w in str(e.value) for w in ("'x'", "divide", "first stage", "2 decoder"))


def test_first_last_and_torchtitan_splits_by_hand():
    """--decoder-first/last-pipeline-num-layers (transformer_block.py L104-150): 30 layers,
    first 6, last 6 over pp 4: 9 in each middle rank; at vp 2 each rank halves its own.
    torchtitan (pipeline_parallel.py L357-466): 61 layers + 2 weighted ends over 16 stages,
    4 units each but the last's 3: 3, fourteen 4s, 2."""
    assert uneven_layers(4, 1, 30, 6, 6) == (6, 9, 9, 6)
    assert uneven_layers(4, 2, 36, 6, 6) == (3, 6, 6, 3, 3, 6, 6, 3)
    for args in ((4, 1, 31, 6, 6), (4, 2, 30, 6, 6)):  # 19 over 2 ranks; 9 over vp 2
        with pytest.raises(LedgerError):
            uneven_layers(*args)
    assert torchtitan_layers(61, 16) == [3] + [4] * 14 + [2]
    assert split_layers(61, 16, 1, None, "torchtitan") == [3] + [4] * 14 + [2]


def test_the_busiest_rank_sets_the_pace():
    """Llama 3 70B on pp 4: the even split holds 20 layers everywhere and the head on the
    last; 21, 21, 21, 17 moves three layers off the head's rank. DualPipe's rank 0 holds
    stages 0 and 15 of DeepSeek-V3's 61 layers (3 + 3 and the MTP layer), per direction
    half of them; its middle ranks 4 + 4."""
    assert pace(80, 0, 4, 1, "1f1b") == (20, 20, 1.0)
    assert pace(80, 0, 4, 1, "1f1b", counts=(21, 21, 21, 17)) == (21, 17, 1.0)
    assert pace(61, 1, 16, 2, "dualpipe") == (4.0, 3.5, 0.5)
    cfg = ParallelConfig(tp=8, pp=4, dp=8, zero_stage=1, num_microbatches=16,
                         stage_layers=(21, 21, 21, 17))
    layers = [r.state_bytes for r in place(llama3_70b(), cfg).memory_by_rank]
    assert layers[3] < layers[1] == layers[2]  # state follows the split


def test_launch_files_set_the_switches_and_the_split(tmp_path, capsys):
    text = ("torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
            "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
            "--vocab-size 50000 --tokenizer-type NullTokenizer --micro-batch-size 1 "
            "--tensor-model-parallel-size 8 "
            "--pipeline-model-parallel-size 4 --use-distributed-optimizer "
            "--overlap-grad-reduce --overlap-param-gather "
            "--pipeline-model-parallel-layout 'Et*7|t*9|t*9|t*7L' --global-batch-size 64\n")
    path = tmp_path / "launch.sh"
    path.write_text(text)
    assert main(["estimate", "--from-megatron", str(path), "--gpus", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["overlap_grad_reduce"] and out["config"]["overlap_param_gather"]
    assert out["config"]["stage_layers"] == [7, 9, 9, 7]
    path.write_text(text.replace("--global", "--num-layers-per-virtual-pipeline-stage 2 "
                                             "--global"))
    assert main(["estimate", "--from-megatron", str(path), "--gpus", "64"]) == 2
    assert "refuses them together" in capsys.readouterr().err


def test_estimate_shows_where_exposed_comm_comes_from(tmp_path, capsys):
    """Every exposed call - its axis, its collective, its seconds and why the step does not
    hide it - in the text, the HTML page and the JSON alike."""
    from html import escape

    argv = ["estimate", "llama3-70b", "--tp", "8", "--pp", "4", "--gpus", "256", "--zero", "1",
            "--global-batch", "512"]
    assert main(argv + ["--html", str(tmp_path / "p.html")]) == 0
    text = capsys.readouterr().out
    assert "exposed communication" in text and "not overlapped" in text
    page = (tmp_path / "p.html").read_text()
    assert "Where exposed communication comes from" in page
    assert main(argv + ["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["exposed"]
    assert {"axis", "call", "exposed_s", "issued_s", "why"} <= set(rows[0])
    assert {r["axis"] for r in rows} >= {"dp", "tp", "pp"}
    for r in rows:
        shown = f"{r['axis']:<4}{r['exposed_s']:8.3f} s of {r['issued_s']:8.3f} s  {r['call']}"
        assert shown in text and r["why"] in text, r
        assert (f"<td class=l>{escape(r['axis'])}</td><td class=l>{escape(r['call'])}</td>"
                f"<td>{r['exposed_s']:.3f} s</td>") in page and escape(r["why"]) in page, r


def test_dualpipe_hides_the_all_to_alls():
    """The deepseek framework overlaps EP under DualPipe by default; the same placement
    with the overlap off exposes every all-to-all it issues."""
    from ledger.model import deepseek_v3
    m, sysm = deepseek_v3().with_seq(4096), system("h800")
    kw = dict(pp=16, vp=2, dp=128, ep=64, zero_stage=1, num_microbatches=120,
              moe_dispatcher="flex", framework="deepseek", schedule="dualpipe")
    on, off = (estimate(m, ParallelConfig(**kw, ep_overlap=x), sysm) for x in (None, False))
    assert ParallelConfig(**kw).ep_overlap
    ep_on, ep_off = ([r for r in e.exposed if r.axis == "ep"][0] for e in (on, off))
    assert ep_off.exposed_s == pytest.approx(ep_off.issued_s)
    assert ep_on.exposed_s < 0.5 * ep_on.issued_s and on.step_time_s < off.step_time_s


def test_delayed_wgrad_by_hand_and_in_the_step():
    """Without --delay-wgrad-compute the combined 1F1B's middle slot takes
    max(D, 2R) + max(D, R) instead of max(2D, 3R) (ledger.step.layer_comms): lost only
    where one dispatch D lies between the experts' forward GEMMs R and twice them."""
    from types import SimpleNamespace

    from ledger.model import ModelSpec
    from ledger.step.layer_comms import undelayed_wgrad_s
    from ledger.system import system

    off = SimpleNamespace(ep_overlap=True, delay_wgrad=False)
    on = SimpleNamespace(ep_overlap=True, delay_wgrad=True)
    # D = 0.3, R = 0.2: 0.4 + 0.3 - 0.6
    assert float(undelayed_wgrad_s(off, 0.6, 0.2)) == pytest.approx(0.1, rel=1e-12)
    assert float(undelayed_wgrad_s(on, 0.6, 0.2)) == 0.0
    assert float(undelayed_wgrad_s(off, 0.2, 0.2)) == 0.0  # D <= R: hidden under mlp_fwd
    assert float(undelayed_wgrad_s(off, 1.0, 0.2)) == 0.0  # D >= 2R: the comm sets the pace
    model = ModelSpec(name="band", layers=8, hidden=4096, heads=32, kv_heads=32, vocab=32000,
                      seq_len=4096, ffn_hidden=14336, num_experts=8, top_k=2, moe_ffn_hidden=256)
    # the band is the experts' GEMM seconds at the dense rate: the fitted grouped share
    # (Calibration.grouped_gemm_share) would move R, so it is pinned at 1
    from dataclasses import replace

    from ledger.step import DEFAULT
    cal = replace(DEFAULT, grouped_gemm_share=1.0)
    steps = [estimate(model, ParallelConfig(tp=1, pp=2, dp=8, ep=8, vp=2, micro_batch=2,
                                            num_microbatches=8, ep_overlap=True,
                                            moe_dispatcher="alltoall", schedule="interleaved",
                                            delay_wgrad=d), system("h100-sxm"),
                      cal=cal).step_time_s
             for d in (False, True)]
    assert steps[0] > steps[1]


def test_the_combined_1f1b_overlaps_slot_by_slot():
    """Megatron's combined 1F1B runs three slots (model_chunk_schedule_plan.py L243-247):
    combine_bwd beside the attention forward, both dispatches beside the experts' backward
    and forward, combine_fwd beside the attention backward; a slot's comm hides only under
    its own compute. By hand: forward 1.0 s and backward 2.0 s with 0.6 s of all-to-alls
    each, routed GEMMs R = 0.1: A_f = 0.3, A_b = 1.2, max(0.3, 0.3) + max(0.6, 0.3) +
    max(0.3, 1.2) = 2.1 s, where hiding all 1.2 s of comm under the pair's 1.8 s of
    compute (DualPipe's form, ``pair_s``) would give 1.8 s."""
    from types import SimpleNamespace

    from ledger.step.layer_comms import combined_1f1b_s
    from ledger.step.timing import pair_s

    on = SimpleNamespace(ep_overlap=True, delay_wgrad=True)
    assert float(combined_1f1b_s(1.0, 2.0, 0.6, 0.6, 0.1, 0.0, on)) == pytest.approx(2.1)
    assert float(pair_s(3.0, 1.2, 0.0)) == pytest.approx(1.8)
    # comm no longer than each slot's compute: all of it hides, as in pair_s
    assert float(combined_1f1b_s(1.0, 2.0, 0.2, 0.2, 0.2, 0.0, on)) == pytest.approx(2.6)
    # the SMs DeepEP takes slow each slot's compute by sm_share x its comm
    assert float(combined_1f1b_s(1.0, 2.0, 0.2, 0.2, 0.2, 0.5, on)) == pytest.approx(2.8)
    # without delayed wgrad the middle slot loses undelayed_wgrad_s (D = 0.3, R = 0.2: 0.1)
    off = SimpleNamespace(ep_overlap=True, delay_wgrad=False)
    assert float(combined_1f1b_s(1.0, 2.0, 0.6, 0.6, 0.2, 0.0, off)
                 - combined_1f1b_s(1.0, 2.0, 0.6, 0.6, 0.2, 0.0, on)) == pytest.approx(0.1)
