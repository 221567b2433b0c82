"""DeepSeek-V4: compressed attention, mHC residual streams, hash-routed first layers.

The count is held to transformers' own build in tests/test_released.py (the verbatim
released file) and tests/test_corpus.py (the class default); here: the Megatron-Bridge
rows' file is that release, the FLOPs per token are held to the figure NVIDIA publishes for
the same runs, and the small terms to hand arithmetic.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from ledger.anatomy import compressed
from ledger.arch import flops, layer_activations
from ledger.errors import LedgerError
from ledger.io.hf import read_config
from ledger.validation.bridge import CONFIG, rows

RELEASED = Path(__file__).parent / "fixtures/hf/released/deepseek-v4-flash.json"


def _bridge_file() -> dict:
    text = resources.files("ledger.validation").joinpath(
        "data/hf", CONFIG["deepseek-v4-flash"]).read_text()
    return json.loads(text)


@pytest.fixture(scope="module")
def flash():
    return read_config(_bridge_file())[0]


def test_the_rows_file_is_the_released_one():
    """Two public quotes of deepseek-ai/DeepSeek-V4-Flash's config.json agree key for key;
    the one the rows read adds only ``expert_dtype`` (the FP4 experts of the serving
    checkpoint, which training does not read)."""
    ours, released = _bridge_file(), json.loads(RELEASED.read_text())
    assert set(ours) - set(released) == {"expert_dtype"}
    assert {k: ours[k] for k in released} == released


def test_layers_as_the_file_lays_them_out(flash):
    """43 layers: 2 window-only, then CSA and HCA alternating, the last CSA (the 44th
    ratio, 0, is the MTP block's); every layer an MoE, the first three hash-routed."""
    ratios = flash.compressed.ratios
    assert (len(ratios), ratios[:4], ratios[-1]) == (43, (0, 0, 4, 128), 4)
    assert (ratios.count(0), ratios.count(4), ratios.count(128)) == (2, 21, 20)
    assert flash.moe_layers == 43 and flash.mtp_layers == 1 and flash.hc_mult == 4


def test_mhc_sites_by_hand(flash):
    """One site: fn (2 + 4) x 4 rows of 4 x 4096, base 24, scale 3; the head 4 x 16384 + 4
    + 1 (modeling_deepseek_v4.py L946-952, L1009-1011)."""
    assert compressed.hc_site(flash) == 24 * 16384 + 24 + 3
    assert compressed.hc_head(flash) == 4 * 16384 + 5
    assert flash.breakdown["hyper_connections"] == 43 * 2 * (24 * 16384 + 27) + 65541


def test_hash_layers_keep_the_router_weight(flash):
    """The hash router still scores with its h x E weight (L1114, L1123): 43 routers."""
    assert flash.breakdown["router"] == 43 * 4096 * 256


def test_compressed_keys_by_hand():
    """Query t reads floor((t + 1) / ratio) entries, at most the cap: s = 12, ratio 4 gives
    0,0,0,1,1,1,1,2,2,2,2,3 (mean 15 / 12); capped at 2: 14 / 12."""
    assert flops.compressed_keys(12, 4) == 15 / 12
    assert flops.compressed_keys(12, 4, cap=2) == 14 / 12


def _mtp_flops(m) -> float:
    """One MTP depth as Megatron-Bridge counts it beside the stack (flop_utils.py L840-847,
    L1156-1185 @ v0.6.0): one more layer (window-only attention: its ratio is 0), its
    2h x h projection and one more output head."""
    kind = m.mtp_kinds[0]
    w, s = m.sliding_window, m.seq_len
    core = 3 * 2 * m.heads * 2 * m.head_dim * (w - w * w / (2 * s))
    return 6 * (flops.layer_matmul_params(m, kind) + 2 * m.hidden ** 2
                + m.vocab * m.hidden) + core


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_flops_per_token_as_nvidia_publishes_them(flash, gpu):
    """The table's model TFLOP/s per GPU over its tokens/s per GPU is the FLOPs per token
    Megatron-Bridge counts for the run (706 / 7,776 and 748 / 8,224: 90.8 and 91.0 GFLOP).
    The ledger's, with the MTP depth the run trains, within 1%: it also counts the router
    and mHC projections, and the window's and the indexer's causal keys (Megatron-Bridge
    the whole window and every entry)."""
    row = next(r for r in rows() if r.model == "deepseek-v4-flash" and r.gpu == gpu)
    published = row.model_tflops_per_gpu * 1e12 / row.tokens_per_s_per_gpu
    ours = flops.model_flops_per_token(flash) + _mtp_flops(flash)
    assert ours == pytest.approx(published, rel=0.01)


def test_full_recompute_keeps_the_four_streams(flash):
    """A checkpointed layer keeps its input, which mHC makes n = 4 streams of h."""
    r = layer_activations(flash, micro_batch=1, recompute="full", layer=5)
    assert r.input_bytes == 4 * 4096 * 2 * 4096


def test_mhc_streams_saved_per_layer(flash):
    """Each layer's two sites keep their 4-stream input and the block output (5 h), and
    40 fp32 mapping values (2n + 2n^2 at n = 4 ... 8 + 32): 2 x (5 x 4096 x 2 + 40 x 4)
    bytes per token."""
    r = layer_activations(flash, micro_batch=1, layer=5)
    assert r.streams_bytes == 2 * (5 * 4096 * 2 + 40 * 4) * 4096


def _file(**over) -> dict:
    return {**_bridge_file(), **over}


@pytest.mark.parametrize("over, named", [
    ({"compress_rates": {"compressed_sparse_attention": 8,
                         "heavily_compressed_attention": 128}}, "compress_rates"),
    ({"n_shared_experts": 2}, "n_shared_experts"),
    ({"compress_ratios": [0, 2] * 22}, "compress_ratios"),
    ({"mlp_layer_types": ["dense"] * 43}, "mlp_layer_types"),
])
def test_what_is_not_modelled_is_refused_naming_it(over, named):
    with pytest.raises(LedgerError) as err:
        read_config(_file(**over))
    assert named in str(err.value) and "\n" not in str(err.value)


def test_layer_types_read_as_transformers_names_them():
    """transformers 5's own keys (layer_types) give the same stack as the legacy list."""
    names = {0: "sliding_attention", 4: "compressed_sparse_attention",
             128: "heavily_compressed_attention"}
    cfg = _file()
    ratios = cfg.pop("compress_ratios")[:43]
    spec = read_config({**cfg, "layer_types": [names[r] for r in ratios]})[0]
    assert spec.compressed.ratios == tuple(ratios)


def test_serving_cache_is_refused_naming_what_it_lacks(flash):
    """The compressed entries a decode step keeps are not modelled: serve says so."""
    from ledger.serve.cache import layer_caches

    with pytest.raises(LedgerError) as err:
        layer_caches(flash, range(flash.layers), tp=1, kv_bytes=2)
    assert "compressed entries" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("axis", ["tp", "cp"])
def test_tensor_and_context_parallel_attention_refused_naming_it(flash, axis):
    """Neither framework the ledger reads has a TP or CP form of this attention."""
    from ledger.config import ParallelConfig
    from ledger.placement import place

    with pytest.raises(LedgerError) as err:
        place(flash, ParallelConfig(**{axis: 2}, dp=1))
    assert "DeepSeek-V4's compressed attention" in str(err.value)


@pytest.mark.parametrize("over, named", [
    ({"kv_heads": 4}, "kv_heads"), ({"v_head_dim": 256}, "v_head_dim"),
    ({"qkv_bias": True}, "qkv_bias"), ({"out_bias": True}, "out_bias"),
    ({"qk_norm": "head"}, "qk_norm"), ({"attn_gate": "elementwise"}, "attn_gate"),
    ({"diff_attention": True}, "diff_attention"), ({"attn_logit_softcap": 50.0},
                                                   "attn_logit_softcap"),
    ({"attention_sinks": False}, "attention_sinks"),
    ({"local_attention": "chunked"}, "local_attention"),
])
def test_csa_refuses_what_its_counts_do_not_read(flash, over, named):
    """csa counts one K=V head, no biases, gates or caps, a sink per head: a field set
    otherwise would be dropped without a word (it moved no count), so it is refused."""
    import dataclasses

    with pytest.raises(LedgerError) as err:
        dataclasses.replace(flash, **over)
    assert str(err.value).startswith(f"{named}:") and "\n" not in str(err.value)


def test_indexer_without_csa_layers_refused(flash):
    """An indexer on a stack with no ratio-4 layer would run nowhere."""
    import dataclasses

    hca = compressed.CompressedAttention(ratios=(0, 0) + (128,) * 41, o_groups=8,
                                         o_lora_rank=1024)
    with pytest.raises(LedgerError) as err:
        dataclasses.replace(flash, compressed=hca)
    assert str(err.value).startswith("index_heads:")
    bare = dataclasses.replace(flash, compressed=hca, index_heads=0, index_head_dim=0,
                               index_topk=0)
    assert bare.params < flash.params


def test_mla_up_proj_reruns_the_attention_s_own_up_projections(flash):
    """Megatron's mla_up_proj on DeepSeek-V4 (deepseek_v4_hybrid_attention.py L691-878 @
    Megatron-LM 43e45e13, Bridge 0.6.0's .dev.commit) runs again q_b (q latent 1024 -> 64
    heads x 512) and the attention's kv_proj (hidden 4096 -> its one K=V head of 512), not
    a compressor's or the indexer's projections of the same names: 2 x 43 x (1024 x 32768
    + 4096 x 512) FLOPs a token."""
    from ledger.step.recompute import rerun_flops_per_token

    assert rerun_flops_per_token(flash, ("mla_up_proj",)) == 2 * 43 * (1024 * 32768
                                                                        + 4096 * 512)


@pytest.mark.parametrize("layer", [0, 2, 3])  # window-only, CSA, HCA
def test_mla_up_proj_drops_q_and_the_kv_head(flash, layer):
    """What the checkpoint discards once the kernel has run (L340-343, L866-878), per
    token under Megatron's BF16 table (norms keep their input and an fp32 statistic per
    row): q_b's output into the per-head norm (64 x 512 x 2 + 64 x 4), the kernel's q (64 x
    512 x 2), kv_proj's output into kv_norm (512 x 2 + 4) and the K=V head (512 x 2); q_b's
    input stays (the checkpoint's, BF16 as TE kept it)."""
    from ledger.arch.saved_tensors import MEGATRON

    def attn(mods):
        return layer_activations(flash, micro_batch=1, recompute="selective", modules=mods,
                                 table=MEGATRON, layer=layer).attention_bytes
    dropped = (65536 + 256) + 65536 + (1024 + 4) + 1024
    assert attn(("core_attn",)) - attn(("mla_up_proj",)) == 4096 * dropped


def test_typed_mla_up_proj_recompute_is_priced(capsys):
    """--recompute-modules mla_up_proj on DeepSeek-V4 is priced (the rerun above): nothing
    on stderr, figures not approximate, its reruns in the hardware FLOPs and the step."""
    import json as json_

    from ledger.cli import main

    argv = ["estimate", str(RELEASED), "--gpus", "128", "--ep", "64", "--recompute",
            "selective", "--json", "--recompute-modules"]
    got = {}
    for mod in ("mla_up_proj", "core_attn"):
        assert main(argv + [mod]) == 0
        out, err = capsys.readouterr()
        got[mod] = json_.loads(out)
        assert err == "" and "approximate" not in got[mod]
    up = got["mla_up_proj"]
    assert up["hfu"] > up["mfu"]


@pytest.mark.parametrize("argv,line", [
    ([str(RELEASED), "--gpus", "128", "--global-batch", "2048", "--tp", "2"],
     "error: tp: tp(2) > 1 but DeepSeek-V4's compressed attention under tensor parallelism"),
    ([str(RELEASED), "--gpus", "128", "--global-batch", "2048", "--cp", "2"],
     "error: cp: cp(2) > 1 but DeepSeek-V4's compressed attention under context"),
    (["llama3-8b", "--gpus", "16", "--global-batch", "64", "--tp", "16"],
     "error: kv_heads: kv_heads(8) is not divisible by tp(16)"),
])
def test_plan_names_a_pinned_width_the_model_cannot_split(capsys, argv, line):
    """plan with a pinned TP / CP the model cannot split says why, as estimate does, not
    'no placement divides gpus and global_batch under the pins given'."""
    from ledger.cli import main

    assert main(["plan", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(line), err


@pytest.mark.parametrize("key", ["sliding_window", "q_lora_rank", "o_groups", "hc_mult",
                                 "index_topk", "num_nextn_predict_layers"])
def test_a_null_width_is_refused_as_transformers_refuses_it(key):
    """DeepseekV4Config types these ``int`` in a strict dataclass (transformers 5.23.0
    configuration_deepseek_v4.py): a null is refused there (StrictDataclassFieldValidation-
    Error), not read as the class default (sliding_window 128, q_lora_rank 1024 ...)."""
    with pytest.raises(LedgerError) as err:
        read_config(_file(**{key: None}))
    assert str(err.value) == f"config.json: {key!r} must be an integer, got null " \
                             f"(DeepseekV4Config types it int and refuses None)"


def test_hash_layers_read_as_transformers_reads_them():
    """num_hash_layers: null is the class default (3, cfg:L279); a negative count is a
    malformed file, refused in one line, not read as no hash-routed layers."""
    assert read_config(_file(num_hash_layers=None))[0] == read_config(_file())[0]
    with pytest.raises(LedgerError) as err:
        read_config(_file(num_hash_layers=-1))
    assert str(err.value) == "config.json: 'num_hash_layers' must be an integer >= 0, got -1"


def test_a_malformed_file_is_one_line_exit_2(capsys, tmp_path):
    from ledger.cli import main
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_file(sliding_window=None)))
    code = main(["report", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "'sliding_window' must be an integer, got null" in err


def test_compressed_attention_does_not_take_te_s_window_kernel_rate(flash):
    """cuDNN's measured window kernel (gpt-oss's shape: 64 heads of 64, window 128) is the
    kernel TE runs for a sliding-window layer; DeepSeek-V4's compressed attention runs its
    own sparse core, so its window keeps the share every other core takes: no layer of it is
    counted as a TE window layer, on a GPU where the window kernel is measured."""
    from ledger.parallel import ParallelConfig
    from ledger.step.layer_time import local_share
    from ledger.system import system
    cfg = ParallelConfig(tp=1, pp=1, dp=8, micro_batch=1, num_microbatches=8, zero_stage=1)
    assert flash.sliding_window == 128 and flash.compressed is not None
    assert local_share(flash, cfg, system("gb200").gpu, flash.seq_len, False) == (0.0, (1.0, 1.0))
