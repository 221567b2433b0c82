"""PyTorch's own cuBLAS workspaces (issue 31): the output layer's GEMMs (Megatron-LM d98e8a64
tensor_parallel/layers.py L459, L683, L780-782), unfused attention's baddbmm / bmm
(transformer/dot_product_attention.py L194, L239) and a shared-expert gate's linear
(moe/shared_experts.py L204) run through torch - not the router, whose GEMMs are TE's
te_general_gemm when TE is installed (moe/moe_utils.py L1389, L1425) - each (handle, stream)
keeping a workspace from the caching allocator (pytorch@26a39059 CublasHandlePool.cpp), a
handle per thread: the forward's and the autograd engine's - ``ledger.placement.buffers``."""
import pytest

from ledger.model import llama3_8b, mixtral_8x7b
from ledger.parallel import ParallelConfig, place
from ledger.system import GPUS
from ledger.validation.memory import peaks, predicted

NAME = "PyTorch cuBLAS workspaces"
CONFIG_4096_8 = 4096 * 1024 * 8  # CUBLAS_WORKSPACE_CONFIG=:4096:8, and sm_90's default
DEFAULT_ELSEWHERE = 4096 * 1024 * 2 + 16 * 1024 * 8  # ":4096:2:16:8"


def _named(pl, rank):
    return dict(pl.memory_by_rank[rank].named)


# Blackwell: 32 MiB from pytorch/pytorch#175344 (use32mb: major 9, 10, 12), the torch the
# ledger's records run (2.12.0 on)
@pytest.mark.parametrize("gpu,each", [("h100-sxm", CONFIG_4096_8), ("h200", CONFIG_4096_8),
                                      ("a100-80gb", DEFAULT_ELSEWHERE),
                                      ("gb200", CONFIG_4096_8), ("b300", CONFIG_4096_8)])
def test_two_workspaces_on_the_output_layers_rank_only(gpu, each):
    pl = place(llama3_8b(), ParallelConfig(pp=4, dp=2, num_microbatches=8), gpu=GPUS[gpu])
    assert NAME not in _named(pl, 0) and NAME not in _named(pl, 2)  # TE GEMMs only
    assert _named(pl, 3)[NAME] == 2 * each
    given = place(llama3_8b(), ParallelConfig(pp=4, dp=2, num_microbatches=8,
                                              cublas_workspace_bytes=CONFIG_4096_8),
                  gpu=GPUS[gpu])
    assert _named(given, 3)[NAME] == 2 * CONFIG_4096_8


def test_routers_take_none_and_a_te_head_does_not():
    """Rank 0 of an MoE pp=2 run (no output layer, flash attention, no shared-expert gate)
    runs no GEMM through torch; rank 1 holds the output layer."""
    moe = place(mixtral_8x7b(), ParallelConfig(pp=2, ep=4, dp=4, num_microbatches=4),
                gpu=GPUS["h100-sxm"])
    assert NAME not in _named(moe, 0)
    assert _named(moe, 1)[NAME] == 2 * CONFIG_4096_8
    te_head = place(llama3_8b(), ParallelConfig(dp=8, precision="fp8-mxfp8",
                                                fp8_output_proj=True), gpu=GPUS["b200"])
    assert NAME not in dict(te_head.memory.named)


def test_unfused_attention_takes_them_on_every_rank():
    """Unfused attention (baddbmm / bmm through torch) on rank 0 of a pp=2 run: two."""
    pl = place(llama3_8b(), ParallelConfig(pp=2, dp=4, num_microbatches=4,
                                           flash_attention=False), gpu=GPUS["h100-sxm"])
    assert _named(pl, 0)[NAME] == _named(pl, 1)[NAME] == 2 * CONFIG_4096_8


def test_a_shared_expert_gate_takes_them_on_its_moe_ranks():
    """A shared-expert gate (torch.nn.functional.linear) on the MoE layers of rank 0."""
    from dataclasses import replace

    gated = replace(mixtral_8x7b(), shared_experts=1, shared_expert_gate=True)
    pl = place(gated, ParallelConfig(pp=2, ep=4, dp=4, num_microbatches=4),
               gpu=GPUS["h100-sxm"])
    assert _named(pl, 0)[NAME] == 2 * CONFIG_4096_8


def test_an_fp64_router_is_named_as_not_priced():
    """--moe-router-dtype fp64 puts the router on torch.mm (moe_utils.py L1396): named."""
    from ledger.io.megatron.reader import _EXACT

    ok, why = _EXACT["--moe-router-dtype"]
    assert not ok("fp64") and ok("fp32") and "PyTorch's cuBLAS workspaces" in why


def test_megatrons_goldens_after_the_step_on_the_tp4_pp1_shape():
    """gpt3_7b_tp4_pp1_memory_speed (CUBLAS_WORKSPACE_CONFIG :4096:8): the goldens' bytes
    after the step exceeded the ledger by 67.1 MiB on every platform before these two 32 MiB
    workspaces; now by at most 4 MiB (what is left: 3.1 MiB)."""
    rows = [r for r in peaks() if r.label.startswith("gpt3_7b_tp4_pp1") and
            r.metric == "resident"]
    assert len(rows) == 3
    for r in rows:
        assert 0 <= r.measured - predicted(r) < 4 * 2**20, r.label


@pytest.mark.parametrize("value,size", [(":4096:8", CONFIG_4096_8),
                                        (":4096:2:16:8", DEFAULT_ELSEWHERE),
                                        ("bogus", None)])
def test_a_launchs_environment_sets_the_size(value, size):
    """CUBLAS_WORKSPACE_CONFIG as PyTorch parses it (:SIZE:COUNT pairs, SIZE KiB x COUNT
    summed; none parsed: its default, so nothing applied)."""
    from ledger.io.environment import read_env

    flags, applied, unpriced, silent = read_env({"CUBLAS_WORKSPACE_CONFIG": value}, tp=1, cp=1)
    assert flags.get("cublas_workspace_bytes") == size and not unpriced
    assert (applied if size else silent) == [f"CUBLAS_WORKSPACE_CONFIG={value}"]



def test_the_goldens_reader_prices_the_cases_env_vars(tmp_path):
    """Megatron's functional tests export their ENV_VARS to the run: read through
    --from-megatron (``ledger.validation.megatron_goldens``), the GPT 7B tp4 pp1 case on
    A100 takes :4096:8 (32 MiB each, not A100's default 8.125 MiB) - what stays after its
    step priced to the byte as memory.py's row (tests/test_megatron_goldens.py holds both
    metrics on more cases)."""
    from ledger.cli.goldens import price_one
    from ledger.validation.megatron_goldens import goldens

    g = next(g for g in goldens() if g.case.endswith("gpt3_7b_tp4_pp1_memory_speed")
             and g.platform == "dgx_a100")
    got, why = price_one(g, str(tmp_path))
    row = next(r for r in peaks() if r.label == "gpt3_7b_tp4_pp1_memory_speed dgx_a100 "
               "after step")
    assert not why and {r.metric: r.ledger for r in got}["resident"] == predicted(row)


LAUNCH = "tests/fixtures/launch/megatron/blocks/training-examples__gpt3.sh"
EXPECTS = ":SIZE:COUNT pairs (SIZE KiB x COUNT, e.g. :4096:8)"
BAD = [(":99999999999999999999:999999999", "above 2^64 - 1"),  # PyTorch's stoull throws
       (":" + "9" * 5000 + ":1", "above 2^64 - 1"),  # beyond int()'s digit limit too
       (":4096:300000000", "1,144 TiB in all"),  # no GPU's memory holds it
       (":18446744073709551615:1", "in all")]  # each number fine, the total not


@pytest.mark.parametrize("value,why", BAD + [("abc", "got 'abc'")])
def test_the_flag_refuses_what_pytorch_refuses_in_one_line(value, why):
    from test_bad_input import run

    code, out, err = run(["report", "llama3-8b", "--gpus", "8", "--cublas-workspace-config",
                          value])
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: cublas_workspace_config: must be ") and EXPECTS in err
    assert why in err and "cublas_bytes" not in err and len(err) < 400


@pytest.mark.parametrize("value,why", BAD)
def test_a_launchs_environment_is_refused_alike(value, why):
    from test_bad_input import run

    code, out, err = run(["report", "--from-megatron",
                          f"CUBLAS_WORKSPACE_CONFIG={value} {LAUNCH}", "--vocab-size",
                          "50257", "--gpus", "8"])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "Megatron would refuse this launch" in err and "CUBLAS_WORKSPACE_CONFIG=:" in err
    assert why in err and EXPECTS in err and len(err) < 600


def test_a_launchs_unparsable_value_stays_pytorchs_default():
    """PyTorch warns and takes its default where no pair parses (a 'bogus' value): silent,
    as test_a_launchs_environment_sets_the_size holds; and ':0:0' applies 0 B."""
    from ledger.io.environment import cublas_config_bytes

    assert cublas_config_bytes("") is None and cublas_config_bytes(":0:0") == 0
    assert cublas_config_bytes(":4096:8junk") == CONFIG_4096_8  # PyTorch's regex search


def test_a_bridge_row_takes_its_containers_torch():
    """A Megatron-Bridge row whose release's container ran a torch before #175344
    (nvcr.io/nvidia/pytorch 26.02 and earlier: v0.4.x and before) keeps ":4096:2:16:8" on
    Blackwell; 26.04's on (v0.5.x, v0.6.0) and H100 rows take the default."""
    from dataclasses import replace

    from ledger.validation.bridge import rows
    from ledger.validation.bridge_stack import torch_workspace_of

    row = next(r for r in rows() if r.id.startswith("26.04.01/gb200/"))
    assert row.recipe["ref"] == "v0.4.2" and torch_workspace_of(row) == DEFAULT_ELSEWHERE
    assert torch_workspace_of(replace(row, recipe={**row.recipe, "ref": "v0.5.0"})) is None
    assert torch_workspace_of(replace(row, gpu="h100")) is None
