"""Megatron's recompute modules at d98e8a64 (transformer_config.py L560-583, asserted at
L1944-1962): core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts,
gdn_norm_out, gdp_in_proj, gdp_qkv, mhc. The CLI and the Megatron launch reader accept each
Megatron accepts; gdn_norm_out is priced (Gated DeltaNet's gated norm output dropped,
megatron/core/ssm/gated_delta_net/gdn.py L266-287), GatedDeltaProduct's and the
HyperConnections' are named on stderr as not priced and the figures marked approximate;
what Megatron refuses of them (moe_act without grouped GEMMs, L1964-1967; mla_up_proj
without multi-latent attention, L1969-1973; gdn_norm_out without Gated DeltaNet layers,
L1975-1981; mhc without --enable-mhc-connections or beside mlp, L2027-2035; an unknown
name) is refused by both, in one line from the CLI."""
import json
from pathlib import Path

import pytest

from ledger.arch.activations import layer_activations
from ledger.io import read_hf_config
from test_bad_input import run

QWEN3_NEXT = str(Path(__file__).parent / "fixtures" / "hf" / "released"
                 / "qwen3-next-80b-a3b-instruct.json")
# config.json: 48 layers, every 4th full attention (36 Gated DeltaNet), value heads 32 of
# 128 (value width 4,096); s = 4,096 at micro-batch 1
REPORT = ["report", QWEN3_NEXT, "--tp", "2", "--ep", "4", "--gpus", "8", "--recompute",
          "selective", "--json", "--recompute-modules"]
LAUNCH = ("--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --ffn-hidden-size 4096 "
          "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
          "--global-batch-size 64 --vocab-size 32000 --bf16 --tokenizer-type NullTokenizer "
          "--recompute-granularity selective")


def test_gdn_norm_out_drops_the_gated_norm_output_by_hand():
    """Per Gated DeltaNet layer and GPU: 4,096 values a token x 2 B x 4,096 tokens / tp 2."""
    m, _ = read_hf_config(QWEN3_NEXT)
    gdn = next(k for k in m.kind_counts if k.mixer == "linear")
    acts = [layer_activations(m, micro_batch=1, tp=2, kind=gdn, recompute="selective",
                              modules=mods).total_bytes for mods in ((), ("gdn_norm_out",))]
    assert acts[0] - acts[1] == 4096 * 2 * 4096 / 2
    attn = next(k for k in m.kind_counts if k.mixer == "attention")  # no GDN: nothing
    assert layer_activations(m, micro_batch=1, tp=2, kind=attn, recompute="selective",
                             modules=("gdn_norm_out",)).total_bytes == \
        layer_activations(m, micro_batch=1, tp=2, kind=attn, recompute="selective",
                          modules=()).total_bytes


def test_the_cli_prices_gdn_norm_out():
    code, before, err = run(REPORT + ["core_attn"])
    assert code == 0, err
    code, after, err = run(REPORT + ["core_attn,gdn_norm_out"])
    assert code == 0 and err == "", err
    drop = json.loads(before)["activation_bytes_per_layer"] \
        - json.loads(after)["activation_bytes_per_layer"]
    assert drop == 36 / 48 * 4096 * 2 * 4096 / 2  # the mean over the stack's 48 layers
    assert "approximate" not in json.loads(after)


# a small model with mHC's streams (custom --hc-mult; DeepSeek-V4's are 4)
MHC = ["custom", "--layers", "4", "--hidden", "1024", "--heads", "8", "--ffn", "4096",
       "--vocab", "32000", "--hc-mult", "4"]


@pytest.mark.parametrize("mods", ["gdp_in_proj", "gdp_qkv", "mhc", "core_attn,gdp_qkv"])
def test_the_cli_names_what_it_does_not_price(mods):
    model = MHC if "mhc" in mods else ["llama3-8b"]
    argv = ["estimate", *model, "--tp", "8", "--gpus", "8", "--recompute", "selective",
            "--json", "--recompute-modules"]
    code, out, err = run(argv + [mods])
    assert code == 0, err
    unpriced = ",".join(m for m in mods.split(",") if m != "core_attn")
    assert err.count("\n") == 1 and err.startswith("warning: not modelled")
    assert f"--recompute-modules {unpriced} " in err
    d = json.loads(out)
    assert len(d["approximate"]) == 1 and unpriced in d["approximate"][0]


def test_what_is_not_priced_is_priced_as_not_recomputed():
    argv = ["estimate", "llama3-8b", "--tp", "8", "--gpus", "8", "--recompute", "selective",
            "--json", "--recompute-modules"]
    with_them = json.loads(run(argv + ["core_attn,gdp_in_proj,gdp_qkv"])[1])
    without = json.loads(run(argv + ["core_attn"])[1])
    assert {k: v for k, v in with_them.items() if k not in ("approximate", "config")} == \
        {k: v for k, v in without.items() if k != "config"}
    argv[1:2] = MHC
    with_them = json.loads(run(argv + ["core_attn,mhc"])[1])
    without = json.loads(run(argv + ["core_attn"])[1])
    assert {k: v for k, v in with_them.items() if k not in ("approximate", "config")} == \
        {k: v for k, v in without.items() if k != "config"}


@pytest.mark.parametrize("argv,shown", [
    (["report", "llama3-8b", "--recompute", "selective", "--recompute-modules",
      "gdn_norm_out"], "gdn_norm_out needs Gated DeltaNet layers"),
    (["report", "llama3-8b", "--recompute", "selective", "--recompute-modules", "mhc,mlp"],
     "mhc with mlp"),
    (["report", "llama3-8b", "--recompute", "selective", "--recompute-modules", "bogus"],
     "not among core_attn"),
    # mHC is modelled (--hc-mult): a model without its streams has no HyperConnections
    (["report", "llama3-8b", "--recompute", "selective", "--recompute-modules", "mhc"],
     "mhc needs HyperConnections"),
    (["plan", "llama3-8b", "--gpus", "8", "--global-batch", "64", "--recompute-modules",
      "mhc"], "mhc needs HyperConnections"),
])
def test_the_cli_refuses_what_megatron_refuses(argv, shown):
    code, out, err = run(argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and shown in err, err
    assert "Traceback" not in err


def estimate_launch(tmp_path, flags: str):
    """``estimate --from-megatron`` on LAUNCH with ``flags`` on 8 GPUs: (code, stderr)."""
    path = tmp_path / "launch.sh"
    path.write_text(f"{LAUNCH} {flags}\n")
    code, _, err = run(["estimate", "--from-megatron", str(path), "--gpus", "8"])
    return code, err


@pytest.mark.parametrize("flags,refused", [
    ("--recompute-modules mhc", "mhc needs HyperConnections"),
    ("--recompute-modules mhc mlp --enable-mhc-connections", "mhc with mlp"),
    ("--recompute-modules core_attn gdn_norm_out", "gdn_norm_out needs Gated DeltaNet"),
    ("--recompute-modules bogus", "bogus not among"),
    ("--recompute-modules mhc --enable-mhc-connections", None),
    ("--recompute-modules core_attn gdp_in_proj gdp_qkv", None),
    ("--experimental-attention-variant gdn --recompute-modules gdn_norm_out", None),
])
def test_the_reader_reads_them_as_megatron_does(tmp_path, flags, refused):
    code, err = estimate_launch(tmp_path, flags)
    if refused:
        assert code == 2 and "Megatron would refuse this launch" in err and refused in err
    else:  # accepted; what the reader does not build is named, the figures approximate
        assert code == 0, err
        line = next(x for x in err.splitlines() if x.startswith("warning: not modelled"))
        assert "--recompute-modules" in line and "priced as not recomputed" in line


def test_the_planner_refuses_gdn_norm_out_without_gated_deltanet():
    code, out, err = run(["plan", "llama3-8b", "--gpus", "8", "--global-batch", "64",
                          "--recompute-modules", "gdn_norm_out"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: recompute_modules: gdn_norm_out needs Gated DeltaNet")


# Megatron's two module checks that need the model (transformer_config.py @d98e8a64):
# moe_act only with moe_grouped_gemm (L1964-1967), mla_up_proj only with
# multi_latent_attention (L1969-1973). The CLI's MoE runs its routed experts as grouped
# GEMMs (ledger.placement.buffers), so there moe_act needs routed experts.
@pytest.mark.parametrize("model,mods,shown", [
    ("llama3-8b", "mla_up_proj", "mla_up_proj needs multi-latent attention"),
    ("mixtral-8x7b", "core_attn,mla_up_proj", "mla_up_proj needs multi-latent attention"),
    ("llama3-8b", "moe_act", "moe_act needs grouped GEMMs"),
])
def test_the_cli_refuses_module_the_model_lacks(model, mods, shown):
    for cmd in (["report", model, "--recompute", "selective"],
                ["plan", model, "--gpus", "8", "--global-batch", "64"]):
        code, out, err = run(cmd + ["--recompute-modules", mods])
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert err.startswith(f"error: recompute_modules: {shown}") and mods in err, err


def test_the_cli_takes_them_where_the_model_has_them():
    code, _, err = run(["report", "deepseek-v3", "--tp", "1", "--ep", "64", "--pp", "16",
                        "--gpus", "2048", "--global-batch", "15360", "--recompute", "selective", "--json",
                        "--recompute-modules", "mla_up_proj,moe_act"])
    assert code == 0 and err == "", err


MOE_LAUNCH = "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2"
MLA_LAUNCH = "--multi-latent-attention --kv-lora-rank 256 --qk-head-dim 64 " \
    "--qk-pos-emb-head-dim 32 --v-head-dim 64"


@pytest.mark.parametrize("flags,refused", [
    ("--recompute-modules mla_up_proj", "mla_up_proj needs multi-latent attention"),
    ("--recompute-modules moe_act", "moe_act needs grouped GEMMs"),
    (f"{MOE_LAUNCH} --recompute-modules moe_act", "moe_act needs grouped GEMMs"),
    (f"{MOE_LAUNCH} --moe-grouped-gemm --recompute-modules moe_act", None),
    (f"{MLA_LAUNCH} --recompute-modules mla_up_proj", None),
    # Megatron checks them under selective recompute only (L1943)
    ("--recompute-modules mla_up_proj moe_act --recompute-granularity full", None),
])
def test_the_reader_refuses_them_as_megatron_does(tmp_path, flags, refused):
    code, err = estimate_launch(tmp_path, flags)
    if refused:
        assert code == 2 and "Megatron would refuse this launch" in err and refused in err
        assert err.count("\n") == 1, err
    else:
        assert code == 0, err


# Megatron refuses moe_act and layernorm recompute under FP8 delayed scaling
# (transformer_config.py L2000-2006 @d98e8a64: fp8 set and fp8_recipe == 'delayed', the
# default recipe, L594-596); current scaling, MXFP8 and blockwise take them, and FP4 and BF16
# runs are not checked there.
@pytest.mark.parametrize("argv,refused", [
    (["report", "llama3-8b", "--precision", "fp8", "--recompute", "selective",
      "--recompute-modules", "core_attn,layernorm"], "layernorm"),
    (["report", "mixtral-8x7b", "--precision", "fp8", "--fp8-recipe", "delayed", "--recompute",
      "selective", "--recompute-modules", "moe_act,layernorm"], "moe_act and layernorm"),
    (["plan", "mixtral-8x7b", "--gpus", "64", "--global-batch", "256", "--precision", "fp8",
      "--recompute-modules", "moe_act"], "moe_act"),
    (["report", "mixtral-8x7b", "--precision", "fp8", "--fp8-recipe", "tensorwise",
      "--recompute", "selective", "--recompute-modules", "moe_act,layernorm"], None),
    (["report", "mixtral-8x7b", "--precision", "fp8", "--fp8-recipe", "mxfp8",
      "--recompute", "selective", "--recompute-modules", "moe_act,layernorm"], None),
    (["report", "mixtral-8x7b", "--precision", "fp4", "--recompute", "selective",
      "--recompute-modules", "moe_act,layernorm"], None),
    (["report", "mixtral-8x7b", "--recompute", "selective", "--recompute-modules",
      "moe_act,layernorm"], None),
])
def test_the_cli_refuses_fp8_delayed_scaling_with_moe_act_or_layernorm(argv, refused):
    code, out, err = run(argv + ["--json"] * (argv[0] == "report"))
    if refused is None:
        assert code == 0, err
        return
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    mods = argv[argv.index("--recompute-modules") + 1]
    assert err.startswith(f"error: recompute_modules: {refused} cannot be recomputed under "
                          f"FP8 delayed scaling"), err
    assert f"got --recompute-modules {mods} with --fp8-recipe delayed" in err, err


@pytest.mark.parametrize("flags,refused", [
    ("--fp8-format hybrid --recompute-modules layernorm", "layernorm cannot be recomputed"),
    (f"--fp8-format e4m3 --fp8-recipe delayed {MOE_LAUNCH} --moe-grouped-gemm "
     "--recompute-modules moe_act", "moe_act cannot be recomputed"),
    ("--fp8-format hybrid --fp8-recipe tensorwise --recompute-modules layernorm", None),
    ("--fp8-format hybrid --fp8-recipe blockwise --recompute-modules layernorm", None),
    ("--recompute-modules layernorm", None),  # BF16
    # Megatron checks them under selective recompute only (L1942)
    ("--fp8-format hybrid --recompute-modules layernorm --recompute-granularity full", None),
])
def test_the_reader_refuses_fp8_delayed_scaling_with_moe_act_or_layernorm(tmp_path, flags,
                                                                          refused):
    code, err = estimate_launch(tmp_path, flags)
    if refused:
        assert code == 2 and err.count("\n") == 1, err
        assert "Megatron would refuse this launch" in err and refused in err, err
        assert "FP8 delayed scaling" in err and "L2000-2006" in err, err
    else:
        assert code == 0, err
