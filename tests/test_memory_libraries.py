"""Buffers the libraries under a framework allocate (issue 31): CUDA graphs' static
buffers, DeepEP / HybridEP's, NCCL's, optimizer CPU offload and fine-grained activation
offloading - each by hand from its source's sizing rule (the rules' sources are in each
module's docstring), and each named in report / estimate."""
import json

import pytest

from ledger.frameworks.conventions import UNRETURNABLE
from ledger.config import ParallelConfig
from ledger.model import ModelSpec
from ledger.parallel import place
from test_bad_input import run

MiB = 2**20


def _llama8b():
    from ledger.model import llama3_8b

    return llama3_8b()


# -- CUDA graphs -----------------------------------------------------------------------
def test_cuda_graph_static_grad_outputs_by_hand():
    from ledger.placement.graphs import graph_buffers

    cfg = ParallelConfig(tp=2, dp=4, cuda_graph=("attn", "mlp"))
    # one hidden-state tensor: s b / (tp under SP) x h x 2 B (TE graph.py L803-818)
    assert graph_buffers(_llama8b(), cfg) == {"CUDA-graph static grad outputs":
                                              8192 * 1 / 2 * 4096 * 2}
    assert graph_buffers(_llama8b(), ParallelConfig(tp=2, dp=4)) == {}
    assert graph_buffers(_llama8b(), ParallelConfig(
        tp=2, dp=4, cuda_graph=("full_iteration",))) == {}  # not derivable: unpriced
    no_sp = ParallelConfig(tp=2, dp=4, sequence_parallel=False, cuda_graph=("attn",))
    assert graph_buffers(_llama8b(), no_sp)["CUDA-graph static grad outputs"] == 8192 * 4096 * 2


def test_cuda_graph_buffer_is_kept_and_named():
    m = _llama8b()
    eager = place(m, ParallelConfig(tp=2, dp=4)).memory
    graphed = place(m, ParallelConfig(tp=2, dp=4, cuda_graph=("attn", "mlp"))).memory
    assert graphed.allocated_bytes - eager.allocated_bytes == 32 * MiB
    assert dict(graphed.named)["CUDA-graph static grad outputs"] == 32 * MiB
    code, out, err = run(["estimate", "llama3-8b", "--gpus", "8", "--tp", "2",
                          "--cuda-graph-scope", "attn,mlp"])
    assert code == 0, err
    assert "CUDA-graph static grad outputs 32.00 MiB" in out
    code, out, err = run(["report", "llama3-8b", "--gpus", "8", "--tp", "2",
                          "--cuda-graph-scope", "attn,mlp", "--json"])
    assert json.loads(out)["memory"]["kept"]["CUDA-graph static grad outputs"] == 32 * MiB


# -- DeepEP / HybridEP -----------------------------------------------------------------
def test_deepep_buffer_by_hand():
    from ledger.placement.ep_buffers import deepep_bytes

    # DeepEP config.hpp L44-64 at 20 SMs (10 channels), 8 ranks (8 NVLink peers, 1 RDMA
    # rank), h = 7168 (2 h bytes a token); configs for 8 ranks: dispatch and combine both
    # receive 256 tokens per channel (buffer.py L233, L261)
    token = 7168 * 2 + 8 + 128 * 8 + 128 * 4 + 128 * 4
    nvl = 10 * 8 * (2 * 1 + 3) * 4 + 10 * 8 * 256 * token
    nvl = -(-nvl // 128) * 128
    got = deepep_bytes(7168, 8)
    assert got["DeepEP NVLink buffer"] == nvl + 8 * (4 + 8 + 8)
    assert got["DeepEP RDMA buffer"] == 0  # one node: none (config.hpp L69-70)
    assert got["DeepEP workspace"] == 32 * MiB
    # 32 ranks: 4 RDMA ranks; dispatch recv 288 NVLink tokens, RDMA 32 sent / 128 received
    rdma = (10 * 4 * 18 * 2 * 4 + 10 * 4 * 128 * (token + 16) * 2 + MiB)
    assert rdma < 512 * MiB
    assert deepep_bytes(7168, 32)["DeepEP RDMA buffer"] == 512 * MiB  # NVSHMEM's 2^29 granule
    assert deepep_bytes(7168, 32)["DeepEP NVLink buffer"] == \
        -(-(10 * 8 * 11 * 4 + 10 * 8 * 288 * token) // 128) * 128 + 160


def test_hybridep_buffer_by_hand():
    from ledger.placement.ep_buffers import hybridep_bytes

    # intranode.cu L126-130, L193-213, L253-261: T x ranks worst-case tokens, BF16 tokens,
    # fp32 probs over the domain's experts, fp32 scales per 128 channels
    worst = 4096 * 8
    assert hybridep_bytes(4096, 7168, 32, 8) == {
        "HybridEP buffer": worst * 7168 * 2 + worst * 32 * 8 * 4 + worst * 56 * 4}


def test_flex_buffers_count_toward_the_device_not_allocated():
    from ledger.model import deepseek_v3

    m = deepseek_v3()
    base = dict(pp=8, dp=32, ep=32, etp=1)
    a2a = place(m, ParallelConfig(**base, moe_dispatcher="alltoall")).memory
    flex = place(m, ParallelConfig(**base, moe_dispatcher="flex")).memory
    extra = sum(v for _, v in flex.context_named)
    assert extra > 512 * MiB and dict(flex.context_named)["DeepEP workspace"] == 32 * MiB
    assert flex.context_bytes - a2a.context_bytes == pytest.approx(extra)
    # allocated differs by TE's row_id_map only: DeepEP permutes its received tokens over
    # its local experts, a share of the alltoall dispatcher's map (ep_buffers.row_id_map_share)
    saved = a2a.allocated_bytes - flex.allocated_bytes
    assert 0 < saved < 0.01 * a2a.allocated_bytes
    assert flex.required_bytes - a2a.required_bytes == pytest.approx(
        extra - saved * (1 + UNRETURNABLE), rel=1e-6)
    code, out, err = run(["estimate", "deepseek-v3", "--gpus", "256", "--pp", "8", "--ep",
                          "32", "--etp", "1", "--moe-token-dispatcher-type", "flex"])
    assert code == 0, err
    assert "of context, outside the allocator: DeepEP NVLink buffer" in out


# -- NCCL ------------------------------------------------------------------------------
def test_nvls_buffers_by_hand():
    from ledger.placement.layout import Layout
    from ledger.placement.nccl_buffers import nccl_buffers, nvls_bytes

    # nvls.cc L426-430: channels x 2 x (128 KiB x 8 steps) x heads; 16 channels on Hopper
    assert nvls_bytes(8, "hopper") == 16 * 2 * 128 * 1024 * 8 * 8 == 256 * MiB
    assert nvls_bytes(4, "blackwell") == 24 * 2 * 128 * 1024 * 8 * 4
    cfg = ParallelConfig(tp=8, pp=4, dp=2, num_microbatches=8)
    lay = Layout(tp=8, cp=1, dp=2, pp=4, ep=1)  # TP in one 8-GPU domain, DP across two
    assert nccl_buffers(cfg, lay, "hopper", True) == {"NCCL NVLS buffers": 256 * MiB}
    assert nccl_buffers(cfg, lay, "hopper", False) == {}  # switches without multicast
    off = ParallelConfig(tp=8, pp=4, dp=2, num_microbatches=8, nccl_nvls=False)
    assert nccl_buffers(off, lay, "hopper", True) == {}  # NCCL_NVLS_ENABLE=0
    both = ParallelConfig(tp=2, dp=4)  # TP 2 and DP 4 both inside the domain
    assert nccl_buffers(both, Layout(tp=2, cp=1, dp=4, pp=1, ep=1), "hopper", True) == {
        "NCCL NVLS buffers": nvls_bytes(2, "hopper") + nvls_bytes(4, "hopper")}


def test_nvls_buffers_in_report_and_off_for_bridge_launches():
    args = ["report", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4",
            "--microbatches", "16", "--json"]
    code, out, err = run(args)
    assert code == 0, err
    on = json.loads(out)["memory"]
    code, out, err = run(args + ["--no-nccl-nvls"])
    off = json.loads(out)["memory"]
    assert on["context_named"] == {"NCCL NVLS buffers": 256 * MiB}
    assert off["context_named"] == {} and on["context"] - off["context"] == 256 * MiB
    assert on["allocated"] == off["allocated"]


# -- optimizer CPU offload (Megatron's hybrid-device optimizer) -------------------------
def test_optimizer_offload_by_hand():
    from ledger.model import llama3_70b

    m = llama3_70b()
    base = dict(tp=8, dp=8, zero_stage=1, micro_batch=1)
    plain = place(m, ParallelConfig(**base)).memory
    half = place(m, ParallelConfig(**base, optimizer_offload_fraction=0.5))
    trained = m.params / 8 / 8  # one GPU's shard of the distributed optimizer (the norms,
    # whole on every TP rank, put it 0.01% above)
    # the megatron convention's optimizer: fp32 main params + two fp32 moments, 12 B; half
    # of it leaves the GPU (hybrid_optimizer.py L249-301), params and grads stay
    assert plain.state_bytes - half.memory.state_bytes == pytest.approx(0.5 * 12 * trained,
                                                                         rel=1e-3)
    # the host: fp32 main param, pinned fp32 grad, two fp32 moments (L97-104, L276-279)
    assert half.host_bytes_per_gpu == pytest.approx(0.5 * trained * 16, rel=1e-3)
    rows = {r.direction: r.bytes for r in half.host_transfers}
    assert rows["d2h"] == pytest.approx(0.5 * trained * 4, rel=1e-3)
    assert rows["h2d"] == pytest.approx(0.5 * trained * 2, rel=1e-3)
    assert half.host_step_params == pytest.approx(0.5 * trained * 8, rel=1e-3)  # 8 GPUs a host


def test_optimizer_offload_time_and_overlap():
    from ledger.model import llama3_70b
    from ledger.step import estimate
    from ledger.system import system

    m, sysm = llama3_70b(), system("h100-sxm")
    base = dict(tp=8, dp=8, zero_stage=1)
    off = estimate(m, ParallelConfig(**base, optimizer_offload_fraction=1.0), sysm)
    over = estimate(m, ParallelConfig(**base, optimizer_offload_fraction=1.0,
                                      overlap_cpu_optimizer=True), sysm)
    trained = m.params / 64
    link = trained * (4 + 2) / sysm.host_bandwidth()  # down then up, one after another
    assert off.breakdown["offload"] == pytest.approx(link, rel=1e-3)
    cpu = trained * 8 / sysm.cpu_optimizer_params_per_s
    assert off.breakdown["cpu_optim"] == pytest.approx(cpu, rel=1e-3)
    # overlapped: the copies hide under the CPU step (here the longer)
    assert over.breakdown.get("offload", 0.0) == 0.0  # the breakdown drops zero rows
    assert over.breakdown["cpu_optim"] == pytest.approx(cpu, rel=1e-3)
    assert off.step_time_s - over.step_time_s == pytest.approx(link, rel=1e-3)
    code, out, err = run(["report", "llama3-70b", "--gpus", "64", "--tp", "8", "--zero", "1",
                          "--optimizer-offload-fraction", "0.5"])
    assert code == 0, err
    assert "cpu offload         50% of the optimizer (Megatron --optimizer-cpu-offload)" in out


# -- fine-grained activation offloading ------------------------------------------------
def test_offloaded_module_inputs_by_hand():
    from ledger.arch import table
    from ledger.model import deepseek_v3
    from ledger.placement.act_offload import module_inputs

    m = deepseek_v3()
    cfg = ParallelConfig(pp=8, dp=32, ep=32, etp=1, num_microbatches=16)
    moe_kind = next(k for k in m.kind_counts if k.moe)
    got = module_inputs(m, cfg, moe_kind, table("megatron"))
    s, e = 4096, 2
    # core attention reads Q and K at 128 heads x 192 (MLA's nope + rope) and V at 128 x 128
    assert got["core_attn"] == s * (128 * 192 * 2 + 128 * 128) * e
    assert got["attn_proj"] == s * 128 * 128 * e
    assert got["attn_norm"] == s * 7168 * e  # MLA's input norm is a module of its own
    assert got["mlp_norm"] == s * 7168 * e
    # 8 routed copies of each token reach the experts, on average, at EP 32
    assert got["expert_fc1"] == s * 8 * 7168 * e
    assert got["moe_act"] == s * 8 * 2 * 2048 * e


def test_fine_grained_offload_moves_activations_to_the_host():
    from ledger.model import deepseek_v3

    m = deepseek_v3()
    base = dict(pp=8, dp=32, ep=32, etp=1, num_microbatches=16)
    plain = place(m, ParallelConfig(**base))
    off = place(m, ParallelConfig(**base, offload_modules=("core_attn", "attn_proj")))
    r0 = plain.memory_by_rank[0], off.memory_by_rank[0]
    layer = 4096 * (128 * 192 * 2 + 128 * 128 + 128 * 128) * 2  # Q, K, V and the output
    # rank 0 holds 7 layers (rank_layers: 7, 7, 8, 8, 8, 8, 8, 7), 8 micro-batches in
    # flight at its backward (1F1B); the one layer Megatron keeps (the margin) sits
    # beside the output head, on the last rank
    gone = r0[0].activations_bytes - r0[1].activations_bytes
    assert gone == pytest.approx(8 * 7 * layer, rel=1e-6)
    assert off.host_bytes_per_gpu == pytest.approx(gone, rel=1e-6)
    rows = {r.direction: (r.bytes, r.overlap) for r in off.host_transfers}
    assert rows["d2h"][1] == rows["h2d"][1] == "yes"
    with pytest.raises(Exception, match="attn_proj with core_attn"):
        ParallelConfig(**base, offload_modules=("attn_proj",))


def test_planner_prices_nvls_as_report_does():
    args = ["--gpus", "8", "--json"]
    code, out, err = run(["plan", "llama3-8b", "--global-batch", "64", "--top", "1", *args])
    assert code == 0, err
    top = json.loads(out)["plans"][0]
    code, out, err = run(["report", "llama3-8b", "--zero", str(top["zero_stage"]),
                          "--tp", str(top["tp"]), "--cp", str(top["cp"]),
                          "--micro-batch", str(top["micro_batch"]),
                          "--microbatches", str(top["num_microbatches"]), *args])
    assert code == 0, err
    mem = json.loads(out)["memory"]
    assert "NCCL NVLS buffers" in mem["context_named"]
    assert top["memory_bytes"] == pytest.approx(mem["required"], rel=1e-9)


def test_hybridep_sizes_for_the_ep_ranks_of_one_nvlink_domain():
    from ledger.model import deepseek_v3

    m = deepseek_v3()
    cfg = ParallelConfig(pp=4, dp=64, ep=64, etp=1, num_microbatches=16,
                         moe_dispatcher="flex", ep_backend="hybridep")
    # GB200 NVL72: 64 hosts of 4 GPUs, a 256-GPU job in 64-GPU domain segments - all 64
    # EP ranks in one domain, as Megatron-Bridge's launcher sets NUM_OF_HYBRID_EP_RANKS_
    # PER_NVLINK_DOMAIN = EP there; on 8-GPU hosts, 8
    nvl72 = dict(place(m, cfg, gpus_per_node=4, gpus_per_domain=72).memory.context_named)
    dgx = dict(place(m, cfg, gpus_per_node=8).memory.context_named)
    worst = 4096 * 64  # intranode.cu L126-130: every token of the domain's ranks
    assert nvl72["HybridEP buffer"] == worst * 7168 * 2 + worst * 4 * 64 * 4 + worst * 56 * 4
    worst = 4096 * 8
    assert dgx["HybridEP buffer"] == worst * 7168 * 2 + worst * 4 * 8 * 4 + worst * 56 * 4


def plan_top_and_its_report(*flags: str) -> tuple[dict, dict]:
    """llama3-8b on 8 GPUs at TP 2 with ``flags``: the planner's #1 and report's memory for
    that same placement (both --json)."""
    args = ["--gpus", "8", "--json", "--no-nccl-nvls", *flags]
    code, out, err = run(["plan", "llama3-8b", "--global-batch", "64", "--top", "1",
                          "--tp", "2", *args])
    assert code == 0, err
    top = json.loads(out)["plans"][0]
    code, out, err = run(["report", "llama3-8b", "--zero", str(top["zero_stage"]),
                          "--tp", "2", "--cp", str(top["cp"]), "--pp", str(top["pp"]),
                          "--micro-batch", str(top["micro_batch"]),
                          "--microbatches", str(top["num_microbatches"]), *args])
    assert code == 0, err
    return top, json.loads(out)["memory"]


def test_planner_prices_cuda_graph_buffers_as_report_does():
    top, mem = plan_top_and_its_report("--cuda-graph-scope", "attn,mlp")
    assert "CUDA-graph static grad outputs" in mem["kept"]
    assert top["memory_bytes"] == pytest.approx(mem["required"], rel=1e-9)


def test_html_names_the_buffer_and_context_terms(tmp_path):
    page = tmp_path / "r.html"
    code, out, err = run(["report", "deepseek-v3", "--gpus", "256", "--pp", "8", "--ep", "32",
                          "--etp", "1", "--microbatches", "16", "--moe-token-dispatcher-type",
                          "flex", "--cuda-graph-scope", "attn", "--html", str(page)])
    assert code == 0, err
    html = page.read_text()
    assert "of it DeepEP NVLink buffer 360.18 MiB, DeepEP RDMA buffer 512.00 MiB" in html
    assert "CUDA-graph static grad outputs 56.00 MiB" in html  # 4096 x 7168 x 2 B


def test_core_attn_offload_takes_what_the_kernel_saves():
    """The group's saved-tensor hooks wrap the whole core attention (attention.py
    L1552-1607 @d98e8a64): unfused, its scores go with Q, K and V."""
    from ledger.arch import layer_activations
    from ledger.placement.layers import _layer_kw, layer_activation_bytes

    m = _llama8b()
    base = dict(tp=1, dp=8, flash_attention=False, dropout=0.0)
    plain = ParallelConfig(**base)
    off = ParallelConfig(**base, offload_modules=("core_attn",))
    acts = layer_activations(m, **_layer_kw(m, plain))
    qkv = 8192 * (4096 + 1024 + 1024) * 2  # Q, K (8 KV heads x 128), V at bf16
    gone = layer_activation_bytes(m, plain) - layer_activation_bytes(m, off)
    assert acts.scores_bytes > 0
    assert gone == pytest.approx(qkv + acts.scores_bytes, rel=1e-9)
