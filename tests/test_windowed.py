"""Models whose sliding window masks every layer (Mistral 7B, Phi-3-mini, StarCoder2 7B, a
windowed Mixtral): counted as transformers counts them, and report, estimate and plan run
on them end to end (issue 19: all three ended in ``ValueError: (False, None) is not in
list`` - the stage table looked up the MTP module's kind for a model without one)."""
import json
from pathlib import Path

import pytest

from ledger.io import from_hf_config
from test_bad_input import run

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
WINDOWED = sorted(p.name for p in FIXTURES.glob("*.json"))


def hf_count(cfg: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **kw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", WINDOWED)
def test_counted_as_transformers_counts(name):
    path = FIXTURES / name
    m = from_hf_config(path)
    assert m.params == hf_count(json.loads(path.read_text()))
    assert m.local_layers is None and m.sliding_window  # every layer local


@pytest.mark.parametrize("name", WINDOWED)
@pytest.mark.parametrize("argv", [["report"], ["estimate", "--pp", "2", "--microbatches", "4"],
                                  ["plan", "--gpus", "64", "--global-batch", "64", "--top",
                                   "1"]])
def test_every_command_runs(name, argv):
    path = str(FIXTURES / name)
    code, out, err = run([argv[0], path, *argv[1:]])
    assert code == 0, err
    assert "Traceback" not in err and out


def test_a_window_on_every_layer_prices_every_layer_as_local():
    """Mistral 7B's window of 4096 over 8192 tokens: a query sees w - w^2/(2s) = 3072 keys
    on average instead of s/2 = 4096 (ledger.arch.flops), on every layer."""
    from ledger.arch.flops import keys_factor

    m = from_hf_config(FIXTURES / "mistral-7b-v0.1.json").with_seq(8192)
    assert keys_factor(m) == 3072 / 4096
