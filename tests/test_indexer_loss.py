"""DeepSeek-V4's indexer loss (Megatron's dsa_indexer_loss_coeff, dsa_indexer_use_sparse_loss
at Megatron-LM 43e45e13, the dev commit Megatron-Bridge 0.6.0 pins): what it runs, counted
by hand on DeepSeek-V4-Flash (config.json: 43 layers, 21 of compress ratio 4; 64 heads of
512; the indexer's 64 heads of 128, top-k 512; s = 4096)."""
import json
from importlib import resources

import pytest

from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.frameworks.dsa_loss import of_megatron
from ledger.io.hf import read_config
from ledger.step import indexer_loss as il
from ledger.validation.bridge import CONFIG


@pytest.fixture(scope="module")
def flash():
    text = resources.files("ledger.validation").joinpath(
        "data/hf", CONFIG["deepseek-v4-flash"]).read_text()
    return read_config(json.loads(text))[0]


def _cfg(loss="none"):
    return ParallelConfig(tp=1, pp=1, dp=128, ep=64, micro_batch=1, num_microbatches=16,
                          zero_stage=1, framework="megatron", indexer_loss=loss)


def test_the_entries_the_loss_reads_by_hand(flash):
    """Query t reads floor((t + 1) / 4) compressed entries: the sparse loss at most the
    top-k 512 (queries 2047 on: sum of floor(u/4), u < 2048, is 523,264; then 512 x 2049),
    the dense loss all of them (sum to u = 4096: 2,096,128)."""
    assert il.loss_keys(flash, "sparse") == (523264 + 512 * 2049) / 4096
    assert il.loss_keys(flash, "dense") == 2096128 / 4096
    assert il.loss_keys(flash, "none") == 0.0


def test_the_loss_s_gemms_by_hand(flash, monkeypatch):
    """With each GEMM counted as its 2 m n k FLOPs: per CSA layer the target's scores at
    64 heads of 512 and the indexer's d q and d k at its 64 heads of 128, over the loss's
    entries; averaged over the 43 layers (21 CSA)."""
    monkeypatch.setattr(il, "gemm_s", lambda m, n, k, gpu, cal: 2.0 * m * n * k)
    keys = (523264 + 512 * 2049) / 4096
    want = 21 / 43 * (64 * 2 * 4096 * keys * 512 + 2 * 64 * 2 * 4096 * keys * 128)
    assert il.indexer_loss_s(flash, _cfg("sparse"), 4096, None, None) == pytest.approx(want)
    assert il.indexer_loss_s(flash, _cfg("none"), 4096, None, None) == 0.0


def test_the_loss_adds_to_the_forward_and_takes_the_indexer_s_backward(flash):
    """Its backward runs in the forward (csa_kernels.py L1274-1367): the layer's forward
    attention grows by exactly the loss; the backward is the same with or without it (the
    indexer's scores have none of their own)."""
    from ledger.step.gemm import indexer_core_s
    from ledger.step.layer_time import layer_times
    from ledger.step.timing import DEFAULT
    from ledger.system import system

    sysm = system("gb200")
    links = {"tp": "nvlink", "pp": "nvlink", "dp": "nvlink", "cp": "nvlink", "ep": "nvlink"}
    got = {k: layer_times(flash, _cfg(k), sysm, links, DEFAULT) for k in ("none", "sparse",
                                                                           "dense")}
    loss = il.indexer_loss_s(flash, _cfg("sparse"), 4096, sysm.gpu, DEFAULT)
    assert loss > 0 and indexer_core_s(flash, _cfg(), 4096, sysm.gpu, DEFAULT) > 0
    assert got["sparse"].attention - got["none"].attention == pytest.approx(loss)
    assert got["dense"].attention > got["sparse"].attention
    assert got["sparse"].attention_bwd == got["none"].attention_bwd


@pytest.mark.parametrize("coeff,sparse,want", [
    (None, True, "none"), (0.0, True, "none"), (0.01, True, "sparse"), (0.01, None, "dense"),
    (0.01, False, "dense")])
def test_the_loss_megatron_runs(coeff, sparse, want):
    """None unless the coefficient is positive (Megatron's default None), then sparse only
    where dsa_indexer_use_sparse_loss is set (default False: the dense loss)."""
    assert of_megatron(coeff, sparse) == want


def test_an_unknown_loss_is_refused_naming_the_field():
    with pytest.raises(LedgerError) as err:
        _cfg("kl")
    assert str(err.value).startswith("indexer_loss:")


def test_the_bridge_rows_run_the_sparse_loss():
    """The 26.08 DeepSeek-V4-Flash recipes set dsa_indexer_loss_coeff 0.01 with the sparse
    loss: priced, no longer named as not priced (nor their mla_up_proj recompute)."""
    from ledger.render.bridge import config_of, model_of, precision_of, rows

    got = [r.as_run() for r in rows() if r.model == "deepseek-v4-flash"]
    assert len(got) == 2
    for row in got:
        model = model_of(row)
        cfg, approx = config_of(row, precision_of(row)[0], model)
        assert cfg.indexer_loss == "sparse" and cfg.recompute_modules == ("mla_up_proj",)
        assert not [a for a in approx if "indexer" in a or "mla_up_proj" in a]


def test_the_cli_prices_the_loss(capsys):
    from pathlib import Path

    from ledger.cli import main

    released = Path(__file__).parent / "fixtures/hf/released/deepseek-v4-flash.json"
    argv = ["estimate", str(released), "--gpus", "128", "--ep", "64", "--json"]
    step = {}
    for loss in ("none", "sparse"):
        assert main(argv + ["--dsa-indexer-loss", loss]) == 0
        out, err = capsys.readouterr()
        assert err == ""
        step[loss] = json.loads(out)["step_time_s"]
    assert step["sparse"] > step["none"]


def test_the_flag_on_a_model_without_csa_layers_is_one_line_exit_2(capsys):
    from ledger.cli import main

    code = main(["estimate", "llama3-8b", "--gpus", "8", "--dsa-indexer-loss", "sparse"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "indexer_loss" in err and "--dsa-indexer-loss sparse" in err


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed"])
def test_the_flag_off_megatron_is_one_line_exit_2(capsys, framework):
    """The loss priced is Megatron's fused kernel with its eager backward (csa_kernels.py
    L1274-1371 @43e45e13): under another framework it is refused, not priced (torchtitan's
    step went 8.421 -> 8.521 s with it)."""
    from pathlib import Path

    from ledger.cli import main

    released = Path(__file__).parent / "fixtures/hf/released/deepseek-v4-flash.json"
    code = main(["estimate", str(released), "--gpus", "128", "--ep", "64", "--framework",
                 framework, "--dsa-indexer-loss", "dense"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "indexer_loss" in err and f"--framework {framework}" in err


@pytest.mark.parametrize("loss", ["sparse", "dense"])
def test_the_loss_s_working_memory_is_named_and_not_priced(flash, loss):
    """The loss's transient target (the attention's softmax summed over heads, built and freed
    in its fused forward, csa_kernels.py L762-790, L890-928 @43e45e13) is not priced: every
    rank's memory is the same with and without the loss, and the module says so."""
    from ledger.frameworks import dsa_loss
    from ledger.parallel import place

    plain, with_loss = (place(flash, _cfg(x)).memory_by_rank for x in ("none", loss))
    for a, b in zip(plain, with_loss):
        assert (a.allocated_bytes, a.required_bytes) == (b.allocated_bytes, b.required_bytes)
    assert "Not priced: the loss's transient working memory" in dsa_loss.__doc__


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed"])
def test_a_python_api_config_off_megatron_is_refused_naming_the_field(framework):
    """The same refusal as the CLI's for a config built in Python: the loss priced is
    Megatron's fused kernel (csa_kernels.py L1274-1371 @43e45e13), a setting only Megatron
    has (dsa_indexer_loss_coeff, transformer_config.py L337-342 @43e45e13); off "none" it
    is refused at construction, not priced under another framework's step."""
    for loss in ("sparse", "dense"):
        with pytest.raises(LedgerError) as err:
            ParallelConfig(tp=1, pp=1, dp=128, ep=64, micro_batch=1, num_microbatches=16,
                           zero_stage=3, framework=framework, indexer_loss=loss)
        msg = str(err.value)
        assert msg.startswith("indexer_loss:") and "\n" not in msg, msg
        assert f"--dsa-indexer-loss {loss}" in msg and framework in msg, msg
    ParallelConfig(tp=1, pp=1, dp=128, ep=64, micro_batch=1, num_microbatches=16,
                   zero_stage=3, framework=framework, indexer_loss="none")


def test_the_planner_refuses_the_held_loss_off_megatron(flash):
    """The planner's held loss (plan.search.RUN_FACTS) meets the config's check: under
    torchtitan or deepseek (the CLI's DualPipe advice searches there) a search holding the
    loss is refused in one line naming the field, not priced with Megatron's kernel."""
    from ledger.plan import plan
    from ledger.system import system

    sysm = system("h100-sxm")
    for framework in ("torchtitan", "deepseek"):
        with pytest.raises(LedgerError) as err:
            plan(flash, 128, sysm, 256, framework=framework, facts={"indexer_loss": "sparse"})
        assert str(err.value).startswith("indexer_loss:"), err.value
