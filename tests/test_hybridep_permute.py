"""HybridEP's own permutation kernels (ledger.step.eager.dispatch_pass_bytes). Megatron-Core
passes ``fused=moe_permute_fusion_into_hybridep`` (transformer_config.py L904, default
False; token_dispatcher.py L1163, L1194 @d98e8a64; the flag came with Megatron-LM #4089,
8c5cf05e). Off, deepseek-ai/DeepEP hybrid-ep 94a9f8f6's executor runs a standalone permute
kernel after the dispatch kernel and a standalone unpermute before the combine kernel
(csrc/hybrid_ep/executor/executor.cu L312-337, L392-404); on, neither (L352-354, L413-414).
Megatron-Bridge sets the flag first at v0.6.0, in one recipe no table row runs
(perf_recipes/nemotronh/h100/nemotronh.py L246, Nemotron 3.5 Lightning on H100); at
067f987d (the tables' commit) also perf_recipes/qwen/h100/qwen3_moe.py L40."""
from dataclasses import replace

import pytest

from ledger.model import preset
from ledger.parallel import ParallelConfig
from ledger.step import estimate
from ledger.step.eager import dispatch_pass_bytes
from ledger.system import system

M = 4  # micro-batches
MODEL = replace(preset("qwen3-30b-a3b"), seq_len=4096)  # 48 MoE layers, top-8, h 2048
HYBRIDEP = dict(moe_dispatcher="flex", ep_backend="hybridep")


def _cfg(**kw):
    return ParallelConfig(**{"tp": 1, "pp": 1, "dp": 8, "ep": 8, "micro_batch": 1,
                             "num_microbatches": M, "zero_stage": 1, **kw})


def test_the_standalone_kernels_bytes_by_hand():
    """extension/permute.cu @94a9f8f6: the permute (L102-155) reads each received token's
    BF16 row once and writes it to each of its local experts' rows (with the fp32 prob, 4 B
    a row, left out; before DeepEP #625 it read the token once per row: permute.cu L306-351
    @ d28bd67); the unpermute (L319-390) reads every expert row and writes the
    token's sum. Over R = 4,096 tokens x top-8 rows of h = 2,048: reads <= R h 2 B and
    writes R h 2 B, then reads R h 2 B and writes <= R h 2 B - at most 4 R h 2 B, DeepEP's
    count. The backward runs them again (the dispatch's backward is combine_with_unpermute,
    the combine's is dispatch_with_permute: fused_a2a.py L454-459, L507-513 @d98e8a64)."""
    rows, h = 4096 * 8, 2048
    fwd, bwd = dispatch_pass_bytes(MODEL, _cfg(**HYBRIDEP), 4096)
    assert fwd == bwd == pytest.approx(4 * rows * h * 2)
    deepep = dispatch_pass_bytes(MODEL, _cfg(moe_dispatcher="flex", ep_backend="deepep"), 4096)
    assert (fwd, bwd) == deepep


def test_fused_into_its_kernels_nothing_runs_apart():
    assert dispatch_pass_bytes(MODEL, _cfg(**HYBRIDEP, hybridep_permute_fusion=True),
                               4096) == (0.0, 0.0)
    # DeepEP does not read the flag: its permute and unpermute stay (token_dispatcher.py
    # L1424-1466 @d98e8a64)
    deepep = dict(moe_dispatcher="flex", ep_backend="deepep")
    assert dispatch_pass_bytes(MODEL, _cfg(**deepep, hybridep_permute_fusion=True), 4096) \
        == dispatch_pass_bytes(MODEL, _cfg(**deepep), 4096)


def test_the_passes_are_elementwise_time_at_hbm_bandwidth():
    """48 layers x 4 micro-batches x (forward + backward) x 4 R h 2 B at the GPU's HBM rate,
    the ledger's other permutation passes' rate; the GEMMs do not move (the host's exposed
    share does: a longer GPU step hides more of it)."""
    b200 = system("b200")
    off, on = (estimate(MODEL, _cfg(**HYBRIDEP, hybridep_permute_fusion=f), b200,
                        precision="bf16", optimizer="adam") for f in (False, True))
    passes = 48 * M * 2 * 4 * 4096 * 8 * 2048 * 2 / b200.gpu.hbm_bytes_per_s
    assert off.breakdown["elementwise"] - on.breakdown["elementwise"] == \
        pytest.approx(passes, rel=1e-9)
    assert off.breakdown["compute"] == pytest.approx(on.breakdown["compute"], rel=1e-12)


def test_bridge_rows_read_the_flag_from_their_recipe():
    """No table row's recipe sets it (Megatron-Bridge v0.1.0rc3 .. v0.5.1 name it nowhere;
    v0.6.0 only in the H100 Nemotron 3.5 Lightning function), so every HybridEP row runs the
    standalone kernels; a recipe that sets it, read as tools/bridge_recipes.py reads
    067f987d's perf_recipes/qwen/h100/qwen3_moe.py (qwen3_30b_a3b_pretrain_16gpu_h100_bf16_
    config, L35; ``cfg.model.moe_permute_fusion_into_hybridep = True``, L40), turns them off."""
    from ledger.render.bridge import config_of, model_of, precision_of
    from ledger.validation.bridge import rows

    def config(row):
        r = row.as_run()
        return config_of(r, precision_of(r)[0], model_of(r))[0], model_of(r)

    hybrid = [r for r in rows() if r.setting("moe_flex_dispatcher_backend") == "hybridep"]
    assert hybrid
    for r in hybrid:
        cfg, model = config(r)
        assert cfg.ep_backend == "hybridep" and cfg.hybridep_permute_fusion is False, r.id
        assert dispatch_pass_bytes(model, cfg, 4096)[0] > 0, r.id
    row = next(r for r in rows() if r.id == "26.06/h100/qwen3-30b-a3b/fp8_cs/16g/gbs1024/mbs1")
    set_at_main = replace(row, recipe={**row.recipe, "settings": {
        **row.recipe["settings"], "model.moe_permute_fusion_into_hybridep": True}})
    cfg, model = config(set_at_main)
    assert cfg.ep_backend == "hybridep" and cfg.hybridep_permute_fusion is True
    assert dispatch_pass_bytes(model, cfg, 4096) == (0.0, 0.0)


@pytest.mark.parametrize("flags,refused", [
    ([], True),  # the alltoall dispatcher
    (["--moe-token-dispatcher-type", "flex"], True),  # DeepEP
    (["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "hybridep"],
     False),
])
def test_the_cli_flag(capsys, flags, refused):
    """--moe-permute-fusion-into-hybridep only where HybridEP runs (the only backend that
    reads it); there it takes the standalone passes off the step."""
    from ledger.cli import main

    argv = ["estimate", "qwen3-30b-a3b", "--gpus", "8", "--gpu", "b200", "--ep", "8", *flags]
    code = main([*argv, "--moe-permute-fusion-into-hybridep"])
    out, err = capsys.readouterr()
    if refused:
        assert code == 2 and out == "" and err.count("\n") == 1
        assert err.startswith("error: hybridep_permute_fusion: ")
    else:
        assert code == 0
        assert main(argv) == 0 and capsys.readouterr().out != out  # it moves the step
