"""PyTorch's strategies against the ledger: the fake process group for fast volume checks
in one process, and real gloo processes for the whole `train-ledger verify`."""
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

FAKE = ("ddp", "fsdp2", "fsdp2-keep", "fsdp2-bf16", "hsdp", "tp", "tp-sp", "ep")


@pytest.fixture(scope="module")
def fake_world():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("name", FAKE)
def test_strategy_volumes_on_the_fake_process_group(fake_world, name):
    """Every byte row and state row is exact (ratio 1.000) for rank 0 of a world of 4.
    (Pipelining exchanges shapes as pickled objects, which the fake group cannot carry:
    it runs in the real-process test below.)"""
    import warnings

    from ledger.verify.strategies import STRATEGIES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = STRATEGIES[name](SimpleNamespace(rank=0))
    assert rows
    for r in rows:
        assert r.ok and r.ratio == pytest.approx(1.0), (r.strategy, r.collective, r.ratio)
    kinds = {r.collective for r in rows if r.check == "bytes"}
    expected = {"ddp": {"all_reduce"}, "fsdp2": {"all_gather", "reduce_scatter"},
                "hsdp": {"all_gather", "reduce_scatter", "all_reduce"}, "tp": {"all_reduce"},
                "tp-sp": {"all_gather", "reduce_scatter"}, "ep": {"all_to_all"}}
    assert kinds == expected.get(name, kinds)


def test_verify_on_real_processes():
    r = subprocess.run([sys.executable, "-m", "ledger.verify", "--json"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)["rows"]
    strategies = {row["strategy"] for row in rows}
    assert {"DDP", "FSDP2 reshard", "FSDP2 no reshard", "FSDP2 bf16", "HSDP 2x2", "DTensor TP",
            "DTensor TP + SP", "pipelining GPipe", "pipelining 1F1B",
            "expert all-to-all"} <= strategies
    assert all(row["ok"] and row["ratio"] == pytest.approx(1.0) for row in rows)
    ends = [row for row in rows if row["strategy"] == "pipelining 1F1B" and row["rank"] in (0, 3)]
    assert ends and all("one direction" in row["note"] for row in ends)
