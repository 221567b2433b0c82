"""--from-megatron and --from-torchtitan: the model and placement a launch config gives,
checked against hand counts and the published Llama 3 8B count; what they cannot
express is refused by name."""
import contextlib
import io
import json

import pytest

from ledger.cli import main

LLAMA3_8B = 8_030_261_248  # Meta's released checkpoint (safetensors total)

MEGATRON_8B = """\
# Llama 3 8B, as a launch script passes it
torchrun --nproc_per_node 8 pretrain_gpt.py \\
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \\
    --num-attention-heads 32 --group-query-attention --num-query-groups 8 \\
    --seq-length 8192 --max-position-embeddings 8192 \\
    --position-embedding-type rope --swiglu --normalization RMSNorm \\
    --disable-bias-linear --untie-embeddings-and-output-weights \\
    --tokenizer-type NullTokenizer --vocab-size 128256 \\
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \\
    --sequence-parallel --use-distributed-optimizer \\
    --micro-batch-size 1 --global-batch-size=128 --lr 3e-4 --bf16 {extra} # lr: no byte
"""


def megatron(extra: str = "") -> str:
    return MEGATRON_8B.replace("{extra}", extra)


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_megatron_llama3_8b(tmp_path):
    f = write(tmp_path, "llama.sh", megatron())
    code, out, err = run("report", "--from-megatron", f, "--gpus", "64", "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["params"] == LLAMA3_8B and d["seq_len"] == 8192
    c = d["config"]
    # dp = 64 / (tp 2 * pp 2) = 16; m = 128 / (16 * 1) = 8; distributed optimizer = ZeRO-1
    assert (c["tp"], c["pp"], c["dp"], c["num_microbatches"], c["zero_stage"]) == \
        (2, 2, 16, 8, 1)
    assert c["sequence_parallel"] and d["framework"] == "megatron"


def test_megatron_defaults_by_hand(tmp_path):
    """GPT defaults: LayerNorm with bias, biased linears, 4h GELU MLP, tied embeddings,
    learned positions, vocab padded to 128. h = 64, 2 layers, s = 128, V = 100 -> 128:
    embedding 128*64 + positions 128*64 = 16384; per layer qkv 3*64*64 + 192, proj
    64*64 + 64, MLP 2*64*256 + 256 + 64, two LayerNorms 256: 49984; final norm 128.
    Total 16384 + 2*49984 + 128 = 116480."""
    f = write(tmp_path, "gpt.args", "--num-layers 2 --hidden-size 64 --num-attention-heads 4\n"
                                    "--seq-length 128 --max-position-embeddings 128 "
                                    "--tokenizer-type NullTokenizer --vocab-size 100 "
                                    "--micro-batch-size 1\n")
    code, out, _ = run("report", "--from-megatron", f, "--json")
    d = json.loads(out)
    assert code == 0 and d["params"] == 116_480
    assert not d["config"]["sequence_parallel"]  # Megatron's default is off


def test_megatron_swiglu_default_width(tmp_path):
    """--swiglu without --ffn-hidden-size: int(4h * 2/3 / 64) * 64 = 10880 at h = 4096;
    then params = embedding + output 2*4096*V + per layer 4*4096^2 + 3*4096*10880 + 2*4096
    (two RMSNorms), + final norm."""
    f = write(tmp_path, "a.args", "--num-layers 1 --hidden-size 4096 --num-attention-heads 32 "
                                  "--seq-length 1024 --position-embedding-type rope --swiglu "
                                  "--normalization RMSNorm --disable-bias-linear "
                                  "--untie-embeddings-and-output-weights --vocab-size 256 "
                                  "--max-position-embeddings 1024 --micro-batch-size 1 "
                                  "--tokenizer-type NullTokenizer")
    code, out, _ = run("report", "--from-megatron", f, "--json")
    expected = 2 * 4096 * 256 + 4 * 4096**2 + 3 * 4096 * 10880 + 2 * 4096 + 4096
    assert code == 0 and json.loads(out)["params"] == expected


@pytest.mark.parametrize("text,needle", [
    (megatron("--frobnicate 3"), "unrecognized arguments: --frobnicate 3"),
    (megatron("--num-layers two"), "--num-layers: invalid int value: 'two'"),
    (megatron("--swiglu=yes"), "--swiglu is a switch and takes no value"),
    (megatron("--normalization Foo"), "--normalization: invalid choice: 'Foo'"),
    (megatron("--expert-model-parallel-size 4"), "--expert-model-parallel-size 4 needs "
                                                 "--num-experts divisible by it, got 0"),
    (megatron("--multi-latent-attention"), "--multi-latent-attention with "
                                           "--group-query-attention"),
    ("--hidden-size 64", "no --num-layers (required, arguments.py:1314-1317); no "
                         "--num-attention-heads"),
])
def test_megatron_refuses_by_name(tmp_path, text, needle):
    f = write(tmp_path, "bad.args", text)
    code, out, err = run("report", "--from-megatron", f)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert needle in err, err


def test_megatron_names_every_refusal_at_once(tmp_path):
    """Megatron's own checks, all in one line: no --max-position-embeddings and no
    --micro-batch-size (arguments.py:1314-1317, 693-694); no tokenizer is pretrain_gpt.py's
    GPT2BPETokenizer (L525-528), not a refusal."""
    f = write(tmp_path, "b.args", "--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                                  "--seq-length 128")
    code, _, err = run("report", "--from-megatron", f)
    assert code == 2 and err.count("\n") == 1
    for needle in ("no --max-position-embeddings", "no --micro-batch-size"):
        assert needle in err
    assert "tokenizer" not in err


def test_megatron_switches_are_switches(tmp_path):
    """--recompute-activations, --sft, --use-rope-scaling take no value (arguments.py:2869,
    3773, 2424): the flag after each is read as a flag, and each is accepted."""
    f = write(tmp_path, "s.sh", megatron("--recompute-activations --sft --use-rope-scaling "
                                         "--weight-decay 0.1"))
    code, out, err = run("report", "--from-megatron", f, "--json")
    assert code == 0, err
    assert json.loads(out)["config"]["recompute"] == "selective"  # arguments.py:607-608


def test_megatron_old_rotary_flag_has_no_position_table(tmp_path):
    """--use-rotary-position-embeddings sets rope (arguments.py:1626-1627): without it the
    default learned_absolute table holds max-pos x h = 8192 x 4096 = 33,554,432 params."""
    rope = megatron().replace("--position-embedding-type rope", "--use-rotary-position-"
                                                                "embeddings --no-position-embedding")
    learned = megatron().replace("--position-embedding-type rope ", "")
    counts = []
    for text in (rope, learned):
        code, out, err = run("report", "--from-megatron", write(tmp_path, "r.sh", text),
                             "--json")
        assert code == 0, err
        counts.append(json.loads(out)["params"])
    assert counts == [LLAMA3_8B, LLAMA3_8B + 8192 * 4096]


def _acts(tmp_path, name, extra, *argv):
    code, out, err = run("report", "--from-megatron", write(tmp_path, name, megatron(extra)),
                         "--json", *argv)
    assert code == 0 and "not modelled" not in err, err
    return json.loads(out)["activation_bytes_per_layer"]


def test_megatron_partial_recompute_is_priced(tmp_path):
    """--recompute-method block --recompute-num-layers 2 of a chunk's 16 layers: 2 layers
    keep their input only, 14 keep everything (transformer_block.py _checkpointed_forward);
    uniform groups of 2 keep one input per two layers. Neither is named on stderr now."""
    full = _acts(tmp_path, "f.sh", "--recompute-granularity full")
    none = _acts(tmp_path, "n.sh", "--attention-dropout 0.0")
    block = _acts(tmp_path, "b.sh", "--recompute-granularity full --recompute-method block "
                                    "--recompute-num-layers 2 --attention-dropout 0.0")
    assert block == pytest.approx((2 * full + 14 * none) / 16)
    uniform = _acts(tmp_path, "u.sh", "--recompute-granularity full --recompute-method "
                                      "uniform --recompute-num-layers 2")
    assert uniform == pytest.approx(full / 2)


def test_megatron_recompute_modules_are_priced(tmp_path):
    """Llama 3 8B, TP 2 + SP, bf16, dropout 0.1: --recompute-modules mlp keeps the dense
    MLP's h-wide input (the SP shard) in place of its fused norm's input and output, rstd,
    fc1's 2f-wide output and fc2's f-wide input: per token (4096 x 2 + 4 + 4096 x 2) / 2
    + 3 x 14336 x 2 / 2 - 4096 x 2 / 2 B, over 8192 tokens."""
    core = _acts(tmp_path, "c.sh", "--recompute-granularity selective")
    mlp = _acts(tmp_path, "m.sh", "--recompute-granularity selective --recompute-modules "
                                  "core_attn mlp")
    per_token = (4096 * 2 + 4 + 4096 * 2) / 2 + 3 * 14336 * 2 / 2 - 4096 * 2 / 2
    assert core - mlp == pytest.approx(per_token * 8192)


def test_megatron_verbose_lists_what_changes_nothing(tmp_path):
    f = write(tmp_path, "v.sh", megatron("--data-path 0.5 /a 0.5 /b --save /ckpt"))
    code, _, err = run("report", "--from-megatron", f, "--gpus", "64", "--verbose")
    assert code == 0, err
    silent = next(x for x in err.splitlines() if x.startswith("note: accepted"))
    assert "--data-path 0.5 /a 0.5 /b" in silent and "--save /ckpt" in silent
    assert "--lr 3e-4" in silent


def test_megatron_file_and_a_conflicting_flag(tmp_path):
    f = write(tmp_path, "llama.sh", megatron())
    code, _, err = run("report", "--from-megatron", f, "--tp", "4")
    assert code == 2 and "tp: given twice: 4 on the command line, 2 from" in err, err
    code, _, err = run("report", "llama3-8b", "--from-megatron", f)
    assert code == 2 and "model: 'llama3-8b' given twice" in err


def test_megatron_model_flags_beside_the_file(tmp_path):
    """--vocab-size beside a launch whose tokenizer reads its files is the tokenizer's
    size, padded by Megatron's rule (128 x tp 2 = 256: 128000 -> 128000); the file's own
    value and the flag must agree where its tokenizer reads it; --seq applies as
    --seq-length; a flag with no Megatron counterpart is refused, never dropped."""
    hf = megatron().replace("NullTokenizer --vocab-size 128256", "HuggingFaceTokenizer "
                                                                 "--tokenizer-model x/y")
    f = write(tmp_path, "hf.sh", hf)
    code, _, err = run("report", "--from-megatron", f)
    assert code == 2 and "give its size with --vocab-size N beside the launch file" in err
    code, out, err = run("report", "--from-megatron", f, "--vocab-size", "128000", "--json")
    assert code == 0, err
    assert json.loads(out)["params"] == LLAMA3_8B - 2 * 256 * 4096  # 128256 -> 128000 rows
    g = write(tmp_path, "null.sh", megatron())
    code, _, err = run("report", "--from-megatron", g, "--vocab-size", "1000")
    assert code == 2 and "given twice: --vocab-size 128256" in err
    code, _, err = run("report", "--from-megatron", g, "--seq", "4096")
    assert code == 2 and "given twice: --seq-length 8192 in the file, 4096 beside it" in err
    code, _, err = run("report", "--from-megatron", g, "--attention-sinks")
    assert code == 2 and "attention_sinks beside" in err and "no Megatron flag" in err


@pytest.mark.parametrize("flags,want", [("", 0.1), (" --hidden-dropout 0.0 "
                                                   "--attention-dropout 0.0", 0.0),
                                        (" --attention-dropout 0.05", 0.1),
                                        (" --hidden-dropout 0.0", 0.0)])
def test_megatron_dropout_applied(tmp_path, flags, want):
    """--hidden-dropout, Megatron's default 0.1 (transformer_config.py L188) unless the
    launch sets it; --attention-dropout prices nothing (its kernels keep no mask)."""
    f = write(tmp_path, "llama.sh", megatron(flags))
    code, out, _ = run("report", "--from-megatron", f, "--json")
    assert code == 0 and json.loads(out)["config"]["dropout"] == want


def test_megatron_world_from_torchrun_or_said(tmp_path):
    """torchrun --nproc_per_node 8 (one node) is the world: dp = 8 / (tp 2 x pp 2) = 2; a
    file of bare flags holds no world, and the reader says so."""
    code, out, err = run("report", "--from-megatron", write(tmp_path, "l.sh", megatron()),
                         "--json")
    assert code == 0 and err == "" and json.loads(out)["config"]["dp"] == 2
    bare = megatron().split("pretrain_gpt.py", 1)[1]
    code, out, err = run("report", "--from-megatron", write(tmp_path, "b.args", bare), "--json")
    assert code == 0 and json.loads(out)["config"]["dp"] == 1
    assert err == ("warning: the launch does not hold its world size: dp = 1 here; "
                   "give --gpus N\n")


def test_megatron_expert_flags_reach_the_placement(tmp_path):
    """--expert-tensor-parallel-size and --moe-token-dispatcher-type change the EP bytes,
    so a launch file's values are applied, not dropped."""
    text = megatron("--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4"
                    " --expert-tensor-parallel-size 1 --moe-token-dispatcher-type allgather")
    code, out, err = run("report", "--from-megatron", write(tmp_path, "moe.sh", text),
                         "--gpus", "64", "--json")
    assert code == 0, err
    c = json.loads(out)["config"]
    assert (c["ep"], c["etp"], c["moe_dispatcher"]) == (4, 1, "allgather")


def test_megatron_embedding_and_loss_slots(tmp_path):
    """Llama 3 405B's layout: 126 layers + the embedding's and the loss's slots = 128 = 16
    ranks x 8 virtual stages of one layer (transformer_block.py L148-200); without the
    two flags Megatron refuses the split, and so does the reader."""
    model = ("--num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248 "
             "--num-attention-heads 128 --group-query-attention --num-query-groups 8 "
             "--seq-length 8192 --max-position-embeddings 8192 --position-embedding-type rope "
             "--swiglu --normalization RMSNorm --disable-bias-linear "
             "--untie-embeddings-and-output-weights --vocab-size 128256 --bf16 "
             "--tokenizer-type NullTokenizer "
             "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
             "--sequence-parallel --use-distributed-optimizer --micro-batch-size 1 "
             "--global-batch-size 2048 --num-layers-per-virtual-pipeline-stage 1")
    slots = " --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
    code, out, err = run("report", "--from-megatron", write(tmp_path, "l.sh", model + slots),
                         "--gpus", "16384", "--json")
    assert code == 0, err
    c = json.loads(out)["config"]
    assert (c["pp"], c["vp"], c["dp"], c["num_microbatches"]) == (16, 8, 128, 16)
    code, out, err = run("report", "--from-megatron", write(tmp_path, "m.sh", model),
                         "--gpus", "16384", "--json")
    assert code == 2 and out == "" and "126 layer slots" in err


@pytest.mark.parametrize("extra, needle", [
    (" --num-layers-per-virtual-pipeline-stage 3",  # 8 layers per rank: Megatron asserts
     "--num-layers-per-virtual-pipeline-stage 3 does not divide the 8 layer slots per rank"),
    (" --num-layers-per-virtual-pipeline-stage 16", "does not divide the 8 layer slots"),
    (" --num-virtual-stages-per-pipeline-rank 3", "32 layer slots (32 layers) do not divide "
                                                  "over pp(4) * vp(3) = 12 stages"),
    (" --num-layers-per-virtual-pipeline-stage 0", "does not divide the 8 layer slots"),
    (" --num-virtual-stages-per-pipeline-rank 0", "must be at least 1, got 0"),
])
def test_megatron_virtual_stage_flags_are_checked(tmp_path, extra, needle):
    text = megatron(extra).replace("--pipeline-model-parallel-size 2",
                                   "--pipeline-model-parallel-size 4")
    code, out, err = run("report", "--from-megatron", write(tmp_path, "v.sh", text),
                         "--gpus", "64")
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1, err


def test_megatron_state_dtypes_are_priced(tmp_path):
    """--grad-reduce-in-bf16 halves the fp32 gradient buffer; the precision-aware
    optimizer's bf16 moments halve Adam's 8 B of moments, and its fp32 master of a bf16
    param is TE FusedAdam's 16-bit remainders: per parameter 2 + 4 + 4 + 8 -> 2 + 2 + 2 + 4
    (Megatron arguments.py L1209-1213, L3667-3684, optimizer/__init__.py L571-588
    @d98e8a64; TE fused_adam.py L213-215, L414-415 @d0067d0d), the optimizer's state
    sharded over DP 2."""
    def state(name, extra):
        f = write(tmp_path, name, megatron(extra))
        code, out, err = run("report", "--from-megatron", f, "--json")
        assert code == 0 and "not modelled" not in err, err
        return json.loads(out)["per_gpu"]

    base = state("a.sh", "")
    low = state("b.sh", "--grad-reduce-in-bf16 --use-precision-aware-optimizer "
                        "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --main-grads-dtype bf16")
    assert low["grads_bytes"] == pytest.approx(base["grads_bytes"] / 2)
    assert low["optim_bytes"] == pytest.approx(base["optim_bytes"] * 6 / 12)
    assert low["params_bytes"] == base["params_bytes"]


@pytest.mark.parametrize("extra,optim", [
    # fp32 main params, no FP8: TE holds the masters, 16-bit remainders of the bf16 params
    # (optimizer/__init__.py L571-588, optimizer_config.py L192 @d98e8a64; TE fused_adam.py
    # L213-215, L414-415, L626 @d0067d0d) beside fp32 moments: 2 + 8 of 12
    ("--use-precision-aware-optimizer", 10),
    ("--use-precision-aware-optimizer --main-params-dtype fp16", 10),  # an fp16 master
    # MXFP8: Megatron's own fp32 main params (distrib_optimizer.py L422-446), no TE masters
    ("--use-precision-aware-optimizer --fp8-format hybrid --fp8-recipe mxfp8", 12),
    ("", 12)])
def test_megatron_precision_aware_masters(tmp_path, extra, optim):
    f = write(tmp_path, "a.sh", megatron(""))
    code, out, err = run("report", "--from-megatron", f, "--json")
    base = json.loads(out)["per_gpu"]["optim_bytes"]
    f = write(tmp_path, "b.sh", megatron(extra))
    code, out, err = run("report", "--from-megatron", f, "--json")
    assert code == 0, err
    assert json.loads(out)["per_gpu"]["optim_bytes"] == pytest.approx(base * optim / 12)


def test_megatron_cpu_activation_offload_is_priced(tmp_path):
    """--cpu-offloading-num-layers 8 of Llama 3 8B's 32 layers (no PP, no recompute): TE's
    offload context leaves (32 - 8) layers' activations on the GPU (cpu_offload.py
    L748-751 @TE d0067d0d); Megatron refuses it beside PP (transformer_config.py L1891)."""
    flat = megatron("").replace("--pipeline-model-parallel-size 2", "--pipeline-model-parallel-size 1")
    f0, f8 = write(tmp_path, "a.sh", flat), write(tmp_path, "b.sh", flat.replace(
        "--bf16", "--bf16 --cpu-offloading-num-layers 8"))
    got = []
    for f in (f0, f8):
        code, out, err = run("report", "--from-megatron", f, "--json")
        assert code == 0 and "not modelled" not in err, err
        got.append(json.loads(out)["activation_bytes_per_layer"])
    assert got[1] == pytest.approx(got[0] * 24 / 32)
    code, _, err = run("report", "--from-megatron", write(tmp_path, "c.sh", megatron(
        "--cpu-offloading-num-layers 8")))
    assert code == 2 and "offload_activation_layers" in err, err


def test_megatron_local_transformer_impl_keeps_the_scores(tmp_path):
    """--transformer-impl local builds Megatron's local layer spec (gpt_builders.py L35,
    L138-149 @d98e8a64), whose core attention is DotProductAttention (backends.py L129-131):
    priced as --attention-backend local, the scores kept; its own linear and norm layers
    are named as not priced."""
    figures = {}
    for impl in ("transformer_engine", "local"):
        f = write(tmp_path, f"{impl}.sh", megatron(f"--transformer-impl {impl}"))
        code, out, err = run("report", "--from-megatron", f, "--json")
        assert code == 0, err
        figures[impl] = json.loads(out)["activation_bytes_per_layer"]
        assert ("--transformer-impl local (its attention keeps the scores" in err) == \
            (impl == "local"), err
    f = write(tmp_path, "backend.sh", megatron("--attention-backend local"))
    code, out, err = run("report", "--from-megatron", f, "--json")
    assert json.loads(out)["activation_bytes_per_layer"] == figures["local"] > \
        figures["transformer_engine"]


def test_megatron_inference_optimized_impl_is_named_for_what_it_is(tmp_path):
    """--transformer-impl inference_optimized builds InferenceSpecProvider's layers
    (gpt_builders.py L134-137, backends.py L149-203 @d98e8a64): TE's fused attention, so
    priced with flash as transformer_engine is, and named with its own reason, not local's."""
    figures = {}
    for impl in ("transformer_engine", "inference_optimized"):
        f = write(tmp_path, f"{impl}.sh", megatron(f"--transformer-impl {impl}"))
        code, out, err = run("report", "--from-megatron", f, "--json")
        assert code == 0, err
        figures[impl] = json.loads(out)["activation_bytes_per_layer"]
    assert figures["inference_optimized"] == figures["transformer_engine"]
    assert "--transformer-impl inference_optimized (Megatron's inference layer spec: its " \
           "attention is TE's fused kernel" in err and "keeps the scores" not in err, err


def test_megatron_distillation_teacher_is_named(tmp_path):
    """--export-kd-teacher-load (ModelOpt's argument group, otherwise changing nothing
    priced) builds and loads a teacher beside the student (megatron/post_training/
    model_builder.py L474-500 @d98e8a64): named, the figures approximate."""
    f = write(tmp_path, "kd.sh", megatron("--export-kd-teacher-load /ckpt/teacher"))
    code, out, err = run("report", "--from-megatron", f)
    assert code == 0 and "--export-kd-teacher-load /ckpt/teacher (a distillation teacher" \
        in err and "approximate" in out, err
