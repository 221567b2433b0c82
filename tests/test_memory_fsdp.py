"""Megatron-FSDP's buffers as its source allocates them, by hand (Llama 3 70B's layer and
root units): what the backward holds of the root unit, and the TE buffers gradient-
accumulation fusion makes (ledger.placement.footprint.buffer_bytes,
ledger.placement.buffers)."""
import pytest

from ledger.config import ParallelConfig
from ledger.frameworks import of as framework_of
from ledger.model import llama3_70b
from ledger.placement.footprint import buffer_bytes
from ledger.placement.layers import largest_layer_params
from ledger.placement.per_gpu import root_params

# Llama 3 70B by hand: q (64 x 128) + k, v (8 x 128 each) over h 8192, o, the SwiGLU MLP
# (3 x 8192 x 28672) and two RMSNorm weights; the root: embedding and output layer
# (128256 x 8192 each, untied) and the final norm
LAYER = 8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672 + 2 * 8192
ROOT = 2 * 128256 * 8192 + 8192
HEAD = 128256 * 8192 + 8192  # the output layer and final norm: the root's output side


def _cfg(framework):
    return ParallelConfig(dp=64, zero_stage=3, framework=framework)


def test_llama3_70b_units_by_hand():
    cfg = _cfg("megatron")
    assert largest_layer_params(llama3_70b(), cfg) == LAYER == 855_654_400
    assert root_params(llama3_70b(), cfg, 0) == ROOT


def test_megatron_fsdp_backward_holds_the_output_layers_bucket_not_the_root():
    """Megatron-FSDP copies every parameter's gradient into its bucket as its module's
    backward ends (megatron_fsdp.py L555-604 @2edffadb), so a layer's backward holds the
    next layer prefetched (2 B), its own unsharded gradient (2 B) and the reduce bucket
    (4 B: the convention's fp32 main grads) and of the root its gathered params (2 B),
    held throughout - but a queued bucket is freed only once the reduce-scatter queue
    holds more than its capacity as the next bucket group is queued (param_and_grad_
    buffer.py L3435-3509), so the bucket of the output layer (and final norm) is alive
    from the output layer's backward through the first layer's: the output side alone
    where the embedding fills a bucket of its own (Megatron-Bridge's 128 Mi with DP > 1),
    the whole root in one bucket where no bucket size is set (L1445-1489), nothing on a
    rank without the output layer. FSDP2 holds the root's unsharded gradients (2 B of the
    root) until the root's own post-backward."""
    from dataclasses import replace

    from ledger.placement.buffers import head_grad_bytes

    fw = framework_of(_cfg("megatron"))
    split = replace(_cfg("megatron"), dp_bucket_params=128 * 2**20)
    throughout, backward = buffer_bytes(split, fw, LAYER, 80, ROOT)
    assert throughout == LAYER * 2 + ROOT * 2
    assert backward == LAYER * 2 + LAYER * (2 + 4)
    assert head_grad_bytes(split, fw, ROOT, HEAD) == HEAD * 4
    assert head_grad_bytes(_cfg("megatron"), fw, ROOT, HEAD) == ROOT * 4  # one bucket
    assert head_grad_bytes(split, fw, ROOT - HEAD, 0.0) == 0  # PP: the first stage
    fsdp2 = framework_of(_cfg("torchtitan"))
    _, held = buffer_bytes(_cfg("torchtitan"), fsdp2, LAYER, 80, ROOT)
    assert held == pytest.approx(LAYER * 2 + LAYER * (2 + 4) + ROOT * 2)
    assert head_grad_bytes(_cfg("torchtitan"), fsdp2, ROOT, HEAD) == 0


def test_gb200_llama3_70b_fsdp_row_by_hand():
    """26.04.01 GB200 Llama 3 70B FP8-CS (Megatron-FSDP, DP 64, MBS 2, BF16 gradient
    reduction, no gradient-accumulation fusion, 40 of 80 layers' activations offloaded),
    by hand at the output layer's backward, its peak: the state (FP8 shards, BF16 main
    grads, fp32 main params and moments), 40 layers' saved tensors and the head's input,
    the logits' gradient (TE's parallel cross-entropy writes it over the logits, 2 B),
    the output layer's BF16 gradient bucket, the root gathered in BF16, the double
    buffers (two layers gathered in FP8, two BF16 gradient buckets) and the cuBLAS
    workspace. At a layer's backward the bucket is still there, the logits' gradient is
    gone and the MLP's input gradients (16384 tokens x 3 x 28672 x 2 B) are alive."""
    from ledger.parallel import place
    from ledger.placement.layers import layer_activation_bytes
    from ledger.placement.per_gpu import head_activation_bytes, memory_points
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.validation.bridge import rows

    r = next(r for r in rows() if r.id.startswith("26.04.01/gb200/llama3-70b/fp8_cs")).as_run()
    model = model_of(r)
    cfg = config_of(r, precision_of(r)[0], model)[0]
    from ledger.system import GPUS

    mem = place(model, cfg, gpu=GPUS["gb200"]).memory  # Blackwell: no FP8 transposes
    logits, pools = 16384 * 128256 * 2, 2 * LAYER + 2 * LAYER * 2
    assert mem.moment == "output backward"
    assert mem.activations_bytes == pytest.approx(80 * layer_activation_bytes(model, cfg)
                                                  + head_activation_bytes(model, cfg))
    assert mem.logits_bytes == logits
    gemm = 80 * (LAYER - 2 * 8192)  # the FP8 weights; norms, embedding, output in BF16
    total = 80 * LAYER + ROOT
    state = (gemm + (total - gemm) * 2 + total * (2 + 12)) / 64
    assert mem.state_bytes == pytest.approx(state, rel=1e-6)  # + FP8 scales
    # TE's GEMM workspace (32 MiB + 1 KiB) and PyTorch's two cuBLAS workspaces for the
    # output layer's torch GEMMs, 8.125 MiB each off sm_90 (8,519,680 B)
    assert mem.buffers_bytes == pools + ROOT * 2 + HEAD * 2 + 33_555_456 + 2 * 8_519_680
    work = 16384 * 3 * 28672 * 2
    points = memory_points(model, cfg)
    assert points["output backward"] - points["backward"] == pytest.approx(
        logits + head_activation_bytes(model, cfg) - work)


# TE's dummy wgrads of one Llama 3 70B layer at TP 1, by hand: one per distinct weight
# shape - linear_qkv (10240 x 8192), linear_proj (8192 x 8192), fc1 (57344 x 8192), fc2
# (8192 x 28672) - in the bf16 param dtype
# the layers' four TE weight shapes and the output layer's (Megatron's ColumnParallelLinear
# takes TE's cached dummy too, tensor_parallel/layers.py L733-762 @d98e8a64)
DUMMIES = 2 * (10240 * 8192 + 8192 * 8192 + 57344 * 8192 + 8192 * 28672 + 128256 * 8192)


def _named(**kw):
    from ledger.parallel import place

    cfg = ParallelConfig(dp=64, zero_stage=3, precision="bf16", **kw)
    return dict(place(llama3_70b(), cfg).memory.named)


def test_dummy_wgrads_only_under_gradient_accumulation_fusion():
    """TE hands autograd a dummy wgrad only under fuse_wgrad_accumulation (linear.py
    L1357-1374 @TE d0067d0d); --no-gradient-accumulation-fusion returns the gradient."""
    assert _named()["TE dummy wgrads"] == DUMMIES == 1_711_276_032 + 2_101_346_304
    assert "TE dummy wgrads" not in _named(grad_accumulation_fusion=False)


def test_megatron_flag_turns_the_fusion_off(tiny_launch):
    launch = tiny_launch("--no-gradient-accumulation-fusion")
    assert "--no-gradient-accumulation-fusion" in launch.applied
    assert launch.flags["grad_accumulation_fusion"] is False
    assert "grad_accumulation_fusion" not in tiny_launch().flags


def test_bridge_llama_fsdp_rows_run_without_the_fusion():
    """The Llama perf functions turn the fusion off under Megatron-FSDP from v0.2.0
    (llama3_llm_pretrain.py L76 @v0.4.0); v0.1.0rc3's run_script.py L154 keeps it on."""
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.validation.bridge import rows

    def cfg(prefix):
        r = next(r for r in rows() if r.id.startswith(prefix)).as_run()
        m = model_of(r)
        return config_of(r, precision_of(r)[0], m)[0]

    assert cfg("26.04/gb200/llama3-70b/fp8_cs").grad_accumulation_fusion is False
    assert cfg("25.11/gb200/llama3-70b/fp8_cs").grad_accumulation_fusion is False
    assert cfg("25.09/gb200/llama3-70b/fp8_cs").grad_accumulation_fusion is True
    assert cfg("26.04/gb200/llama3-70b/fp8_mx").grad_accumulation_fusion is True  # no FSDP


def test_planner_prices_the_fusion_as_report_does():
    from test_memory_libraries import plan_top_and_its_report

    top, mem = plan_top_and_its_report("--no-gradient-accumulation-fusion")
    assert "TE dummy wgrads" not in mem["kept"]
    assert top["memory_bytes"] == pytest.approx(mem["required"], rel=1e-9)


def test_megatron_fsdp_double_buffers_are_kept_for_the_run():
    """Under fsdp_double_buffer Megatron-FSDP takes each layer's gathered params and its
    gradient bucket from a pool of two buffers per unit bucket, never freed
    (param_and_grad_buffer.py L2114-2131 @2edffadb): named and kept - Llama 3 70B's two
    layers gathered in BF16 (2 B) and two gradient buckets in fp32 main grads (4 B) - and
    no longer churned per layer; off, nothing is kept and the backward's layers are
    dynamic buckets as before."""
    from dataclasses import replace

    from ledger.parallel import place

    cfg = ParallelConfig(dp=64, zero_stage=3, dp_bucket_params=128 * 2**20)
    pooled = place(llama3_70b(), replace(cfg, fsdp_double_buffer=True)).memory
    named = dict(pooled.named)
    assert named["Megatron-FSDP param double buffer"] == 2 * LAYER * 2
    assert named["Megatron-FSDP grad double buffer"] == 2 * LAYER * 4
    assert pooled.kept_bytes == pytest.approx(sum(named.values()))
    plain = place(llama3_70b(), cfg).memory
    assert not any(k.startswith("Megatron-FSDP") for k, _ in plain.named)
    # at a layer's backward the pools hold two fp32 buckets where the dynamic path priced
    # one and the layer's unsharded BF16 gradient (8 B of the layer for 6); before it (the
    # loss) the second gathered layer and both gradient buckets are there already
    from ledger.placement.per_gpu import memory_points

    on, off = (memory_points(llama3_70b(), c) for c in (replace(cfg, fsdp_double_buffer=True),
                                                         cfg))
    assert on["backward"] - off["backward"] == pytest.approx(LAYER * (2 * 4 - (2 + 4)))
    assert on["loss backward"] - off["loss backward"] == pytest.approx(LAYER * (2 + 2 * 4))
    assert pooled.persistent_bytes - plain.persistent_bytes == pytest.approx(LAYER * 12)


def test_bridge_rows_run_the_double_buffer_where_their_recipes_set_it():
    """llama3_llm_pretrain.py L110 @v0.4.2 (GB200, under Megatron-FSDP); v0.1.0rc3's
    run_script.py L161-163 (Llama 3 70B / 405B under Megatron-FSDP); the 8B's functions
    leave Megatron's default, off."""
    from ledger.render.bridge_launch import fsdp_double_buffer
    from ledger.validation.bridge import rows

    got = {r.id: fsdp_double_buffer(r.as_run()) for r in rows() if r.megatron_fsdp}
    assert got["26.04.01/gb200/llama3-70b/fp8_cs/64g/gbs256/mbs2"] is True
    assert got["25.09/gb200/llama3-70b/fp8_cs/64g/gbs128/mbs2"] is True
    assert got["25.11/h100/llama3-8b/fp8_cs/8g/gbs128/mbs1"] is False
    assert not any(fsdp_double_buffer(r.as_run()) for r in rows() if not r.megatron_fsdp)


def test_lora_base_keeps_no_output_gradient_bucket(monkeypatch):
    """A LoRA fine-tune's frozen base makes no gradients (ledger.placement.tuned.
    buffer_framework: no unsharded gradient buffer), so Megatron-FSDP's output-layer
    bucket holds nothing there; pre-training holds the whole root's (one bucket, no
    bucket size set) at the fp32 main grads' 4 B."""
    from ledger.finetune import FineTune
    from ledger.parallel import place
    from ledger.placement import per_gpu

    seen = []
    real = per_gpu.head_grad_bytes
    monkeypatch.setattr(per_gpu, "head_grad_bytes",
                        lambda *a: seen.append(real(*a)) or seen[-1])
    cfg = ParallelConfig(dp=16, zero_stage=3)
    place(llama3_70b(), cfg)
    assert seen[-1] == ROOT * 4
    place(llama3_70b(), ParallelConfig(dp=16, zero_stage=3, finetune=FineTune(method="lora")))
    assert seen[-1] == 0
