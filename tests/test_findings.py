"""The smaller findings of issue 34, each as it was met on d9dfbab."""
import json

from test_bad_input import run


def test_report_help_names_the_family_list_once_not_prints_it(capsys):
    """--family's ~145 choices were printed twice (usage and help), ~1,400 characters each."""
    import pytest

    from ledger.cli import main

    with pytest.raises(SystemExit) as e:
        main(["report", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "afmoe" not in out
    assert max(len(line) for line in out.splitlines()) <= 120

    from ledger.io.hf.families import FAMILIES

    assert "--family FAMILY" in out
    assert f"one of {len(FAMILIES)} (docs/models.md)" in " ".join(out.split())
    assert out.startswith("usage: train-ledger report [model] [flags]\n")


def test_json_config_says_what_the_text_prints():
    """etp and the dispatcher were null in JSON while the text printed etp=2 dispatcher=alltoall."""
    argv = ["report", "deepseek-v3", "--tp", "2", "--ep", "8", "--pp", "4", "--dp", "8"]
    _, text, _ = run(argv)
    _, out, _ = run(argv + ["--json"])
    c = json.loads(out)["config"]
    assert "etp=2 dispatcher=alltoall" in text
    assert (c["etp"], c["moe_dispatcher"]) == (2, "alltoall")


GPT_OSS = {"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 64,
           "intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 16, "vocab_size": 128, "num_local_experts": 4,
           "num_experts_per_tok": 2, "layer_types": ["sliding_attention", "full_attention"]}


def test_all_linear_on_fused_experts_says_they_get_no_adapter(tmp_path):
    """peft's all-linear wraps nn.Linear modules: gpt-oss's fused experts and its router
    are parameters (transformers 5), so they train without an adapter - now said."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT_OSS))
    code, _, err = run(["report", str(path), "--finetune", "lora", "--lora-targets",
                        "all-linear"])
    assert code == 0
    assert ("note: --lora-targets all-linear adapts modules only, as peft does: "
            in err) and "experts.gate_up_proj" in err and "get no adapter" in err


def test_the_seed_placements_say_what_they_are_and_which_gpu_they_are_held_to():
    """`make run` showed 536 GiB per GPU with no GPU named and no word that these are the
    article's placements."""
    code, out, _ = run([])
    assert code == 0
    assert out.startswith("The seed article's six placements, as it writes them")
    assert "h100-sxm (79.65 GiB)" in out.splitlines()[0]
    verdicts = [line.split("h100-sxm", 1)[1].strip() for line in out.splitlines()
                if line.startswith("  on h100-sxm")]
    assert len(verdicts) == 6 and verdicts[2].startswith("does not fit: over by 456.72 GiB")
