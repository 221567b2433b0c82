"""Megatron's own buffers beside TE's (ledger.placement.buffers): the GlobalMemoryBuffer's
"mpu" tensor (Megatron-LM d98e8a64 core/utils.py L727-753), kept for the run at its largest
request - the output layer's sequence-parallel all-gather (tensor_parallel/layers.py
L623-631) and, under --transformer-impl local, DotProductAttention's scores
(transformer/dot_product_attention.py L187-191) - and no TE GEMM workspace under the local
layers. Expected values are hand arithmetic; the goldens' are measured."""
import pytest

from ledger.config import ParallelConfig
from ledger.model import llama3_8b
from ledger.parallel import place

MiB = 2**20


def _named(rank=-1, **kw):
    cfg = dict(tp=2, dp=4, zero_stage=1, sequence_parallel=True)
    cfg.update(kw)
    return dict(place(llama3_8b().with_seq(4096), ParallelConfig(**cfg)).memory_by_rank[rank]
                .named)


def test_the_output_layers_sp_gather_stays():
    """TP 2 + SP, micro-batch 1 of 4,096 tokens: the output layer gathers 4,096 x 4,096 bf16
    = 32 MiB into the buffer; only the rank holding it; none without SP or TP."""
    assert _named()["Megatron global buffer"] == 4096 * 4096 * 2 == 32 * MiB
    assert _named(micro_batch=2)["Megatron global buffer"] == 64 * MiB
    assert "Megatron global buffer" not in _named(pp=2, dp=2, rank=0)
    assert _named(pp=2, dp=2)["Megatron global buffer"] == 32 * MiB
    assert "Megatron global buffer" not in _named(sequence_parallel=False)
    assert "Megatron global buffer" not in _named(tp=1, dp=8, sequence_parallel=False)


def test_local_layers_keep_the_attention_scores_and_no_te_workspace():
    """--transformer-impl local: Megatron's DotProductAttention asks the buffer for the
    scores, b x a / tp x s x s = 1 x 16 x 4,096 x 4,096 bf16 = 512 MiB, larger than any SP
    gather (32 MiB); its linear layers run torch's GEMMs (no TE workspace) but still take
    TE's cached dummy wgrads under the fusion where TE is installed (layers.py L733-762)."""
    local = _named(te_layers=False, flash_attention=False)
    assert local["Megatron global buffer"] == 16 * 4096 * 4096 * 2 == 512 * MiB
    assert "cuBLAS workspace" not in local and "TE dummy wgrads" in local
    assert "cuBLAS workspace" in _named(flash_attention=False)


def test_the_reader_reads_the_local_layers(tiny_launch):
    flags = tiny_launch("--transformer-impl local").flags
    assert flags["transformer_impl"] == "local" and flags["no_flash"] is True
    assert "transformer_impl" not in tiny_launch().flags


# Megatron-LM's MoE README Mixtral 8x7B launch (tests/fixtures/launch/megatron/blocks, its
# source noted there), its dispatcher swapped for what the rank capacity factor needs
# (transformer_config.py L1868-1882 @d98e8a64: flex on hybridep, TE's op fuser)
MIXTRAL = "launch/megatron/blocks/moe_README__mixtral_8x7b.sh"
HYBRIDEP = ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
            "--use-transformer-engine-op-fuser ")


def _mixtral(tmp_path, moe_args):
    from pathlib import Path

    text = (Path(__file__).parent / "fixtures" / MIXTRAL).read_text()
    assert "--moe-token-dispatcher-type alltoall" in text
    f = tmp_path / "mixtral.sh"
    f.write_text(text.replace("--moe-token-dispatcher-type alltoall", moe_args))
    return str(f)


def _read(path):
    from ledger.io.megatron.reader import read_launch

    return read_launch(path + " ckpt tok data", model_flags={"vocab": 32000})


def test_the_reader_applies_the_paged_stash(tmp_path):
    """--moe-paged-stash with its rank capacity factor is applied through the helper the
    Bridge rows use (frameworks.paged_stash.of_megatron): Megatron's default CUDA buffer
    1.10, a negative one (the actual peak) at its magnitude; none of the three named."""
    stash = _read(_mixtral(tmp_path, HYBRIDEP + "--moe-expert-rank-capacity-factor 1.5 "
                                                "--moe-paged-stash"))
    assert stash.flags["paged_stash"] == (1.10, 1.5)
    assert {"--moe-paged-stash", "--moe-expert-rank-capacity-factor 1.5"} <= set(stash.applied)
    assert not [u for u in stash.unpriced if "stash" in u or "rank-capacity" in u]
    big = _read(_mixtral(tmp_path, HYBRIDEP + "--moe-expert-rank-capacity-factor 1.25 "
                                              "--moe-paged-stash "
                                              "--moe-paged-stash-buffer-size-factor-cuda -1.2"))
    assert big.flags["paged_stash"] == (1.2, 1.25)
    # the rank capacity alone pads the experts' rows with no stash: not modelled, named
    alone = _read(_mixtral(tmp_path, HYBRIDEP + "--moe-expert-rank-capacity-factor 1.5"))
    assert "paged_stash" not in alone.flags
    assert "--moe-expert-rank-capacity-factor 1.5" in alone.unpriced


@pytest.mark.parametrize("moe_args, why", [
    (HYBRIDEP + "--moe-paged-stash", "--moe-paged-stash without --moe-expert-rank-capacity"),
    ("--moe-token-dispatcher-type alltoall --moe-paged-stash "
     "--moe-expert-rank-capacity-factor 1.5", "needs --moe-flex-dispatcher-backend hybridep"),
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
     "--moe-expert-rank-capacity-factor 1.5", "--use-transformer-engine-op-fuser or"),
    (HYBRIDEP + "--moe-paged-stash --moe-expert-rank-capacity-factor 1.5 "
     "--cpu-offloading-num-layers 2", "--moe-paged-stash with --cpu-offloading-num-layers")])
def test_the_reader_refuses_the_stash_megatron_refuses(tmp_path, moe_args, why):
    """TransformerConfig's checks (transformer_config.py L1868-1882, L2210-2217 @d98e8a64)."""
    from ledger.errors import LedgerError

    with pytest.raises(LedgerError, match="Megatron would refuse") as e:
        _read(_mixtral(tmp_path, moe_args))
    assert why in str(e.value)


def test_the_paged_stash_reaches_estimate_and_plan(tmp_path, capsys):
    """A launch's stash moves the figures as a Bridge row's does: estimate's memory per GPU
    and the planner's facts (held in every placement: plan.search.RUN_FACTS)."""
    import json

    from ledger.cli import main
    from ledger.cli.args import build_parser
    from ledger.cli.inputs import source
    from ledger.cli.step_flags import plan_facts

    files, mem = {}, {}
    for k, more in (("off", ""), ("on", " --moe-paged-stash")):
        (tmp_path / k).mkdir()
        files[k] = _mixtral(tmp_path / k, HYBRIDEP + "--moe-expert-rank-capacity-factor 1.5"
                            + more)
    for k, f in files.items():
        argv = ["estimate", "--from-megatron", f, "--vocab-size", "32000", "--json"]
        assert main(argv) == 0
        mem[k] = json.loads(capsys.readouterr().out)["memory_per_gpu_bytes"]
    assert mem["on"] > mem["off"]
    a = build_parser().parse_args(["plan", "--from-megatron", files["on"], "--vocab-size",
                                   "32000"])
    a.launch = source(a)
    assert plan_facts(a)["paged_stash"] == (1.10, 1.5)


def test_the_reader_reads_the_indexer_loss(tiny_launch, monkeypatch):
    """--dsa-indexer-loss-coeff / --dsa-indexer-use-sparse-loss through dsa_loss.of_megatron:
    read by no layer of a plain GPT (silent); run by DSA's layers (dsa.py L1890-1926
    @d98e8a64), whose loss is not modelled (named); applied where the model has the CSA
    layers the ledger prices it on (none Megatron d98e8a64 builds: stood in here)."""
    from ledger.io.megatron import reader

    loss = "--dsa-indexer-loss-coeff 0.01 --dsa-indexer-use-sparse-loss"
    plain = tiny_launch(loss)
    assert "indexer_loss" not in plain.flags and not plain.unpriced
    assert "--dsa-indexer-loss-coeff 0.01" in plain.silent
    dsa = tiny_launch(loss + " --experimental-attention-variant dsa")
    assert "indexer_loss" not in dsa.flags
    assert {"--dsa-indexer-loss-coeff 0.01", "--dsa-indexer-use-sparse-loss"} <= \
        set(dsa.unpriced)
    monkeypatch.setattr(reader, "model_problem", lambda model, loss: None)
    csa = tiny_launch(loss)
    assert csa.flags["indexer_loss"] == "sparse"
    assert {"--dsa-indexer-loss-coeff 0.01", "--dsa-indexer-use-sparse-loss"} <= \
        set(csa.applied)


@pytest.mark.parametrize("case", ["gpt/gpt3_mcore_tp4_pp1_resume_torch", "gpt/gpt3_mcore_tp1_pp2"])
def test_local_layer_goldens_price_alike_on_every_gpu(tmp_path, case):
    """Megatron-LM's local-layer cases measured the same after the step on A100, H100 and
    GB200 (within 2 MiB), which a TE workspace by generation would not; priced alike now,
    within 5% after the step (they were 12-24% under)."""
    from ledger.cli.goldens import price_one
    from ledger.validation.megatron_goldens import goldens

    rows = [g for g in goldens() if f"{g.family}/{g.case}" == case and not g.skip]
    priced = [price_one(g, str(tmp_path))[0][1] for g in rows]
    assert len(priced) >= 2 and len({round(p.ledger) for p in priced}) == 1
    assert max(p.measured for p in priced) - min(p.measured for p in priced) <= 2 * MiB
    assert all(abs(p.error) < 0.05 for p in priced), [p.error for p in priced]


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed"])
@pytest.mark.parametrize("cmd", ["estimate", "plan"])
def test_local_layers_are_refused_off_megatron(capsys, framework, cmd):
    """--transformer-impl local is Megatron's layer spec: under another framework it would
    only turn flash attention off (llama3-8b TP 2 under torchtitan went from fits to does
    NOT fit), so it is refused in one line, naming the field and the framework."""
    from ledger.cli import main

    argv = [cmd, "llama3-8b", "--gpus", "8", "--global-batch", "64", "--seq", "4096",
            "--framework", framework, "--transformer-impl", "local"]
    code = main(argv + (["--tp", "2"] if cmd == "estimate" else []))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "transformer_impl" in err and f"--framework {framework}" in err


def test_local_layers_stay_accepted_under_megatron(capsys):
    from ledger.cli import main

    assert main(["estimate", "llama3-8b", "--gpus", "8", "--tp", "2", "--global-batch", "64",
                 "--transformer-impl", "local", "--json"]) == 0
    capsys.readouterr()
