"""How a released config.json's keys are taken: an older name restating a read key, remote
code read by its architectures, a missing key at its class's default, a renamed config
refused naming the key it would ignore, and a hub id resolved from the local cache or said
where it was looked for."""
import json
from pathlib import Path

import pytest

from ledger.errors import LedgerError
from ledger.io import read_hf_config
from ledger.io.hf import read_config
from test_released import RELEASED, load


def test_an_older_name_restating_a_read_key_is_accepted():
    """google/gemma-2-9b's file says sliding_window_size: 4096 beside sliding_window: 4096
    (gemma_pytorch's name; Gemma2Config does not read it): refused on main as a layout key
    'gemma2 does not read'. The same key with another value is still refused."""
    cfg = load("gemma-2-9b")
    assert read_config(cfg)[0].sliding_window == 4096
    with pytest.raises(LedgerError, match="sliding_window_size would change the model"):
        read_config({**cfg, "sliding_window_size": 2048})


def test_remote_code_is_read_by_its_architectures_and_says_so():
    spec, notes = read_config(load("kimi-k2-instruct"))
    assert spec.family == "deepseek_v3" and spec.num_experts == 384
    assert notes == ("model_type 'kimi_k2' is not a transformers family; read as "
                     "'deepseek_v3', the family of its architectures 'DeepseekV3ForCausalLM'",)


def test_a_missing_key_takes_the_class_default():
    """Gemma-3-27B-it's text_config has no vocab_size: Gemma3TextConfig's 262,208."""
    spec, notes = read_config(load("gemma-3-27b-it"))
    assert spec.vocab == 262_208 and "vision_config is not counted" in notes[0]


def test_a_renamed_config_is_refused_naming_the_key_it_would_ignore():
    """MiniMax-M1 as model_type 'minimax': transformers' MiniMaxConfig has no
    attn_type_list, so its default alternation (40 + 40) would be counted - 451.9 B."""
    cfg = {**load("minimax-m1-80k"), "model_type": "minimax"}
    with pytest.raises(LedgerError, match="attn_type_list would change the model, but "
                                          "model_type 'minimax' does not read it"):
        read_config(cfg)


def _cache(root: Path, repo_id: str, name: str, rev: str = "0123abcd") -> None:
    """huggingface_hub's cache layout: models--org--name/{refs/main, snapshots/rev/}."""
    folder = root / f"models--{repo_id.replace('/', '--')}"
    (folder / "snapshots" / rev).mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(rev)
    (folder / "snapshots" / rev / "config.json").write_text((RELEASED / f"{name}.json")
                                                            .read_text())


@pytest.mark.parametrize("env", ["HF_HUB_CACHE", "HF_HOME"])
def test_a_hub_id_resolves_from_the_local_cache(tmp_path, monkeypatch, env):
    from test_bad_input import run

    root = tmp_path / "hub" if env == "HF_HOME" else tmp_path
    _cache(root, "Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv(env, str(tmp_path))
    code, out, err = run(["report", "Qwen/Qwen3-30B-A3B", "--json"])
    assert code == 0, err
    expected = read_hf_config(RELEASED / "qwen3-30b-a3b.json")[0].params
    assert json.loads(out)["params"] == expected and "Qwen/Qwen3-30B-A3B" in out


def test_a_hub_id_not_in_the_cache_says_where_it_looked(tmp_path, monkeypatch):
    from test_bad_input import run

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    code, out, err = run(["report", "Qwen/Qwen3-235B-A22B"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "'Qwen/Qwen3-235B-A22B' is not in the local Hugging Face cache" in err
    assert str(tmp_path / "models--Qwen--Qwen3-235B-A22B") in err
