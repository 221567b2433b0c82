"""A DP group that spans two NVLink domains moves its ring through the NICs of its ranks
in each domain (``ledger.step.nccl.group_bandwidth``), not through one NIC a rank: Megatron-
Bridge's 25.09 Llama 3.1 405B FP8 row on 128 GB200 (TP 2, Megatron-FSDP over DP 64, one
micro-batch of 8,192 tokens a step) gathers 403 GB of FP8 parameters and reduce-scatters
400 GB of BF16 gradients a step on every GPU - at one 400 Gb/s NIC, 20 s against the
published 5.6 s step; its 64-rank ring holds 36 and 28 ranks in the two racks, whose
NICs together outrun NVLink."""
import pytest

from ledger.render.bridge import model_of, outcome, system_of
from ledger.validation.bridge import rows

ROW = "25.09/gb200/llama3.1-405b/fp8_cs/128g/gbs64/mbs1"


def _row():
    return next(r for r in rows() if r.id == ROW)


def test_megatron_fsdp_over_two_racks_is_not_bound_to_one_nic():
    """Before: 12.1 s of DP exposed, -67.9% (tokens/s/GPU 234 against 729)."""
    out = outcome(_row())
    assert out.status == "ran"
    assert out.error == pytest.approx(0.0, abs=0.25)


def test_the_rows_gathers_run_at_nvlink_not_a_nic():
    """The step's parameter gathers (forward and backward, ZeRO-3) move their bytes at
    about the NVLink a GPU has at the link efficiency (720 GB/s), not its one NIC's 40."""
    from ledger.render.bridge import config_of, precision_of, tp_overlap
    from ledger.step import estimate, structure

    r = _row().as_run()
    model, sysm = model_of(r), system_of(r)
    prec, _ = precision_of(r)
    cfg, _ = config_of(r, prec, model)
    est = estimate(model, cfg, sysm, precision=prec, optimizer="adam",
                   tp_overlap=tp_overlap(r))
    fwd_s, bwd_s, _, _ = structure(model, cfg, sysm, est.placement).dp_layer_s
    moved = sum(c.bytes for c in est.placement.comms if c.axis == "dp"
                and c.kind == "all_gather")
    nvlink = sysm.intra_bytes_per_s * sysm.link_efficiency
    assert moved / (fwd_s + bwd_s) == pytest.approx(nvlink, rel=0.15)
