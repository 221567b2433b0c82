"""Every Megatron-LM flag the reader lists as applied (``MODELLED``) changes a priced
number: a bare-flags launch, the flag changed, and the estimate (with a whole run, for the
checkpoint flags) moves - a priced figure of it, not its echo of the file name or
config. ``NOT_YET``: modelled flags no single change here shows moving,
each with why (their effect needs another flag this base does not set, or is held by
another test)."""
import json

import pytest

from ledger.io.megatron.reader import MODELLED
from test_bad_input import run

BASE = ("--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --ffn-hidden-size 4096 "
        "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
        "--global-batch-size 64 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
        "--vocab-size 32000 --bf16 --tokenizer-type NullTokenizer")
MOE = "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2"
MLA = "--multi-latent-attention --kv-lora-rank 256 --qk-head-dim 64 --qk-pos-emb-head-dim 32 " \
      "--v-head-dim 64"
PRECISION_AWARE = "--use-distributed-optimizer --use-precision-aware-optimizer"
NODES = "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --num-experts 64 " \
    "--moe-router-topk 8 --expert-model-parallel-size 16 --moe-token-dispatcher-type flex"
NODES64 = NODES.replace("--expert-model-parallel-size 16", "--expert-model-parallel-size 64")
FINE = "--hidden-size 4096 --num-attention-heads 32 --micro-batch-size 4 " \
    "--global-batch-size 256 --num-experts 64 --moe-router-topk 1 --moe-ffn-hidden-size 128"
# HybridEP under Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm): the SMs its
# kernels take slow the compute an overlapped all-to-all runs beside (ledger.step.ep_sms);
# HybridEP's buffers do not depend on them, so the step alone moves
SMS = MOE + " --moe-token-dispatcher-type flex --expert-tensor-parallel-size 1 " \
    "--sequence-parallel --moe-flex-dispatcher-backend hybridep " \
    "--num-layers-per-virtual-pipeline-stage 2 --overlap-moe-expert-parallel-comm " \
    "--hidden-size 4096 --num-attention-heads 32 --micro-batch-size 4 --global-batch-size 256"
# flag -> (flags under both sides, the change); the change holds the flag
CASES = {
    # the flex dispatcher's SMs; the deprecated per-backend knobs are routed to the same
    # count whichever backend runs (transformer_config.py L1792-1811 @d98e8a64)
    "--moe-flex-dispatcher-num-sms": (SMS, "--moe-flex-dispatcher-num-sms 32"),
    "--moe-hybridep-num-sms": (SMS, "--moe-hybridep-num-sms 32"),
    "--moe-deepep-num-sms": (SMS, "--moe-deepep-num-sms 32"),
    "--num-layers": ("", "--num-layers 12"),
    "--hidden-size": ("", "--hidden-size 2048"),
    "--num-attention-heads": ("", "--num-attention-heads 8"),
    "--ffn-hidden-size": ("", "--ffn-hidden-size 8192"),
    "--group-query-attention": ("--num-query-groups 4", "--group-query-attention"),
    "--num-query-groups": ("--group-query-attention --num-query-groups 2",
                           "--num-query-groups 4"),
    "--kv-channels": ("", "--kv-channels 128"),
    "--seq-length": ("", "--seq-length 1024"),
    "--max-position-embeddings": ("", "--max-position-embeddings 4096"),
    "--position-embedding-type": ("", "--position-embedding-type rope"),
    "--use-rotary-position-embeddings": ("", "--use-rotary-position-embeddings"),
    "--swiglu": ("", "--swiglu"),
    # mHC: n residual streams, two HyperConnectionModules a layer (hyper_connection.py)
    "--enable-mhc-connections": ("", "--enable-mhc-connections"),
    "--mhc-num-residual-streams": ("--enable-mhc-connections", "--mhc-num-residual-streams 2"),
    "--moe-latent-size": (MOE, "--moe-latent-size 256"),
    "--mtp-use-repeated-layer": ("--position-embedding-type rope --mtp-num-layers 2",
                                 "--mtp-use-repeated-layer"),
    "--quick-geglu": ("", "--quick-geglu"),
    "--untie-embeddings-and-output-weights": ("", "--untie-embeddings-and-output-weights"),
    "--normalization": ("", "--normalization RMSNorm"),
    "--disable-bias-linear": ("", "--disable-bias-linear"),
    "--add-qkv-bias": ("--disable-bias-linear", "--add-qkv-bias"),
    "--qk-layernorm": ("", "--qk-layernorm"),
    "--vocab-size": ("", "--vocab-size 64000"),
    "--padded-vocab-size": ("", "--padded-vocab-size 40000"),
    # 32000 is a multiple of 128 x tp and of 1000 x tp; of 1024 x tp it pads to 32768
    "--make-vocab-size-divisible-by": ("", "--make-vocab-size-divisible-by 1024"),
    "--num-experts": ("--moe-router-topk 2", "--num-experts 8"),
    "--moe-router-topk": (MOE, "--moe-router-topk 4"),
    "--moe-ffn-hidden-size": (MOE, "--moe-ffn-hidden-size 1024"),
    "--moe-shared-expert-intermediate-size": (MOE, "--moe-shared-expert-intermediate-size 1024"),
    "--moe-layer-freq": (MOE, "--moe-layer-freq 2"),
    "--mtp-num-layers": ("--position-embedding-type rope", "--mtp-num-layers 1"),
    # node-limited routing bounds the nodes a token's DeepEP dispatch crosses IB to
    # (ledger.placement.experts.remote_nodes): EP 64 over eight 8-GPU nodes (over two, the
    # dispatch is bound by its NVLink forwarding, which the groups do not change)
    "--moe-router-num-groups": (NODES64 + " --moe-router-num-groups 8 --moe-router-group-topk 2",
                                "--moe-router-num-groups 4"),
    "--moe-router-group-topk": (NODES64 + " --moe-router-num-groups 8 --moe-router-group-topk 1",
                                "--moe-router-group-topk 2"),
    "--multi-latent-attention": ("--kv-lora-rank 256", "--multi-latent-attention"),
    "--q-lora-rank": (MLA, "--q-lora-rank 512"),
    "--kv-lora-rank": (MLA, "--kv-lora-rank 128"),
    "--qk-head-dim": (MLA, "--qk-head-dim 128"),
    "--qk-pos-emb-head-dim": (MLA, "--qk-pos-emb-head-dim 64"),
    "--v-head-dim": (MLA, "--v-head-dim 128"),
    "--window-size": ("", "--window-size (256,0)"),
    "--tensor-model-parallel-size": ("", "--tensor-model-parallel-size 4"),
    "--pipeline-model-parallel-size": ("", "--pipeline-model-parallel-size 4"),
    "--context-parallel-size": ("", "--context-parallel-size 2"),
    "--expert-model-parallel-size": ("--num-experts 8 --moe-router-topk 2",
                                     "--expert-model-parallel-size 4"),
    "--expert-tensor-parallel-size": (MOE + " --sequence-parallel",
                                      "--expert-tensor-parallel-size 1"),
    "--moe-token-dispatcher-type": (MOE, "--moe-token-dispatcher-type alltoall"),
    "--num-layers-per-virtual-pipeline-stage": ("--global-batch-size 64",
                                                "--num-layers-per-virtual-pipeline-stage 2"),
    "--num-virtual-stages-per-pipeline-rank": ("", "--num-virtual-stages-per-pipeline-rank 2"),
    "--sequence-parallel": ("", "--sequence-parallel"),
    "--use-distributed-optimizer": ("", "--use-distributed-optimizer"),
    "--micro-batch-size": ("", "--micro-batch-size 2"),
    "--global-batch-size": ("", "--global-batch-size 128"),
    "--recompute-activations": ("", "--recompute-activations"),
    "--recompute-granularity": ("", "--recompute-granularity full --recompute-method uniform "
                                    "--recompute-num-layers 1"),
    "--recompute-method": ("--recompute-granularity full --recompute-num-layers 2",
                           "--recompute-method block"),
    "--recompute-num-layers": ("--recompute-granularity full --recompute-method block",
                               "--recompute-num-layers 2"),
    "--tp-comm-overlap": ("--sequence-parallel", "--tp-comm-overlap"),
    "--fp16": ("", "--fp16"),
    "--grad-reduce-in-bf16": ("", "--grad-reduce-in-bf16"),
    "--fp8-format": ("", "--fp8-format hybrid"),
    # delayed and tensorwise price alike at Megatron's amax history of 1 (fp8.py's meta)
    "--fp8-recipe": ("--fp8-format hybrid", "--fp8-recipe blockwise"),
    "--fp8-param-gather": ("--fp8-format hybrid --use-distributed-optimizer",
                           "--fp8-param-gather"),
    "--optimizer": ("", "--optimizer sgd"),
    "--hidden-dropout": ("", "--hidden-dropout 0"),
    "--save-interval": ("", "--save-interval 5"),
    "--async-save": ("--save-interval 1000 --use-dist-ckpt", "--async-save"),
    "--overlap-grad-reduce": ("--use-distributed-optimizer", "--overlap-grad-reduce"),
    "--overlap-param-gather": ("--use-distributed-optimizer --overlap-grad-reduce",
                               "--overlap-param-gather"),
    "--decoder-first-pipeline-num-layers": ("", "--decoder-first-pipeline-num-layers 3"),
    "--decoder-last-pipeline-num-layers": ("", "--decoder-last-pipeline-num-layers 3"),
    "--pipeline-model-parallel-layout": ("", '--pipeline-model-parallel-layout "Et*3|t*5L"'),
    # --bf16 forces it (arguments.py L1209-1217): it moves the grad buffer under --fp16
    "--accumulate-allreduce-grads-in-fp32": ("--fp16", "--accumulate-allreduce-grads-in-fp32"),
    "--cp-comm-type": ("--context-parallel-size 2", "--cp-comm-type a2a"),
    "--use-megatron-fsdp": ("--use-distributed-optimizer", "--use-megatron-fsdp"),
    "--data-parallel-sharding-strategy": ("--use-megatron-fsdp",
                                          "--data-parallel-sharding-strategy optim_grads"),
    "--megatron-fsdp-main-grads-dtype": ("--use-megatron-fsdp",
                                         "--megatron-fsdp-main-grads-dtype bf16"),
    # Megatron-FSDP's persistent double buffers, and --use-nccl-ub, which turns them on
    # (arguments.py L1172-1177)
    "--fsdp-double-buffer": ("--use-megatron-fsdp", "--fsdp-double-buffer"),
    "--use-nccl-ub": ("--use-megatron-fsdp", "--use-nccl-ub"),
    "--no-pad-vocab-size": ("--vocab-size 32001", "--no-pad-vocab-size"),
    "--overlap-moe-expert-parallel-comm": (MOE + " --num-layers-per-virtual-pipeline-stage 2 "
                                           "--moe-token-dispatcher-type alltoall",
                                           "--overlap-moe-expert-parallel-comm"),
    "--persistent-save-interval": ("--save-interval 1000", "--persistent-save-interval 500"),
    "--softmax-type": ("", "--softmax-type learnable"),
    "--activation-func-clamp-value": (MOE + " --quick-geglu", "--activation-func-clamp-value 7.0"),
    "--window-attn-skip-freq": ("--window-size (256,0)", "--window-attn-skip-freq 2"),
    "--fp4-format": ("", "--fp4-format e2m1"),
    "--fp4-param-gather": ("--fp4-format e2m1 --use-distributed-optimizer",
                           "--fp4-param-gather"),
    "--first-last-layers-bf16": ("--fp8-format hybrid", "--first-last-layers-bf16"),
    "--num-layers-at-start-in-bf16": ("--fp8-format hybrid --first-last-layers-bf16",
                                      "--num-layers-at-start-in-bf16 2"),
    "--num-layers-at-end-in-bf16": ("--fp8-format hybrid --first-last-layers-bf16",
                                    "--num-layers-at-end-in-bf16 2"),
    "--attention-backend": ("", "--attention-backend unfused"),
    "--no-gradient-accumulation-fusion": ("", "--no-gradient-accumulation-fusion"),
    "--cross-entropy-loss-fusion": ("--cross-entropy-fusion-impl te",
                                    "--cross-entropy-loss-fusion"),
    "--cross-entropy-fusion-impl": ("--cross-entropy-loss-fusion",
                                    "--cross-entropy-fusion-impl te"),
    "--cpu-offloading-num-layers": ("--pipeline-model-parallel-size 1",
                                    "--cpu-offloading-num-layers 2"),
    "--use-precision-aware-optimizer": ("--use-distributed-optimizer --exp-avg-dtype bf16",
                                        "--use-precision-aware-optimizer"),
    "--exp-avg-dtype": (PRECISION_AWARE, "--exp-avg-dtype bf16"),
    "--exp-avg-sq-dtype": (PRECISION_AWARE, "--exp-avg-sq-dtype bf16"),
    # at fp32 main params TE keeps 16-bit remainders of the bf16 params, an fp16 master's
    # bytes; under an FP8 recipe Megatron keeps fp32 main params itself (optimizer_config.py
    # L407-414 @d98e8a64; tensorwise here, Hopper), and fp16 ones hand the masters to TE
    "--main-params-dtype": (PRECISION_AWARE + " --fp8-format hybrid --fp8-recipe tensorwise",
                            "--main-params-dtype fp16"),
    # bf16 main grads leave the DDP's buffer in the params' bf16 (arguments.py L1214-1217)
    "--main-grads-dtype": (PRECISION_AWARE, "--main-grads-dtype bf16"),
    "--recompute-modules": ("--recompute-granularity selective", "--recompute-modules mlp"),
    # the host's launches (step/host.py): a dropless MoE layer waits on the host, graphs
    # take their scopes' launches off it
    "--enable-cuda-graph": (MOE, "--enable-cuda-graph"),
    "--cuda-graph-impl": (MOE, "--cuda-graph-impl transformer_engine"),
    # the router's launches alone are captured first, then the attention's join them (a
    # bare --cuda-graph-impl already captures the layer's attention and router)
    "--cuda-graph-modules": (MOE + " --cuda-graph-impl transformer_engine "
                             "--cuda-graph-modules attn",
                             "--cuda-graph-modules attn moe_router"),
    "--cuda-graph-scope": (MOE + " --cuda-graph-impl transformer_engine "
                           "--cuda-graph-scope attn",
                           "--cuda-graph-scope attn moe_router"),
    # a factor of 1 is the even share the dropless base already prices
    "--moe-expert-capacity-factor": (MOE, "--moe-expert-capacity-factor 1.5"),
    # padded, the forward no longer stops the host (step/host.py syncs): it moves the step
    # where the GPU paces the attention side and the host the many small experts
    "--moe-pad-expert-input-to-capacity": (FINE + " --moe-expert-capacity-factor 1.0",
                                           "--moe-pad-expert-input-to-capacity"),
    "--moe-flex-dispatcher-backend": (MOE + " --moe-token-dispatcher-type flex "
                                      "--expert-tensor-parallel-size 1 --sequence-parallel",
                                      "--moe-flex-dispatcher-backend hybridep"),
    # HybridEP's permutation inside its kernels: its standalone permute / unpermute passes
    # go (ledger.step.eager.dispatch_pass_bytes)
    "--moe-permute-fusion-into-hybridep": (MOE + " --moe-token-dispatcher-type flex "
                                           "--expert-tensor-parallel-size 1 --sequence-parallel "
                                           "--moe-flex-dispatcher-backend hybridep",
                                           "--moe-permute-fusion-into-hybridep"),
    "--fine-grained-activation-offloading": ("--offload-modules core_attn",
                                            "--fine-grained-activation-offloading"),
    "--offload-modules": ("--fine-grained-activation-offloading --offload-modules core_attn",
                          "--offload-modules qkv_linear core_attn attn_proj"),
    "--activation-offload-fraction": ("--fine-grained-activation-offloading --offload-modules "
                                      "core_attn", "--activation-offload-fraction 0.5"),
    "--optimizer-cpu-offload": (PRECISION_AWARE, "--optimizer-cpu-offload"),
    "--optimizer-offload-fraction": (PRECISION_AWARE + " --optimizer-cpu-offload",
                                     "--optimizer-offload-fraction 0.5"),
    "--overlap-cpu-optimizer-d2h-h2d": (PRECISION_AWARE + " --optimizer-cpu-offload",
                                        "--overlap-cpu-optimizer-d2h-h2d"),
    # the shared experts beside the dispatcher's all-to-alls (step/layer_comms.py)
    "--moe-shared-expert-overlap": (MOE + " --moe-token-dispatcher-type alltoall "
                                    "--moe-shared-expert-intermediate-size 2048",
                                    "--moe-shared-expert-overlap"),
    # the DP gradient bucket: the number of step-end calls (step/dp.py buckets)
    "--ddp-bucket-size": ("--use-distributed-optimizer --overlap-grad-reduce",
                          "--ddp-bucket-size 1000000"),
    "--no-overlap-p2p-communication": ("--num-layers-per-virtual-pipeline-stage 2",
                                       "--no-overlap-p2p-communication"),
    # the output layer's inputs and logits' gradients kept to the flush (buffers.py)
    "--defer-embedding-wgrad-compute": ("", "--defer-embedding-wgrad-compute"),
    "--wgrad-deferral-limit": ("--defer-embedding-wgrad-compute",
                               "--wgrad-deferral-limit 1"),
    # the interleaved schedule's rounds: a longer warm-up holds more micro-batches
    "--microbatch-group-size-per-virtual-pipeline-stage": (
        "--num-layers-per-virtual-pipeline-stage 2",
        "--microbatch-group-size-per-virtual-pipeline-stage 4"),
    # the distributed optimizer sharded over dp / 2 (placement_config._shard_group)
    "--num-distributed-optimizer-instances": ("--use-distributed-optimizer",
                                              "--num-distributed-optimizer-instances 2"),
}
BLACKWELL = {"--fp4-format", "--fp4-param-gather"}
# modelled, but no one change of this base is valid on both sides
NOT_YET = {
    "--account-for-embedding-in-pipeline-split": "one more layer slot: valid only with a "
    "layer count the base cannot share; Llama 3 405B with and without it in "
    "tests/test_importers.py",
    "--account-for-loss-in-pipeline-split": "likewise (tests/test_importers.py)",
    "--no-position-embedding": "needs rope, under which there is no learned table to drop",
    "--bf16": "in every case's base; --fp16 is the change from it",
    "--tokenizer-type": "the base's NullTokenizer takes --vocab-size; a real tokenizer's "
    "vocabulary is read from its file (tests/test_launch_files.py's shipped launches)",
    "--tokenizer-model": "likewise",
    "--fp4-recipe": "priced only at nvfp4, its default (others are named as not modelled)",
    "--muon-num-ns-steps": "priced only at 5, Megatron's default (likewise)",
    "--muon-tp-mode": "priced only at duplicated, Megatron's default (likewise)",
    "--muon-scalar-optimizer": "priced only with adam, Megatron's default (likewise)",
    "--delay-wgrad-compute": "moves the step only where one dispatch lies between the "
    "experts' forward GEMMs and twice them (and the pair is not host-bound), which this "
    "small base is not; tests/test_overlap.py holds it",
}


# the estimate's echoes of its input, not priced figures: the launch's file name and the
# parallel config as read (a change there that prices nothing must not pass as a move)
ECHOES = ("model", "config")


def priced(tmp_path, flags: str, name: str, gpu: str = "h100-sxm"):
    """The estimate of a launch holding ``flags``, written as ``<name>/launch.sh``: both
    sides of a case share the file name the JSON echoes."""
    (tmp_path / name).mkdir()
    path = tmp_path / name / "launch.sh"
    path.write_text(flags + "\n")
    gpus = "64" if "--expert-model-parallel-size 64" in flags else "16"
    code, out, err = run(["estimate", "--from-megatron", str(path), "--gpus", gpus, "--json",
                          "--verbose", "--tokens", "1e10", "--gpu", gpu])
    return code, out, err


def test_every_modelled_flag_has_a_case():
    missing = sorted(MODELLED - set(CASES) - set(NOT_YET))
    assert missing == [], missing


@pytest.mark.parametrize("flag", sorted(CASES))
def test_an_applied_megatron_flag_moves_the_estimate(tmp_path, flag):
    context, change = CASES[flag]
    # --fp16 replaces the base's --bf16 (Megatron refuses both: arguments.py L1196)
    bare = BASE.replace(" --bf16", "") if "--fp16" in f"{context} {change}" else BASE
    base, gpu = f"{bare} {context}", "b200" if flag in BLACKWELL else "h100-sxm"
    code, before, err = priced(tmp_path, base, "base", gpu)
    assert code == 0, err
    code, after, err = priced(tmp_path, f"{base} {change}", "changed", gpu)
    assert code == 0, err
    assert flag in next(x for x in err.splitlines() if x.startswith("note: applied:"))
    before, after = json.loads(before), json.loads(after)
    assert before["model"] == after["model"]
    assert {k: v for k, v in after.items() if k not in ECHOES} != \
        {k: v for k, v in before.items() if k not in ECHOES}


@pytest.mark.parametrize("context,change", [
    # the dense MLP's GEMMs, not the attention core (micro-batches of 4 here too: at one
    # the host's two 3 ms blocks a layer pace it)
    ("--micro-batch-size 4 --global-batch-size 256", "--recompute-modules mlp"),
    # MLA's up projections; the MoE layer, its all-to-alls included (micro-batches of 4:
    # the GPU, not the host's launches, paces the layer)
    (f"{MLA} --micro-batch-size 4 --global-batch-size 256", "--recompute-modules mla_up_proj"),
    (f"{MOE} --micro-batch-size 4 --global-batch-size 256", "--recompute-modules moe"),
])
def test_recompute_modules_move_the_step_time(tmp_path, context, change):
    """--recompute-modules moves the step's time (the modules' forward again in the
    backward, ledger.step.recompute), not only its memory: against Megatron's default
    (core_attn), and the recomputed FLOPs with it (HFU); the dense MLP's forward is longer
    than the attention core's at s = 2048."""
    # wide enough that the GPU, not the host's launches, sets the pace
    base = f"{BASE} {context} --recompute-granularity selective --hidden-size 4096 " \
        "--ffn-hidden-size 16384 --num-attention-heads 32"
    code, before, err = priced(tmp_path, base, "base")
    assert code == 0, err
    code, after, err = priced(tmp_path, f"{base} {change}", "changed")
    assert code == 0, err
    before, after = json.loads(before), json.loads(after)
    assert after["step_time_s"] != pytest.approx(before["step_time_s"], rel=1e-6)
    assert after["hardware_tflops_per_gpu"] * after["step_time_s"] != pytest.approx(
        before["hardware_tflops_per_gpu"] * before["step_time_s"], rel=1e-6)
    if "mlp" in change:
        assert after["step_time_s"] > before["step_time_s"]


@pytest.mark.parametrize("context,flag,named", [
    # a non-gated MLP like the default gelu: nothing priced moves (reader.NO_EFFECT)
    ("", "--squared-relu", False),
    # the FSDP reduce-scatter's wire dtype and the MXFP8 all-gather's buffer: priced numbers
    # the ledger does not model, so named
    ("--use-megatron-fsdp", "--megatron-fsdp-grad-comm-dtype bf16", True),
    # at the main grads' dtype: no buffer of its own, the wire the ledger prices
    ("--use-megatron-fsdp --megatron-fsdp-main-grads-dtype bf16",
     "--megatron-fsdp-grad-comm-dtype bf16", False),
    ("--fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --use-distributed-optimizer",
     "--reuse-grad-buf-for-mxfp8-param-ag", True),
])
def test_flags_out_of_modelled_are_accepted_or_named(tmp_path, context, flag, named):
    """Flags the reader does not apply: silent where nothing priced moves, else named."""
    name = flag.split()[0]
    assert name not in MODELLED
    code, _, err = priced(tmp_path, f"{BASE} {context} {flag}", "launch", "b200")
    assert code == 0, err
    line = next(x for x in err.splitlines() if x.startswith("warning: not modelled")) \
        if named else next(x for x in err.splitlines() if x.startswith("note: accepted"))
    assert name in line
    assert not any(name in x for x in err.splitlines() if x.startswith("note: accepted")) \
        if named else True


@pytest.mark.parametrize("context,flag,named", [
    # Megatron-FSDP below optim_grads_params: its gradient buckets' pool, not priced
    ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads",
     "--fsdp-double-buffer", True),
    ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads", "--use-nccl-ub", True),
    # without Megatron-FSDP nothing reads fsdp_double_buffer; the DDP's buffers registered
    ("--use-distributed-optimizer", "--fsdp-double-buffer", False),
    ("--use-distributed-optimizer", "--use-nccl-ub", False),
])
def test_double_buffer_flags_outside_megatron_fsdps_zero3(tmp_path, context, flag, named):
    """The double-buffer flags are applied only where the ledger prices the buffers
    (Megatron-FSDP at optim_grads_params): named below it, silent without Megatron-FSDP."""
    code, _, err = priced(tmp_path, f"{BASE} {context} {flag}", "launch")
    assert code == 0, err
    lines = err.splitlines()
    warned = [x for x in lines if x.startswith("warning: not modelled")]
    accepted = next((x for x in lines if x.startswith("note: accepted")), "")
    applied = next(x for x in lines if x.startswith("note: applied"))
    assert (flag in "".join(warned), flag in accepted) == (named, not named)
    assert flag not in applied.split()


@pytest.mark.parametrize("flags,reason", [
    ("--swiglu --squared-relu", "--squared-relu with --swiglu (argument_utils.py:321)"),
    ("--fp16", "--fp16 with --bf16 (arguments.py:1196)"),
])
def test_launches_megatron_asserts_against_are_refused(tmp_path, flags, reason):
    code, _, err = priced(tmp_path, f"{BASE} {flags}", "launch")
    assert code == 2 and reason in err
