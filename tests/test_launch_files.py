"""Every launch file the frameworks ship, read whole (tests/fixtures/launch/SOURCES.md):
the 34 job TOMLs of torchtitan v0.1.0 and 238fa99 and the 28 Megatron-LM pretrain_gpt.py
launches at d98e8a6. Each decoder-LM file is held to the model and placement it states
(read by hand from the file); each file its own framework refuses, and each non-LM model,
is refused with the framework's reason. Expected parameter counts are Meta's released
Llama 3 counts, the published gpt-oss counts (OpenAI model card: 20.91B / 116.83B), or
the publishers' rounded totals."""
import json
import os
from pathlib import Path

import pytest

from ledger.cli import main
from ledger.io.megatron.args import parse, table
from ledger.io.shell.run import commands

HERE = Path(__file__).parent / "fixtures" / "launch"
MEG, TITAN = HERE / "megatron", HERE / "torchtitan"
LLAMA3 = {"8B": 8_030_261_248, "70B": 70_553_706_496, "405B": 405_853_388_800}
MODELOPT = "MLM_SKIP_INSTALL=1 MLM_MODEL_CKPT=/ckpt BLEND_PATH=/blend.json " \
           "examples/post_training/modelopt/train.sh"


def run(*argv, cwd=MEG):
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


# ---- the bash reader against bash ------------------------------------------------------
# expanded/*.argv: what bash handed pretrain_gpt.py (tools/expand_launch.sh, SOURCES.md)
SHELL_CASES = {
    "examples__gpt3__train_gpt3_175b_distributed": (
        "examples/gpt3/train_gpt3_175b_distributed.sh", ["CKPT", "TB", "VOCAB", "MERGE", "DATA"],
        {}),
    "examples__mixtral__train_mixtral_8x7b_distributed": (
        "examples/mixtral/train_mixtral_8x7b_distributed.sh", ["CKPT", "TOKMODEL", "DATA"], {}),
    "block__moe_README__mixtral_8x7b": ("blocks/moe_README__mixtral_8x7b.sh",
                                        ["CKPT", "TOKMODEL", "DATA"], {}),
    "examples__gptoss__02_train": ("examples/gptoss/02_train.sh",
                                   ["--checkpoint-path", "ckpt"], {"PWD": "/tmp/mlm"}),
    "examples__llama__train_llama3_8b_h100_fp8": (
        "examples/llama/train_llama3_8b_h100_fp8.sh", [], {"PWD": "/tmp/mlm"}),
    "examples__megatron_fsdp__train_llama3_8b_fsdp_h100_fp8": (
        "examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh", [], {"PWD": "/tmp/mlm"}),
    "examples__megatron_fsdp__sbatch_mfsdp_deepseek_v3": (
        "examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh", [], {}),
    "block__parallelism-guide__llama3_70b": ("blocks/parallelism-guide__llama3_70b.sh", [], {}),
    "block__training-examples__custom_llama": ("blocks/training-examples__custom_llama.sh",
                                               [], {}),
    "block__training-examples__gpt3": ("blocks/training-examples__gpt3.sh", [], {}),
}
for _argv in sorted((MEG / "expanded").glob("modelopt__*.argv")):
    _key = _argv.stem[len("modelopt__"):]
    _env = {"MLM_SKIP_INSTALL": "1", "MLM_MODEL_CKPT": "/ckpt", "BLEND_PATH": "/blend.json"}
    if _key.endswith("__TP8_ETP1_EP64"):
        _key = _key[:-len("__TP8_ETP1_EP64")]
        _env |= {"TP": "8", "ETP": "1", "EP": "64"}
    _org, _model = _key.split("_", 1)
    SHELL_CASES[_argv.stem] = ("examples/post_training/modelopt/train.sh", [f"{_org}/{_model}"],
                               _env)


@pytest.mark.parametrize("name", sorted(SHELL_CASES))
def test_scripts_read_as_bash_runs_them(name):
    path, args, env = SHELL_CASES[name]
    found, _ = commands((MEG / path).read_text(), str(MEG / path), args, env)
    words = found[0]
    k = next(i for i, w in enumerate(words) if os.path.basename(w) == "pretrain_gpt.py")
    assert words[k + 1:] == (MEG / "expanded" / f"{name}.argv").read_text().splitlines()


def test_shell_reader_by_hand():
    text = ('A=${X:-2}\nB=( --a "$A" "--b c" )\nB+=( --d )\nif [[ "$A" == 2 ]]; then C=yes; '
            'else C=no; fi\ncase $C in y*) D=1 ;; *) D=0 ;; esac\n'
            'torchrun --nproc_per_node=$((A * 4)) pretrain_gpt.py "${B[@]}" ${B[@]} --e $D $1\n')
    found, _ = commands(text, "t.sh")
    assert found == [["torchrun", "--nproc_per_node=8", "pretrain_gpt.py", "--a", "2", "--b c",
                      "--d", "--a", "2", "--b", "c", "--d", "--e", "1", "<$1>"]]


# ---- the argument table against hand-read source lines ---------------------------------
@pytest.mark.parametrize("flag,row", [
    ("--recompute-activations", {"takes_value": False, "action": "store_true", "line": 2869}),
    ("--use-rotary-position-embeddings", {"takes_value": False, "line": 2415}),
    ("--no-position-embedding", {"action": "store_false", "dest": "add_position_embedding",
                                 "line": 2437}),
    ("--make-vocab-size-divisible-by", {"type": "int", "default": 128, "line": 2441}),
    ("--data-path", {"nargs": "*", "default": None, "line": 3255}),
    ("--moe-layer-freq", {"type": "moe_freq_type", "default": 1, "line": 3520}),
    ("--vocab-size", {"default": None, "field": "megatron/training/config/training_config.py:679"}),
    ("--swiglu", {"takes_value": False, "line": 2450}),
])
def test_argument_table_rows(flag, row):
    """Rows of the generated table, each against megatron/training/arguments.py (and the
    dataclass field) at d98e8a6 as read by hand."""
    got = table()["flags"][flag]
    assert {k: got.get(k) for k in row} == row
    assert table()["commit"] == "d98e8a64ddf34856e74b24714e3bedb2f5a39553"


def test_layer_pattern_is_evaluated_not_eval():
    p = parse(["--moe-layer-freq", "[0]*3+[1]*58"], "x")
    assert p.values["moe_layer_freq"] == [0, 0, 0] + [1] * 58
    bad = parse(["--moe-layer-freq", "__import__('os')"], "x")
    assert bad.bad and "invalid moe_freq_type value" in bad.bad[0][1]
    huge = parse(["--moe-layer-freq", "[0]*99999999"], "x")
    assert huge.bad  # bounded: at most 2^16 entries


# ---- every Megatron launch -------------------------------------------------------------
# launch, flags beside it, expected: params (exact or (value, rel)), then the placement
# read from the file: tp pp cp ep etp dp zero recompute micro global seq precision
MEGATRON = {
    "llama3_8b_fp8": ("examples/llama/train_llama3_8b_h100_fp8.sh", [],
                      (LLAMA3["8B"], (1, 1, 1, 1, 1, 8, 1, "none", 1, 128, 8192,
                                      "fp8-delayed+param-gather"))),
    "mfsdp_llama3_8b": ("examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh", [],
                        (LLAMA3["8B"], (1, 1, 1, 1, 1, 8, 3, "none", 1, 128, 8192,
                                        "fp8-delayed+param-gather"))),
    "mfsdp_deepseek_v3": ("examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh",
                          ["--vocab-size", "128815", "--gpus", "256"],
                          ((671e9, 0.001), (1, 1, 1, 8, 1, 256, 3, "selective", 4, 2048, 4096,
                                            "bf16"))),
    "mixtral_32": ("SLURM_NNODES=4 examples/mixtral/train_mixtral_8x7b_distributed.sh c t d",
                   ["--vocab-size", "32000"],
                   ((46.7e9, 0.001), (1, 4, 1, 8, 1, 8, 1, "none", 1, 256, 4096, None))),
    "moe_readme_mixtral": ("blocks/moe_README__mixtral_8x7b.sh c t d", ["--vocab-size", "32000"],
                           ((46.7e9, 0.001), (1, 4, 1, 8, 1, 8, 1, "none", 1, 128, 4096,
                                              None))),
    "qwen2.5_0.5b": (f"{MODELOPT} Qwen/Qwen2.5-0.5B-Instruct", [],
                     ((0.49e9, 0.01), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "qwen2.5_7b": (f"{MODELOPT} Qwen/Qwen2.5-7B-Instruct", [],
                   ((7.62e9, 0.001), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "qwen3_0.6b": (f"{MODELOPT} Qwen/Qwen3-0.6B", ["--vocab-size", "151669"],
                   ((0.6e9, 0.01), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "qwen3_8b": (f"{MODELOPT} Qwen/Qwen3-8B", ["--vocab-size", "151669"],
                 ((8.19e9, 0.001), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "qwen3_30b": (f"{MODELOPT} Qwen/Qwen3-30B-A3B", ["--vocab-size", "151669"],
                  ((30.5e9, 0.002), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "qwen3_235b": (f"{MODELOPT} Qwen/Qwen3-235B-A22B", ["--vocab-size", "151669"],
                   ((235e9, 0.001), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "deepseek_r1": (f"{MODELOPT} deepseek-ai/DeepSeek-R1", ["--vocab-size", "128815"],
                    ((671e9, 0.001), (1, 1, 1, 1, 1, 1, 1, "selective", 1, 1, 4096, None))),
    "deepseek_v2_lite": (f"{MODELOPT} deepseek-ai/DeepSeek-V2-Lite", ["--vocab-size", "100002"],
                         ((15.7e9, 0.002), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 1024, None))),
    "llama3.1_8b": (f"{MODELOPT} meta-llama/Llama-3.1-8B-Instruct", ["--vocab-size", "128256"],
                    (LLAMA3["8B"], (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "llama3.2_1b": (f"{MODELOPT} meta-llama/Llama-3.2-1B-Instruct", ["--vocab-size", "128256"],
                    ((1.23e9, 0.005), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "llama4_scout": (f"{MODELOPT} meta-llama/Llama-4-Scout-17B-16E-Instruct", [],
                     ((107.8e9, 0.001), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "llama4_maverick": (f"{MODELOPT} meta-llama/Llama-4-Maverick-17B-128E-Instruct", [],
                        ((400e9, 0.002), (1, 1, 1, 1, 1, 1, 1, "selective", 1, 1, 2048,
                                          None))),
    "kimi_k2": (f"{MODELOPT} moonshotai/Kimi-K2-Instruct", [],
                ((1.026e12, 0.001), (1, 1, 1, 1, 1, 1, 1, "selective", 1, 1, 4096, None))),
    "kimi_k2_tp8_ep64": (f"TP=8 ETP=1 EP=64 {MODELOPT} moonshotai/Kimi-K2-Instruct", [],
                         ((1.026e12, 0.001), (8, 1, 1, 64, 1, 8, 1, "selective", 1, 8, 4096,
                                              None))),
    "nemotron_mini_4b": (f"{MODELOPT} nvidia/Nemotron-Mini-4B-Instruct", ["--vocab-size", "256000"],
                         ((4.19e9, 0.002), (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    # gpt-oss: the published counts, plus the learned position table Megatron builds for the
    # modelopt confs (no --position-embedding-type: learned_absolute, 40960 x 2880 rows),
    # less the router biases Megatron's TopKRouter does not have (layers x experts)
    "gpt_oss_20b": (f"{MODELOPT} openai/gpt-oss-20b", [],
                    (20_914_757_184 + 40960 * 2880 - 24 * 32,
                     (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
    "gpt_oss_120b": (f"{MODELOPT} openai/gpt-oss-120b", [],
                     (116_829_156_672 + 40960 * 2880 - 36 * 128,
                      (1, 1, 1, 1, 1, 1, 1, "none", 1, 1, 4096, None))),
}


@pytest.mark.parametrize("name", sorted(MEGATRON))
def test_megatron_launches_read_as_they_say(name):
    launch, extra, (params, placement) = MEGATRON[name]
    code, out, err = run("report", "--from-megatron", launch, *extra, "--json")
    assert code == 0, err
    d = json.loads(out)
    c = d["config"]
    if isinstance(params, tuple):
        assert abs(d["params"] / params[0] - 1) < params[1], d["params"]
    else:
        assert d["params"] == params
    got = (c["tp"], c["pp"], c["cp"], c["ep"], c["etp"], c["dp"], c["zero_stage"],
           c["recompute"], c["micro_batch"], c["micro_batch"] * c["num_microbatches"] * c["dp"],
           d["seq_len"], c["precision"])
    assert got == placement


NO_VOCAB = "--tokenizer-type GPT2BPETokenizer (pretrain_gpt.py's default) with --vocab-file"
MEGATRON_REFUSED = {  # Megatron itself refuses these as shipped (reason, source)
    "examples/gpt3/train_gpt3_175b_distributed.sh c t v m d": (
        "unrecognized arguments: 2.4B:320",
        "--step-batch-size-schedule with --global-batch-size",
        "world 8 is not divisible by tp(8) x pp(16)"),
    "examples/mixtral/train_mixtral_8x7b_distributed.sh c t d": (
        "world 8 is not divisible by etp(1) x ep(8) x pp(4)",),
    "examples/gptoss/02_train.sh": ("12 layer slots (12 layers) do not divide over pp(8)",),
    "blocks/parallelism-guide__llama3_70b.sh": ("no --max-position-embeddings",),
    # no --tokenizer-type: pretrain_gpt.py's GPT2BPETokenizer (PRETRAIN_GPT_DEFAULTS), whose
    # size its --vocab-file holds
    "blocks/training-examples__custom_llama.sh": (NO_VOCAB,),
    "blocks/training-examples__gpt3.sh": (NO_VOCAB,),
    "blocks/gpt3_README__345M.txt": ("no --max-position-embeddings",),
    "blocks/gpt3_README__857M.txt": ("no --max-position-embeddings",),
}


@pytest.mark.parametrize("launch", sorted(MEGATRON_REFUSED))
def test_megatron_launches_megatron_refuses(launch):
    code, out, err = run("report", "--from-megatron", launch)
    assert code == 2 and out == "" and err.count("\n") == 1
    for needle in MEGATRON_REFUSED[launch]:
        assert needle in err, err


def test_every_megatron_launch_is_counted():
    """28 launches: 20 files read (21 runs with Kimi's TP8/EP64 overlay; Mixtral at 32 GPUs
    is its README's run), 8 refused as Megatron refuses them."""
    shipped = {p.relative_to(MEG).as_posix() for p in MEG.rglob("*")
               if p.suffix in (".sh", ".txt") and "expanded" not in p.parts
               and p.name not in ("train.sh", "arguments.sh", "kimi_k2_instruct.sh",
                                  "kimi_k2_instruct_export.sh", "moe_README__env.sh")}
    named = {MEGATRON[k][0].split()[-2] if "modelopt" in MEGATRON[k][0] else None
             for k in MEGATRON}
    confs = {p for p in shipped if "/conf/" in p}
    assert len(shipped) == 28 and len(confs) == 16
    assert {f"{p.split('/conf/')[1][:-3]}" for p in confs} <= \
        {MEGATRON[k][0].split()[-1] for k in MEGATRON}
    assert named  # the modelopt runs go through train.sh, as the confs are meant to
    read = len(confs) + 4  # + llama3 fp8, mfsdp llama3, mfsdp deepseek, MoE README
    assert (read, len(MEGATRON_REFUSED)) == (20, 8) and read + len(MEGATRON_REFUSED) == 28


def test_megatron_fsdp_double_buffer_is_applied_and_planned_as_reported():
    """examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh runs --use-nccl-ub and
    --fsdp-double-buffer (L122-123): report applies them as the ledger's Megatron-FSDP
    double buffers (no flag left unmodelled), and plan, pinned to the file's placement,
    prices that placement's memory to the byte as report does."""
    f = MEGATRON["mfsdp_llama3_8b"][0]
    code, out, err = run("report", "--from-megatron", f, "--json", "--verbose")
    assert code == 0 and "not modelled" not in err, err
    applied = next(x for x in err.splitlines() if x.startswith("note: applied"))
    assert "--use-nccl-ub" in applied and "--fsdp-double-buffer" in applied
    report = json.loads(out)
    kept = report["memory"]["kept"]
    assert report["config"]["fsdp_double_buffer"] and not report.get("approximate")
    # two layers' gathered params (FP8: 1 B each) and grads (fp32 main grads: 4 B each):
    # Llama 3 8B's layer is 218,112,000 params (4096 x (6144 + 4096 + 2 x 14336 + 14336)
    # GEMM weights + 2 x 4096 norms)
    layer = 4096 * (6144 + 4096 + 3 * 14336) + 2 * 4096
    assert (kept["Megatron-FSDP param double buffer"],
            kept["Megatron-FSDP grad double buffer"]) == (2 * layer * 1, 2 * layer * 4)
    code, out, err = run("plan", "--from-megatron", f, "--tp", "1", "--cp", "1", "--pp", "1",
                         "--zero", "3", "--micro-batch", "1", "--recompute", "none",
                         "--schedule", "1f1b", "--json")
    assert code == 0 and "not modelled" not in err, err
    row = json.loads(out)["plans"][0]
    assert {k: row[k] for k in report["config"] if k in row} == \
        {k: v for k, v in report["config"].items() if k in row}
    assert row["memory_bytes"] == report["memory"]["required"]


# ---- every torchtitan TOML -------------------------------------------------------------
# expected: params, then tp pp cp ep dp zero recompute micro global seq precision at 64 GPUs
TOMLS = {
    "238fa9953e/torchtitan/models/llama3/train_configs/llama3_8b.toml":
        (LLAMA3["8B"], (1, 1, 1, 1, 64, 3, "selective", 1, 64, 8192, None)),
    "238fa9953e/torchtitan/models/llama3/train_configs/llama3_70b.toml":
        (LLAMA3["70B"], (8, 1, 1, 1, 8, 3, "full", 8, 64, 8192, None)),
    "f7084fc785/torchtitan/models/llama3/train_configs/llama3_8b.toml":
        (LLAMA3["8B"], (1, 1, 1, 1, 64, 3, "selective", 1, 64, 8192, None)),
    "f7084fc785/torchtitan/models/llama3/train_configs/llama3_70b.toml":
        (LLAMA3["70B"], (8, 1, 1, 1, 8, 3, "full", 8, 64, 8192, None)),
    "f7084fc785/torchtitan/models/llama3/train_configs/llama3_405b.toml":  # 'float8' at v0.1.0
        (LLAMA3["405B"], (8, 1, 1, 1, 8, 3, "full", 2, 16, 8192, "fp8+param-gather")),
    "238fa9953e/torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml":
        ((15.7e9, 0.002), (1, 1, 1, 8, 64, 3, "selective", 4, 256, 4096, None)),
    "238fa9953e/torchtitan/models/deepseek_v3/train_configs/deepseek_v3_671b.toml":
        ((671e9, 0.001), (1, 1, 1, 1, 64, 3, "selective", 4, 256, 4096, None)),
    "238fa9953e/torchtitan/models/llama4/train_configs/llama4_17bx16e.toml":
        ((107.8e9, 0.001), (8, 1, 1, 1, 8, 3, "full", 8, 64, 8192, None)),
    "238fa9953e/torchtitan/models/llama4/train_configs/llama4_17bx128e.toml":
        ((400.7e9, 0.001), (8, 4, 1, 1, 2, 3, "full", 1, 2, 8192, None)),
    "238fa9953e/torchtitan/models/qwen3/train_configs/qwen3_32b.toml":
        ((32.8e9, 0.002), (1, 1, 1, 1, 64, 3, "full", 2, 128, 4096, None)),
    "238fa9953e/torchtitan/models/qwen3/train_configs/qwen3_0.6b.toml":
        ((0.6e9, 0.01), (1, 1, 1, 1, 64, 3, "selective", 4, 256, 4096, None)),
}
TITAN_REFUSED = {
    "238fa9953e/torchtitan/models/llama3/train_configs/llama3_405b.toml":
        "model.converters ['float8'] are not registered at torchtitan 238fa9953e",
    "f7084fc785/torchtitan/experiments/deepseek_v3/train_configs/deepseek_v2.toml":
        "model.name 'deepseek_v2' is not a registered train spec",
    "238fa9953e/torchtitan/experiments/transformers_modeling_backend/configs/full.toml":
        "[hf_transformers] are not JobConfig fields",
    "238fa9953e/torchtitan/experiments/transformers_modeling_backend/configs/debug_model.toml":
        "[hf_transformers] are not JobConfig fields",
    "238fa9953e/torchtitan/experiments/vlm/train_configs/debug_model.toml": "not a decoder LM",
}


@pytest.mark.parametrize("name", sorted(TOMLS))
def test_torchtitan_tomls_read_as_they_say(name):
    params, placement = TOMLS[name]
    extra = ["--vocab-size", "128256"] if name.startswith("f7084") else []
    code, out, err = run("report", "--from-torchtitan", str(TITAN / name), "--gpus", "64",
                         *extra, "--json")
    assert code == 0, err
    d = json.loads(out)
    c = d["config"]
    if isinstance(params, tuple):
        assert abs(d["params"] / params[0] - 1) < params[1], d["params"]
    else:
        assert d["params"] == params
    got = (c["tp"], c["pp"], c["cp"], c["ep"], c["dp"], c["zero_stage"], c["recompute"],
           c["micro_batch"], c["micro_batch"] * c["num_microbatches"] * c["dp"], d["seq_len"],
           c["precision"])
    assert got == placement


def test_every_torchtitan_toml_reads_or_is_refused_for_its_reason():
    """34 TOMLs: 23 decoder LMs read; 11 refused: 6 FLUX and 1 VLM (not decoder LMs), and 4
    that torchtitan refuses (405B's 'float8' at 238fa99, v0.1.0's deepseek_v2, the two
    transformers-backend files without their --job.custom_config_module)."""
    files = sorted(p.relative_to(TITAN).as_posix() for p in TITAN.rglob("*.toml"))
    read, refused = [], []
    for name in files:
        code, _, err = run("report", "--from-torchtitan", str(TITAN / name), "--gpus", "64",
                           *(["--vocab-size", "128256"] if name.startswith("f7084") else []))
        (read if code == 0 else refused).append(name)
        if name in TITAN_REFUSED:
            assert code == 2 and TITAN_REFUSED[name] in err, err
        if "/flux/" in name:
            assert code == 2 and "FLUX is a diffusion model, not a decoder LM" in err
    assert (len(files), len(read), len(refused)) == (34, 23, 11)


def test_v010_vocabulary_comes_from_the_tokenizer():
    name = TITAN / "f7084fc785/torchtitan/models/llama3/train_configs/llama3_8b.toml"
    code, _, err = run("report", "--from-torchtitan", str(name), "--gpus", "64")
    assert code == 2 and "give its size with --vocab-size N beside the file" in err


def test_pretrain_gpt_tokenizer_default():
    """No --tokenizer-type: pretrain_gpt.py hands Megatron's parser GPT2BPETokenizer
    (pretrain_gpt.py L525-528 @d98e8a64, set where the launch leaves it None: arguments.py
    L657-666), whose size its --vocab-file holds: given beside the file, GPT-2's 50,257
    tokens pad to a multiple of 128 x tp(2) = 50,432 rows of 2,048."""
    launch = str(MEG / "blocks/training-examples__gpt3.sh")
    code, out, err = run("report", "--from-megatron", launch, "--vocab-size", "50257",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["param_breakdown"]["embedding"] == 50432 * 2048
