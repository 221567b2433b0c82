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


def test_the_reader_reads_the_local_layers(tmp_path):
    from ledger.io.megatron.reader import read_launch

    f = tmp_path / "flags.txt"
    base = ("--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 "
            "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 "
            "--vocab-size 32000 --tokenizer-type NullTokenizer --bf16")
    f.write_text(base + " --transformer-impl local")
    flags = read_launch(str(f), gpus=8).flags
    assert flags["transformer_impl"] == "local" and flags["no_flash"] is True
    f.write_text(base)
    assert "transformer_impl" not in read_launch(str(f), gpus=8).flags


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
