"""Model flags: one per ModelSpec field, custom models counted exactly, no flag dropped.

The expected counts are transformers 5.23.0's (meta device) for the published configs,
measured in test_hf_counts.py (REAL): Qwen3-30B-A3B 30,532,122,624; DeepSeek-V3
671,026,404,352; gemma-2-9b 9,241,705,984.
"""
import json
from dataclasses import fields

import pytest

from ledger.cli import FLAGS, main, parse_layers
from ledger.errors import LedgerError
from ledger.model import ModelSpec

QWEN3_30B = ["--layers", "48", "--hidden", "2048", "--heads", "32", "--kv-heads", "4",
             "--head-dim", "128", "--ffn", "6144", "--moe-ffn", "768", "--num-experts", "128",
             "--top-k", "8", "--vocab", "151936", "--qk-norm", "head"]
DEEPSEEK_V3 = ["--attention", "mla", "--q-lora-rank", "1536", "--kv-lora-rank", "512",
               "--qk-rope-head-dim", "64", "--qk-nope-head-dim", "128", "--v-head-dim", "128",
               "--layers", "61", "--hidden", "7168", "--heads", "128", "--ffn", "18432",
               "--moe-ffn-hidden-size", "2048", "--num-experts", "256", "--moe-router-topk",
               "8", "--shared-experts", "1", "--first-dense-layers", "3", "--vocab", "129280",
               "--mtp-num-layers", "1"]
# DeepSeek-V4-Flash's shape (its config.json; 284,332,230,231 as transformers builds it)
DEEPSEEK_V4_FLASH = ["--layers", "43", "--hidden", "4096", "--heads", "64", "--kv-heads", "1",
                     "--head-dim", "512", "--ffn", "2048", "--vocab", "129280",
                     "--attention", "csa", "--q-lora-rank", "1024", "--compressed",
                     "ratios=WW+CH*20+C,o_groups=8,o_lora_rank=1024", "--hc-mult", "4",
                     "--attention-sinks", "--sliding-window", "128", "--index-heads", "64",
                     "--index-head-dim", "128", "--index-topk", "512", "--num-experts", "256",
                     "--top-k", "6", "--moe-ffn-hidden-size", "2048", "--shared-experts", "1"]
GEMMA2_9B = ["--layers", "42", "--hidden", "3584", "--heads", "16", "--kv-heads", "8",
             "--head-dim", "256", "--ffn", "14336", "--vocab", "256000", "--tied",
             "--layer-norms", "4", "--sliding-window", "4096", "--local-layers",
             "except-every:2", "--attn-softcap", "50", "--final-softcap", "30"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_modelspec_field_has_a_flag():
    assert {f.name for f in fields(ModelSpec)} - {"name", "seq_default"} == set(FLAGS)


@pytest.mark.parametrize("flags,params", [(QWEN3_30B, 30_532_122_624),
                                          (DEEPSEEK_V3, 671_026_404_352),
                                          (GEMMA2_9B, 9_241_705_984),
                                          (DEEPSEEK_V4_FLASH, 284_332_230_231)])
def test_custom_counts_the_published_models(capsys, flags, params):
    code, out, _ = run(capsys, "report", "custom", *flags, "--json")
    d = json.loads(out)
    assert code == 0 and d["params"] == params and sum(d["param_breakdown"].values()) == params


def test_custom_deepseek_v3_text_shows_total_active_and_mtp(capsys):
    code, out, _ = run(capsys, "report", "custom", *DEEPSEEK_V3)
    assert code == 0
    assert "(s=4096, default; --seq to set)" in out
    assert "params              671.03 B total, 37.55 B active; + 11.61 B in 1 MTP" in out
    assert "experts 653.91 B, shared_experts 2.55 B, router 0.11 B, norms 0.88 M" in out


def test_config_named_by_its_file(capsys, tmp_path):
    path = tmp_path / "OLMo-2.json"
    path.write_text(json.dumps({"model_type": "olmo2", "hidden_size": 64,
                                "num_hidden_layers": 2, "num_attention_heads": 4,
                                "intermediate_size": 96, "vocab_size": 100}))
    _, out, _ = run(capsys, "report", str(path), "--json")
    assert json.loads(out)["model"] == "OLMo-2"


@pytest.mark.parametrize("argv,flag", [
    (["report", "llama3-8b", "--kv-heads", "4"], "--kv-heads"),
    (["report", "mixtral-8x7b", "--top-k", "1", "--num-experts", "4"], "--num-experts"),
    (["estimate", "qwen3-8b", "--tied"], "--tied"),
])
def test_shape_flags_on_a_preset_are_refused(capsys, argv, flag):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert flag in err and "use 'custom'" in err


def test_config_json_takes_seq_but_not_shape(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mistral", "hidden_size": 5120,
                                "num_hidden_layers": 40, "num_attention_heads": 32,
                                "num_key_value_heads": 8, "head_dim": 128,
                                "intermediate_size": 14336, "vocab_size": 131072,
                                "sliding_window": None, "max_position_embeddings": 1024000}))
    code, out, _ = run(capsys, "report", str(path), "--json")
    d = json.loads(out)
    assert (d["seq_len"], d["params"], d["active_params"]) == (4096, 12_247_782_400,
                                                               12_247_782_400)
    _, out, _ = run(capsys, "report", str(path))
    assert "(s=4096, default; --seq to set)" in out
    _, out, _ = run(capsys, "report", str(path), "--seq", "16384", "--json")
    assert json.loads(out)["seq_len"] == 16384
    code, _, err = run(capsys, "report", str(path), "--hidden", "4096")
    assert code == 2 and "--hidden" in err


def test_active_params_in_every_json(capsys):
    _, out, _ = run(capsys, "estimate", "custom", *QWEN3_30B, "--ep", "8", "--dp", "8",
                    "--json")
    est = json.loads(out)
    assert est["params"] == 30_532_122_624
    # 48 layers each leave 120 of 128 experts (3 x 2048 x 768) idle
    assert est["active_params"] == 30_532_122_624 - 48 * 120 * 3 * 2048 * 768
    _, out, _ = run(capsys, "plan", "llama3-8b", "--gpus", "8", "--global-batch", "8",
                    "--top", "1", "--json")
    assert json.loads(out)["active_params"] == 8_030_261_248


@pytest.mark.parametrize("text,layers,expected", [
    ("every:2", 4, (1, 3)), ("except-every:6", 12, (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)),
    ("1,3,5-7", 8, (1, 3, 5, 6, 7)), ("0", 2, (0,)),
])
def test_layer_lists(text, layers, expected):
    assert parse_layers(text, layers, "--moe-layers") == expected


@pytest.mark.parametrize("text", ["every:0", "1-", "x", "every:"])
def test_bad_layer_lists_are_refused(text):
    with pytest.raises(LedgerError, match="--moe-layers"):
        parse_layers(text, 4, "--moe-layers")


def test_moe_layers_flag_counts_only_those_layers(capsys):
    base = ["report", "custom", "--layers", "4", "--hidden", "64", "--heads", "4", "--ffn",
            "96", "--vocab", "100", "--num-experts", "4", "--top-k", "2", "--json"]
    _, out, _ = run(capsys, *base, "--moe-layers", "every:2")
    d = json.loads(out)["param_breakdown"]
    assert (d["mlp"], d["experts"], d["router"]) == (2 * 3 * 64 * 96, 2 * 4 * 3 * 64 * 96,
                                                     2 * 64 * 4)


def test_a_hybrid_from_flags(capsys):
    """Two Mamba-2 blocks and an attention layer, as ledger.anatomy.mixers' records take them:
    the same count as the ModelSpec built in Python."""
    from ledger.anatomy.mixers import Mamba

    code, out, err = run(capsys, "report", "custom", "--layers", "3", "--hidden", "64",
                         "--heads", "4", "--ffn", "128", "--vocab", "100", "--mixers", "MMA",
                         "--mamba", "version=2,inner=128,state=16,heads=4,groups=2",
                         "--json")
    want = ModelSpec(name="custom", layers=3, hidden=64, heads=4, ffn_hidden=128, vocab=100,
                     seq_len=4096, mixers=("mamba", "mamba", "attention"),
                     mamba=Mamba(version=2, inner=128, state=16, heads=4, groups=2))
    assert code == 0 and json.loads(out)["params"] == want.params


@pytest.mark.parametrize("flags,line", [
    (["--mixers", "MMX"], "error: --mixers: expected letters of AMLCPN like 'MMMA*8'"),
    (["--mixers", "MA"], "error: --mixers: names 2 layers, the model has 3"),
    (["--mixers", "MMA", "--mamba", "version=2,size=3"], "error: --mamba: expected key=value"),
    (["--mixers", "MMA"], "error: --mamba: layers of mixer 'mamba' need a Mamba record"),
])
def test_hybrid_flags_refused_in_one_line(capsys, flags, line):
    code, out, err = run(capsys, "report", "custom", "--layers", "3", "--hidden", "64",
                         "--heads", "4", "--ffn", "128", "--vocab", "100", *flags)
    assert code == 2 and err.startswith(line) and err.count("\n") == 1, err


def test_a_composite_is_read_as_its_text_model_and_says_so(capsys, tmp_path):
    """GOT-OCR2's config.json: a vision tower beside a Qwen2 text model; the report counts
    the text model (transformers: 463,909,888 for Qwen2ForCausalLM on its text_config, the
    count tests/test_corpus.py holds) and one stderr line says what was left out."""
    text = {"model_type": "qwen2", "hidden_size": 1024, "intermediate_size": 2816,
            "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
            "vocab_size": 151860, "tie_word_embeddings": True}
    cfg = {"model_type": "got_ocr2", "text_config": text, "vision_config": {"hidden_size": 768}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run(capsys, "report", str(path), "--json")
    assert code == 0 and json.loads(out)["params"] == 463_909_888
    assert err == ("note: model_type 'got_ocr2' is a composite: its text model ('qwen2', "
                   "text_config) is what is counted; vision_config is not counted\n")


@pytest.mark.parametrize("latent,refused", [(8192, True), (7168, True), (7167, False),
                                            (1024, False)])
def test_moe_latent_must_lie_below_hidden(capsys, latent, refused):
    """--moe-latent is the experts' narrower width (hidden -> latent -> hidden): at or
    above --hidden it is refused in one line with both numbers, exit 2; a launch file is
    read as Megatron reads it (only > 0: arguments.py L1980-1982 @d98e8a64)."""
    code, out, err = run(capsys, "report", "custom", *DEEPSEEK_V3, "--moe-latent", str(latent))
    if refused:
        assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert err == f"error: --moe-latent: {latent:,} must be below --hidden 7,168 (the " \
                      f"experts' narrower width between the two latent projections)\n"
    else:
        assert code == 0, err


def test_moe_latent_in_a_launch_is_read_as_megatron_reads_it(capsys, tmp_path):
    """A launch file's --moe-latent-size 2048 on a 1024-wide model runs under Megatron
    (arguments.py L1980-1982 asserts only > 0): read; typed beside the file: refused."""
    base = ("--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --ffn-hidden-size 4096 "
            "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
            "--global-batch-size 64 --vocab-size 32000 --bf16 --tokenizer-type NullTokenizer "
            "--num-experts 8 --moe-router-topk 2")
    (tmp_path / "file.sh").write_text(base + " --moe-latent-size 2048\n")
    code, _, err = run(capsys, "report", "--from-megatron", str(tmp_path / "file.sh"),
                       "--gpus", "8")
    assert code == 0, err
    (tmp_path / "typed.sh").write_text(base + "\n")
    code, out, err = run(capsys, "report", "--from-megatron", str(tmp_path / "typed.sh"),
                         "--gpus", "8", "--moe-latent-size", "2048")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: --moe-latent: 2,048 must be below --hidden 1,024")


@pytest.mark.parametrize("mult,refused", [(None, True), ("0", True), ("4", False)])
def test_no_hc_head_needs_streams(capsys, mult, refused):
    """--no-hc-head averages mHC's streams instead of collapsing them by a learned head: on
    a model without streams it would change nothing, so it is refused in one line."""
    base = ["report", "custom", "--layers", "2", "--hidden", "64", "--heads", "4", "--ffn",
            "128", "--vocab", "100", "--no-hc-head"]
    code, out, err = run(capsys, *base, *(["--hc-mult", mult] if mult else []))
    if refused:
        assert code == 2 and out == "" and "Traceback" not in err
        assert err == "error: --no-hc-head: averages mHC's streams: needs --hc-mult above " \
                      "0, got 0\n"
    else:
        assert code == 0, err
        _, with_head, _ = run(capsys, *base[:-1], "--hc-mult", mult, "--json")
        _, without, _ = run(capsys, *base, "--hc-mult", mult, "--json")
        # the head is hc_mult x hc_mult x hidden + hc_mult + 1 (anatomy.compressed.hc_head)
        assert json.loads(with_head)["params"] - json.loads(without)["params"] \
            == 4 * 4 * 64 + 4 + 1


_V4_NO_COMPRESSED = [f for i, f in enumerate(DEEPSEEK_V4_FLASH)
                     if "--compressed" not in DEEPSEEK_V4_FLASH[max(i - 1, 0):i + 1]]


@pytest.mark.parametrize("compressed,line", [
    ("ratios=WW+CH*20,o_groups=8,o_lora_rank=1024",
     "error: --compressed: compress_ratios: must give one ratio per layer (43), got 42"),
    ("ratios=WW+CH*20+C,o_groups=7,o_lora_rank=1024",
     "error: --compressed: o_groups: heads(64) must split into o_groups(7)"),
    ("ratios=WW+CH*20+C,o_groups=0,o_lora_rank=1024",
     "error: --compressed: o_groups: must be a positive integer, got 0"),
    ("ratios=WW+CH*20+C,o_groups=8,o_lora_rank=0",
     "error: --compressed: o_lora_rank: must be a positive integer, got 0"),
    # a repeat past the layer limit says so, a negative one is not read as none
    ("ratios=W*70000,o_groups=8,o_lora_rank=1024",
     "error: --compressed: ratios: name more than 65,536 layers"),
    ("ratios=WW+CH*-1+CH*21+C,o_groups=8,o_lora_rank=1024",
     "error: --compressed: ratios: expected letters of WCH like 'WW+CH*20+C', got "
     "'WW+CH*-1+CH*21+C'"),
])
def test_compressed_keys_refused_naming_the_flag(capsys, compressed, line):
    """A --compressed key the model refuses names the flag it was typed in and the key."""
    code, out, err = run(capsys, "report", "custom", *_V4_NO_COMPRESSED, "--compressed",
                         compressed)
    assert code == 2 and out == "" and err == line + "\n"


@pytest.mark.parametrize("mult,refused", [("16", False), ("17", True), ("100000", True)])
def test_hc_mult_bounded_at_a_sane_stream_count(capsys, mult, refused):
    """--hc-mult 100000 once printed a 352-trillion-parameter model: mHC's streams are 4 in
    DeepSeek-V4 and Megatron's default; past 16 the flag is refused in one line."""
    code, out, err = run(capsys, "report", "custom", "--layers", "2", "--hidden", "64",
                         "--heads", "4", "--ffn", "128", "--vocab", "100", "--hc-mult", mult)
    if refused:
        assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"error: hc_mult: must be an integer in 0..16, got '{mult}'")
        assert "--hc-mult" in err
    else:
        assert code == 0, err


_SMALL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--ffn", "128", "--vocab", "100"]


@pytest.mark.parametrize("base,flag,record,key", [
    (_V4_NO_COMPRESSED, "--compressed",
     "ratios=WW+CH*20+C,o_groups=8,o_lora_rank=1024,ratios=HH", "ratios"),
    (_V4_NO_COMPRESSED, "--compressed",
     "ratios=WW+CH*20+C,o_groups=8,o_groups=4,o_lora_rank=1024", "o_groups"),
    (_SMALL + ["--sliding-window", "16", "--local-layers", "0"], "--global-attention",
     "head_dim=32,kv_heads=4,head_dim=16", "head_dim"),
    (_SMALL + ["--mixers", "MA"], "--mamba",
     "version=2,inner=256,state=16,heads=4,groups=1,state=64", "state"),
    (_SMALL + ["--mixers", "LA"], "--linear",
     "kind=gdn,key_heads=4,key_dim=32,value_heads=8,value_dim=32,kind=kda", "kind"),
    (_SMALL + ["--mixers", "CA"], "--conv", "kernel=3,kernel=4", "kernel"),
])
def test_a_record_key_given_twice_is_refused(capsys, base, flag, record, key):
    """A key=value record flag that repeats a key is a slip, not 'the last one wins' (each
    of these was priced with its last value): refused in one line naming the flag and key."""
    code, out, err = run(capsys, "report", "custom", *base, flag, record)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {flag}: {key} given twice (")
