"""PyTorch's strategies against the ledger: the fake process group for fast volume checks
in one process, and real gloo processes for the whole `train-ledger verify`."""
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

# (the expert all-to-all routes real tokens: its splits need a real exchange)
FAKE = ("ddp", "fsdp2", "fsdp2-keep", "fsdp2-bf16", "hsdp", "tp", "tp-sp")


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
    The fake group has no wire, so the wire columns stay empty here. (Pipelining
    exchanges shapes as pickled objects, which the fake group cannot carry: it runs in
    the real-process test below.)"""
    import warnings

    from ledger.verify.strategies import STRATEGIES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = STRATEGIES[name](SimpleNamespace(rank=0))
    assert rows
    for r in rows:
        assert r.ok and r.ratio == pytest.approx(1.0), (r.strategy, r.collective, r.ratio)
        assert r.wire_bytes is None
    kinds = {r.collective for r in rows if r.check == "bytes"}
    expected = {"ddp": {"all_reduce"}, "fsdp2": {"all_gather", "reduce_scatter"},
                "hsdp": {"all_gather", "reduce_scatter", "all_reduce"}, "tp": {"all_reduce"},
                "tp-sp": {"all_gather", "reduce_scatter"}}
    assert kinds == expected.get(name, kinds)


@pytest.fixture(scope="module")
def verify_rows():
    r = subprocess.run([sys.executable, "-m", "ledger.verify", "--json"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["rows"]


def test_verify_on_real_processes(verify_rows):
    rows = verify_rows
    strategies = {row["strategy"] for row in rows}
    assert {"DDP", "FSDP2 reshard", "FSDP2 no reshard", "FSDP2 bf16, h x 2", "HSDP 2x2",
            "DTensor TP", "DTensor TP + SP", "pipelining GPipe", "pipelining 1F1B",
            "expert all-to-all"} <= strategies
    assert all(row["ok"] for row in rows)
    for row in rows:
        if row["check"] in ("bytes", "state", "activations"):
            assert row["ratio"] == pytest.approx(1.0), row
        if row["check"] in ("bytes", "routing"):  # every byte row was on the wire
            assert row["wire_bytes"] is not None and abs(row["wire_ratio"] - 1) <= 0.01, row
    ends = [row for row in rows if row["strategy"] == "pipelining 1F1B" and row["rank"] in (0, 3)]
    assert ends and all("one direction" in row["note"] for row in ends)


def _wire(rows, strategy, collective):
    got = {row["wire_bytes"] for row in rows
           if row["strategy"] == strategy and row["collective"] == collective}
    assert len(got) == 1, (strategy, collective, got)
    return got.pop()


def test_wire_bytes_by_hand(verify_rows):
    """The kernel's bytes (less gloo's framing), against hand arithmetic. The tiny Llama
    has 2 x 128 x 64 (embedding, output) + 2 x 36992 (layers) + 64 = 90432 fp32
    parameters: 361728 B."""
    rows = verify_rows
    assert _wire(rows, "DDP", "all_reduce") == 2 * 3 / 4 * 361728  # ring: 542592
    # FSDP2 gathers every parameter twice (forward, backward): 2 x 3/4 x 361728; gloo's
    # reduce-scatter of the grads is an all-reduce: 2 x 3/4 x 361728 as well
    assert _wire(rows, "FSDP2 reshard", "all_gather") == 542592
    assert _wire(rows, "FSDP2 reshard", "reduce_scatter") == 542592
    # TP=2, 4 x 128 tokens x 64 x 4 B = 131072 B per all-reduce, 2 forward + 2 backward,
    # a pair's ring sends 2 x 1/2 of each
    assert _wire(rows, "DTensor TP", "all_reduce") == 4 * 131072
    # 8 x 16 x 64 x 4 B = 32768 B per boundary tensor, 4 micro-batches each way
    interior = {row["wire_bytes"] for row in rows if row["strategy"] == "pipelining 1F1B"
                and row["rank"] in (1, 2)}
    assert interior == {8 * 32768}
    # bf16 at twice the width: 2 x 128 x 128 + 2 x 147712 + 128 = 328320 params, 2 B each,
    # gathered twice: 2 x 3/4 x 656640; gloo's reduce-scatter of the bf16 grads likewise
    assert _wire(rows, "FSDP2 bf16, h x 2", "all_gather") == 984960
    assert _wire(rows, "FSDP2 bf16, h x 2", "reduce_scatter") == 984960


def test_framing_is_under_one_percent_of_every_wire_row(verify_rows):
    for row in verify_rows:
        if row["framing_bytes"]:
            assert row["framing_bytes"] < 0.01 * (row["wire_bytes"] + row["framing_bytes"]), row


def test_expert_rows_route_real_tokens(verify_rows):
    """The router's loads are uneven and the busiest rank's wire follows them."""
    ep = [row for row in verify_rows if row["strategy"] == "expert all-to-all"]
    token = [row for row in ep if row["collective"] == "all_to_all, token side"]
    assert len(token) == 4 and len({row["wire_bytes"] for row in token}) == 4  # uneven
    busiest = [row for row in ep if "busiest" in row["collective"]]
    assert len(busiest) == 1 and busiest[0]["check"] == "routing"
    assert busiest[0]["predicted_bytes"] > 1.2 * token[0]["predicted_bytes"]  # rho > 1.2
