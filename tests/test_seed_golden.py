"""The seed's six placements and its section-7 figures, number for number.

Every expected figure below is the seed's printed figure (its units relabelled to
IEC, since its arithmetic is binary), compared at the seed's printed precision.
"""
import pytest

from ledger.cli import main
from ledger.parallel import place, seed_placements
from ledger.render import fmt_bytes

# (per-GPU params, grads, optim, total, activation/layer, layers/stage, tokens/GPU/mb,
#  bubble, [(axis, kind, link, bytes)], total, nvlink, ib) -- as the seed prints them
SEED = [
    ("5.91 GiB", "5.91 GiB", "283.49 MiB", "12.09 GiB", "544.00 MiB", "7.9", 8192, "0.484",
     [("tp", "all_gather", "nvlink", "110.25 GiB"), ("tp", "reduce_scatter", "nvlink", "110.25 GiB"),
      ("pp", "send_recv", "ib", "1.00 GiB"), ("dp", "reduce_scatter", "ib", "5.86 GiB"),
      ("dp", "all_gather", "ib", "5.86 GiB")],
     "233.22 GiB", "220.50 GiB", "12.72 GiB"),
    ("5.91 GiB", "5.91 GiB", "566.97 MiB", "12.37 GiB", "544.00 MiB", "7.9", 8192, "0.319",
     [("tp", "all_gather", "nvlink", "220.50 GiB"), ("tp", "reduce_scatter", "nvlink", "220.50 GiB"),
      ("cp", "send_recv", "ib", "44.30 GiB"), ("pp", "send_recv", "ib", "2.00 GiB"),
      ("dp", "reduce_scatter", "ib", "5.81 GiB"), ("dp", "all_gather", "ib", "5.81 GiB")],
     "498.92 GiB", "441.00 GiB", "57.92 GiB"),
    ("47.25 MiB", "47.25 MiB", "283.49 MiB", "377.98 MiB", "4.25 GiB", "126.0", 8192, "0.000",
     [("dp", "reduce_scatter", "ib", "755.91 GiB"), ("dp", "all_gather", "ib", "1.48 TiB")],
     "2.21 TiB", "0.00 B", "2.21 TiB"),
    ("2.05 GiB", "2.05 GiB", "788.50 MiB", "4.88 GiB", "272.00 MiB", "10.0", 8192, "0.179",
     [("tp", "all_gather", "nvlink", "140.00 GiB"), ("tp", "reduce_scatter", "nvlink", "140.00 GiB"),
      ("pp", "send_recv", "ib", "1.00 GiB"), ("dp", "reduce_scatter", "ib", "1.93 GiB"),
      ("dp", "all_gather", "ib", "1.93 GiB")],
     "284.85 GiB", "280.00 GiB", "4.85 GiB"),
    ("4.11 GiB", "4.11 GiB", "788.50 MiB", "8.98 GiB", "272.00 MiB", "20.0", 8192, "0.086",
     [("tp", "all_gather", "nvlink", "140.00 GiB"), ("tp", "reduce_scatter", "nvlink", "140.00 GiB"),
      ("pp", "send_recv", "ib", "1.00 GiB"), ("dp", "reduce_scatter", "ib", "3.98 GiB"),
      ("dp", "all_gather", "ib", "3.98 GiB")],
     "288.96 GiB", "280.00 GiB", "8.96 GiB"),
    ("2.05 GiB", "2.05 GiB", "12.32 GiB", "16.43 GiB", "2.12 GiB", "80.0", 8192, "0.000",
     [("dp", "reduce_scatter", "ib", "129.36 GiB"), ("dp", "all_gather", "ib", "258.73 GiB"),
      ("dp", "all_reduce", "ib", "3.85 GiB")],
     "391.94 GiB", "0.00 B", "391.94 GiB"),
]
WORLDS = [16384, 8192, 16384, 1024, 1024, 1024]


@pytest.mark.parametrize("i", range(6))
def test_seed_block(i):
    model, cfg = seed_placements()[i]
    pl = place(model, cfg)
    (p, g, o, tot, act, lps, tok, bub, comms, total, nv, ib) = SEED[i]
    st = pl.per_gpu
    assert [fmt_bytes(x) for x in (st.params_bytes, st.grads_bytes, st.optim_bytes,
                                   st.total_bytes)] == [p, g, o, tot]
    assert fmt_bytes(pl.activation_bytes_per_layer) == act
    assert f"{pl.layers_per_stage:.1f}" == lps
    assert pl.tokens_per_gpu_per_mb == tok
    assert f"{pl.bubble_fraction:.3f}" == bub
    assert [(c.axis, c.kind, c.link, fmt_bytes(c.bytes)) for c in pl.comms] == comms
    links = pl.by_link()
    assert (fmt_bytes(pl.total_bytes()), fmt_bytes(links["nvlink"]),
            fmt_bytes(links["ib"])) == (total, nv, ib)
    assert cfg.world == pl.world == WORLDS[i]


def test_python_m_ledger_parallel_prints_the_six_blocks(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.count(" GPUs [ideal]\n") == 6  # each block names its convention
    for block in SEED:
        assert f"total per GPU per step: {block[9]:>12}" in out


GB, GiB, MB, MiB = 1e9, 2**30, 1e6, 2**20


def test_section7_figures_for_405b():
    """TP ~ 220 GB on NVLink, DP ~ 12.6 GB and PP ~ 1 GB on IB per GPU per step; one
    activation tensor 268 MB, one TP all-reduce 470 MB, 1.88 GB per layer; PP tensor
    33.5 MB; CP 44.3 GiB with 4 MiB K/V blocks; bubbles 0.484 and 0.319."""
    (m405, c16k), (mlong, clong) = seed_placements()[:2]
    pl = place(m405, c16k)
    assert round(pl.total_bytes("tp") / GiB, 1) == 220.5
    assert round(pl.total_bytes("dp") / GB, 1) == 12.6
    assert round(pl.total_bytes("pp") / GiB, 2) == 1.00
    s_act = m405.seq_len * m405.hidden * 2
    assert round(s_act / MB) == 268
    from ledger.placement import coll_bytes
    assert round(coll_bytes("all_reduce", 8, s_act) / MB) == 470
    assert round(4 * coll_bytes("all_reduce", 8, s_act) / GB, 2) == 1.88
    assert 33.5 <= s_act / 8 / MB < 33.6  # the seed's "33.5 MB" PP tensor
    long = place(mlong, clong)
    assert round(long.total_bytes("cp") / GiB, 2) == 44.30
    assert int(long.total_bytes("cp") / GB) == 47  # the seed's "47 GB" (47.56e9 B)
    kv_block = 8192 * 2 * (mlong.kv_dim / 8) * 2
    assert kv_block == 4 * MiB
    assert (round(pl.bubble_fraction, 3), round(long.bubble_fraction, 3)) == (0.484, 0.319)


def test_section7_heaviest_stage_is_not_the_even_split():
    """Megatron puts the embedding on stage 0 and the output layer on the last: the
    70B TP8 x PP8 placement's last stage holds ~9% more than the even split."""
    m70, cfg = seed_placements()[3]
    pl = place(m70, cfg)
    assert pl.heaviest_rank == 7
    ratio = pl.heaviest_stage.total_bytes / pl.per_gpu.total_bytes
    assert 1.08 < ratio < 1.10
