"""PyTorch's own cuBLAS workspaces (issue 31): the output layer's and the routers' GEMMs run
through torch (Megatron-LM d98e8a64 tensor_parallel/layers.py L459, L683, L780-782;
moe/moe_utils.py L1396, L1435-1436), each (handle, stream) keeping a workspace from the
caching allocator (pytorch@26a39059 CublasHandlePool.cpp), a handle per thread: the
forward's and the autograd engine's - ``ledger.placement.buffers``."""
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


@pytest.mark.parametrize("gpu,each", [("h100-sxm", CONFIG_4096_8), ("h200", CONFIG_4096_8),
                                      ("a100-80gb", DEFAULT_ELSEWHERE),
                                      ("gb200", DEFAULT_ELSEWHERE)])
def test_two_workspaces_on_the_output_layers_rank_only(gpu, each):
    pl = place(llama3_8b(), ParallelConfig(pp=4, dp=2, num_microbatches=8), gpu=GPUS[gpu])
    assert NAME not in _named(pl, 0) and NAME not in _named(pl, 2)  # TE GEMMs only
    assert _named(pl, 3)[NAME] == 2 * each
    given = place(llama3_8b(), ParallelConfig(pp=4, dp=2, num_microbatches=8,
                                              cublas_workspace_bytes=CONFIG_4096_8),
                  gpu=GPUS[gpu])
    assert _named(given, 3)[NAME] == 2 * CONFIG_4096_8


def test_routers_take_them_on_every_moe_rank_and_a_te_head_does_not():
    moe = place(mixtral_8x7b(), ParallelConfig(pp=2, ep=4, dp=4, num_microbatches=4),
                gpu=GPUS["h100-sxm"])
    assert _named(moe, 0)[NAME] == _named(moe, 1)[NAME] == 2 * CONFIG_4096_8
    te_head = place(llama3_8b(), ParallelConfig(dp=8, precision="fp8-mxfp8",
                                                fp8_output_proj=True), gpu=GPUS["b200"])
    assert NAME not in dict(te_head.memory.named)


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
