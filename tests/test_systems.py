"""Systems: the presets and their sources, hosts apart from NVLink domains, the links a
group crosses, NCCL's NVLS inside a domain, --system files, and the published throughput
ratios of Grace-Blackwell racks against HGX hosts of the same GPUs (Megatron-Bridge)."""
import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from ledger.cli import main
from ledger.io import load_system
from ledger.io.system import SYSTEM_KEYS
from ledger.model import deepseek_v3
from ledger.placement import Layout, place
from ledger.placement.layout import segment
from ledger.config import ParallelConfig
from ledger.step.nccl import collective_s
from ledger.system import (GPU_SOURCES, GPUS, LINK_SOURCES, POWER_SOURCES, SYSTEMS, GiB,
                           MiB, system)

ROOT = Path(__file__).resolve().parents[1]
OSS = str(ROOT / "tests/fixtures/systems/gpt-oss-120b.json")
NEW = ("b300", "gb200", "gb300", "mi325x", "mi355x", "h20", "l40s", "l4", "rtx-pro-6000")


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_every_preset_has_its_sources_and_gpus_lists_them():
    assert set(NEW) <= set(GPUS)
    assert set(GPUS) == set(SYSTEMS) == set(GPU_SOURCES) == set(POWER_SOURCES) \
        == set(LINK_SOURCES)
    code, out, _ = cli("gpus")
    assert code == 0
    sources = out[out.index("sources:"):]
    for name in GPUS:
        block = sources[sources.index(f"\n  {name}\n"):]
        assert block.split("\n")[2].startswith("    chip:   " + GPU_SOURCES[name][:40])
    code, out, _ = cli("gpus", "--json")
    rows = {g["name"]: g for g in json.loads(out)}
    assert all(rows[n]["system_source"] == LINK_SOURCES[n] for n in GPUS)


def test_the_nvl72_racks_as_their_mlperf_system_files_give_them():
    # mlcommons/training_results_v5.1 @ 4da2d1cd NVIDIA/systems/tyche_ngpu72 (GB200) and
    # theia_ngpu72 (GB300): 18 nodes of 4, 189471 / 284208 MiB, 4x ConnectX-7 400 Gb/s /
    # 4x ConnectX-8 800 Gb/s a node; MLPerf v5.1 inference: 960 GB host memory a node,
    # TGP 1200 / 1400 W. NVIDIA GB200 / GB300 NVL72 datasheets: 2.5 PFLOP/s BF16 dense,
    # FP4 10 / 15 PFLOP/s dense, NVLink 1.8 TB/s both directions.
    for name, mib, nic_gbit, fp4, watts in (("gb200", 189471, 400, 10e15, 1200),
                                            ("gb300", 284208, 800, 15e15, 1400)):
        s = system(name)
        assert (s.gpus_per_node, s.gpus_per_domain) == (4, 72)
        assert s.gpu.hbm_bytes == mib * MiB and s.gpu.bf16_flops == 2.5e15
        assert s.gpu.fp4_flops == fp4 and s.gpu.board_power_w == watts
        assert s.inter_bytes_per_s == nic_gbit * 1e9 / 8  # one NIC per GPU
        assert s.intra_bytes_per_s == 900e9 and s.nvls
        assert s.host_memory_bytes == 960e9  # per host of 4, not per rack
    b300 = system("b300")  # DGX B300 MLPerf: 8 a node, 2 TB host, 1100 W; HGX B300: FP4 105/8 PF
    assert (b300.gpus_per_node, b300.gpus_per_domain, b300.gpu.board_power_w) == (8, 8, 1100)
    assert b300.host_memory_bytes == 2048 * GiB and b300.gpu.fp4_flops == 13.125e15


def test_a_job_fills_its_domains_in_segments_of_whole_hosts():
    # Megatron-Bridge executors.py L168-177: --segment = nodes up to 18, else the largest
    # divisor of the nodes up to 18 (hosts of 4: 72 GPUs a rack)
    assert segment(256, 4, 72) == 64  # 64 hosts: segments of 16
    assert segment(288, 4, 72) == 72 and segment(144, 4, 72) == 72
    assert segment(96, 4, 72) == 48  # 24 hosts: 12 divides 24, 18 does not
    assert segment(40, 4, 72) == 40  # one rack holds the job
    assert segment(1024, 8, 8) == 8  # a DGX: the domain is the host
    with pytest.raises(Exception, match="gpus_per_domain"):
        Layout(tp=2, gpus_per_node=8, gpus_per_domain=36)


def test_deepseek_v3_ep64_on_256_gb200_is_priced_at_nvlink():
    """Megatron-Bridge's DeepSeek-V3 on 256 GB200 (performance-summary.md, 26.08: TP 1,
    PP 4, EP 64): the EP groups are 64 consecutive ranks, one 64-GPU segment of a rack,
    so every routed token rides NVLink; the same GPUs counted as 4-GPU hosts without the
    rack cross hosts on the NICs."""
    model = deepseek_v3()
    cfg = ParallelConfig(tp=1, pp=4, dp=64, ep=64, zero_stage=1, micro_batch=1,
                         num_microbatches=64)  # the experts come from the ModelSpec
    rack, trays = system("gb200"), system("gb200", gpus_per_domain=4)
    on = place(model, cfg, gpus_per_node=4, gpus_per_domain=rack.gpus_per_domain)
    off = place(model, cfg, gpus_per_node=4, gpus_per_domain=4)
    ep_on = {c.link for c in on.comms if c.axis == "ep"}
    ep_off = {c.link for c in off.comms if c.axis == "ep"}
    assert ep_on == {"nvlink"} and "ib" in ep_off
    assert {c.link for c in on.comms if c.axis == "pp"} == {"ib"}  # 4 segments apart
    argv = ["estimate", "deepseek-v3", "--gpus", "256", "--pp", "4", "--ep", "64",
            "--zero", "1", "--global-batch", "4096", "--seq", "4096", "--json"]
    on_json = json.loads(cli(*argv, "--gpu", "gb200")[1])
    assert on_json["nvlink_domains"] == {"gpus_per_node": 4, "gpus_per_domain": 72,
                                         "domain": 64, "links": {"ep": "nvlink", "dp": "nvlink",
                                                                 "pp": "ib"}}
    t_on = on_json["breakdown"].get("ep_comm", 0.0)
    t_off = json.loads(cli(*argv, "--gpu", "gb200", "--gpus-per-domain", "4")[1])[
        "breakdown"]["ep_comm"]
    # NVLink 900 GB/s against one 400 Gb/s NIC per GPU: 18x the bandwidth
    assert t_on < t_off / 4
    assert trays.intra_bytes_per_s / trays.inter_bytes_per_s == 18
    code, out, _ = cli(*argv[:-1], "--gpu", "gb200")
    assert "NVLink domains      256 GPUs (64 hosts of 4 in 4 NVLink domain(s) of 64)" in out
    assert "[nvlink ep dp; nics pp]" in out


def test_host_memory_and_offload_are_per_host_not_per_rack():
    """CPU offload fills the memory of the host a GPU sits in: 4 GPUs' optimizer state on
    a GB200 tray's 960 GB, whatever the NVLink domain spans."""
    model = deepseek_v3()
    cfg = ParallelConfig(tp=1, pp=4, dp=64, ep=64, zero_stage=3, framework="deepspeed",
                         offload="optimizer")
    tray = place(model, cfg, gpus_per_node=4, gpus_per_domain=72).host_bytes_per_node
    assert tray > 0
    assert place(model, cfg, gpus_per_node=4, gpus_per_domain=4).host_bytes_per_node == tray
    assert place(model, cfg, gpus_per_node=8, gpus_per_domain=72).host_bytes_per_node == \
        pytest.approx(2 * tray)
    assert system("gb200").host_memory_bytes == 960e9  # per host, not per rack


def test_nvls_inside_one_domain_as_nccls_tuning_model_prices_it():
    """tuning.cc @ 5067397c: NVLS all-reduce bus bandwidth = 2 x nvlsEfficiency (Blackwell
    0.74) x the NVLink's, latency 25 us; reduce-scatter / all-gather x (n-1)/n over the
    whole payload; never across domains."""
    n, bw, payload = 8, 720e9, 1 << 30
    wire = 2 * payload * (n - 1) / n
    nvls = collective_s("all_reduce", wire, n, 1, bw, "blackwell", nvls=True)
    assert nvls == pytest.approx(25e-6 + wire / (2 * 0.74 * bw))
    ring = collective_s("all_reduce", wire, n, 1, bw, "blackwell")
    assert nvls < ring
    across = collective_s("all_reduce", wire * 8 / 7 * 63 / 64, 64, 8, bw, "blackwell",
                          nvls=True)
    assert across == collective_s("all_reduce", wire * 8 / 7 * 63 / 64, 64, 8, bw,
                                  "blackwell")
    ag = payload * (n - 1) / n
    assert collective_s("all_gather", ag, n, 1, bw, "blackwell", nvls=True) == \
        collective_s("all_gather", ag, n, 1, bw, "blackwell")  # the ring's 1.0 x bw wins


def test_every_system_file_key_is_documented_and_the_example_loads(tmp_path):
    doc = (ROOT / "docs/systems.md").read_text(encoding="utf-8")
    assert [k for k in SYSTEM_KEYS if f"`{k}`" not in doc] == []
    s = load_system(ROOT / "examples/gb200-nvl36.toml")
    assert (s.gpu.name, s.gpus_per_node, s.gpus_per_domain, s.nvls) == ("gb200", 4, 36, True)
    p = tmp_path / "rack.toml"
    p.write_text('gpu = "gb200"\ngpus_per_domain = 36\n')
    code, _, err = cli("layout", "--system", str(p), "--tp", "4", "--gpus-per-domain", "72")
    assert code == 2 and "gpus_per_domain: given twice: --gpus-per-domain 72 and 36" in err
    p.write_text('gpu = "b200"\ngpus_per_domain = 12\n')
    code, _, err = cli("estimate", "llama3-8b", "--gpus", "8", "--system", str(p))
    assert code == 2 and "a domain is whole hosts" in err
    p.write_text('gpu = "b200"\nnvls = "yes"\n')
    code, _, err = cli("estimate", "llama3-8b", "--gpus", "8", "--system", str(p))
    assert code == 2 and "nvls: must be true or false" in err


def test_gpu_memory_alone_is_refused_where_the_chip_prices_time():
    base = ["llama3-8b", "--gpus", "8", "--gpu-memory", "80"]
    code, _, err = cli("estimate", *base)
    assert code == 2 and err.count("\n") == 1 and "989 TFLOP/s" in err and "--gpu NAME" in err
    assert cli("estimate", *base, "--gpu", "l40s")[0] == 0  # named: its peaks, this memory
    assert cli("report", *base)[0] == 0  # memory only


# Published Megatron-Bridge pre-training throughputs (tokens/s/GPU), read from the
# archive as NVIDIA-NeMo/Megatron-Bridge @ 067f987d ships it (docs/performance-summary-
# archive.md, a fixture: tests/fixtures/systems/SOURCES.md). The rule that picks the pairs:
# every Grace-Blackwell rack row with the HGX row of its GPU (GB200 / B200, GB300 / B300)
# in one release with the same model, GPU count, precision, global batch and sequence
# length, in the precisions this branch prices (BF16; FP8-CS = --fp8-recipe tensorwise;
# 25.09's rows without a precision column are FP8-CS, their FP8-MX figures in
# parentheses), of the models the ledger has. Each side runs its own published parallel
# sizes; every other setting follows one rule for all rows: Megatron-Bridge's pre-training
# defaults (recipes/common.py L80-88 @ 067f987d: distributed optimizer, overlapped grad
# reduce and param gather; an FSDP column = Megatron-FSDP, --zero 3), the ledger's
# megatron defaults for the rest.
ARCHIVE = ROOT / "tests/fixtures/systems/megatron-bridge-performance-summary-archive.md"
MODELS = {"GPT OSS 120B": OSS, "LLAMA3_8B": "llama3-8b", "LLAMA3_70B": "llama3-70b",
          "LLAMA3.1_405B": "llama3-405b", "Qwen3_30B_a3B (tokendrop)": "qwen3-30b-a3b",
          "Qwen3_30B_a3B": "qwen3-30b-a3b"}
RACKS = (("DGX-GB200", "DGX-B200"), ("DGX-GB300", "DGX-B300"))


def _first(cell: str) -> str:
    return cell.split("(")[0].strip()


def archive_rows(path=ARCHIVE):
    """Every pre-training row: release, system, model, precision, sizes, tokens/s/GPU."""
    release = system_ = model = header = None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            m = re.match(r"## ([0-9.]+) NeMo Container", line)
            release = m.group(1) if m else None
        elif line.startswith("#### System:"):
            system_, model = line.split(":", 1)[1].strip(), None
        elif line.startswith("#### Model:"):
            model, system_ = line.split(":", 1)[1].strip(), None
        elif line.startswith(("| System", "| Model")):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
        elif line.startswith("| ") and not line.startswith("|--") and header and release:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != len(header):
                continue
            d = dict(zip(header, cells))
            row = {"release": release, "line": n, "system": d.get("System", system_),
                   "model": d.get("Model", model),
                   "precision": _first(d.get("Precision", "FP8-CS")),
                   "gpus": int(d["#-GPUs"]), "gbs": int(_first(d["GBS"])),
                   "mbs": int(_first(d["MBS"])), "seq": int(_first(d["Sequence Length"])),
                   "tokens": float(_first(d["Tokens / sec / GPU"]))}
            for k in ("FSDP", "TP", "PP", "CP", "VP", "EP"):
                v = _first(d.get(k, "n/a"))
                row[k.lower()] = int(v) if v.isdigit() else 0
            yield row


def rack_host_pairs():
    """(id, rack row, host row) by the rule above; DeepSeek-V3 left out, its reason
    being that PP 4 x VP 4 and PP 16 over 61 layers need the recipe's pipeline layout,
    which the table does not give."""
    groups = {}
    for r in archive_rows():
        key = (r["release"], r["model"], r["gpus"], r["precision"], r["gbs"], r["seq"])
        groups.setdefault(key, {})[r["system"]] = r
    out = []
    for key, by in groups.items():
        for rack, host in RACKS:
            if rack in by and host in by and key[3] in ("BF16", "FP8-CS") \
                    and key[1] in MODELS:
                out.append((f"{key[0]}-{key[1].split()[0]}-{rack[4:].lower()}", by[rack],
                            by[host]))
    return out


# Measured misses (predicted / published ratio - 1 at this commit), and why. The 26.02 gpt-
# oss rows run the same placement (EP 64) on both systems: the rack's NVLink carries the
# all-to-all the HGX hosts send through their NICs, a difference the ledger prices; but it
# prices gpt-oss's fine-grained expert GEMMs about twice as fast as measured (the fine-
# grained-MoE step-time issue), so the rack's step, left with little communication, comes
# out too short (GB200 +69% absolute) while the host's, dominated by its NICs, does not
# (B200 +12%). Halving the GEMM efficiency on both sides (a diagnostic, not a fit) brings
# 26.02 GB200 / B200 to +13%. The 405B row's GB200 side runs Megatron-FSDP (ZeRO-3) at
# TP 2, which the ledger prices far off (does not fit; 108 tokens/s against 729).
MISSES = {"26.02-GPT-gb200": "+51%: fine-grained MoE compute priced ~2x fast",
          "26.02-GPT-gb300": "+27%: fine-grained MoE compute priced ~2x fast",
          "26.02.01-GPT-gb200": "+16%: as 26.04.01 (+8%), its B200 row 5% faster",
          "25.09-LLAMA3.1_405B-gb200": "Megatron-FSDP at TP 2 priced ~7x slow",
          # issue 32's host term, fitted on dropless runs (ledger.step.host): at one sequence
          # a micro-batch the B200 side is priced launch-bound, where this token-drop run
          # (experts padded, no host sync) published 4.7 ms a layer
          "25.09-Qwen3_30B_a3B-gb200": "+211%: B200's token-drop mb 1 priced host-bound"}
PAIRS = rack_host_pairs()


def _tokens(gpu: str, r: dict) -> float:
    argv = ["estimate", MODELS[r["model"]], "--gpus", str(r["gpus"]), "--global-batch",
            str(r["gbs"]), "--micro-batch", str(r["mbs"]), "--seq", str(r["seq"]), "--gpu",
            gpu, "--zero", "3" if r["fsdp"] else "1", "--overlap-grad-reduce",
            "--overlap-param-gather", "--json"]
    argv += ["--precision", "bf16"] if r["precision"] == "BF16" else \
        ["--precision", "fp8", "--fp8-recipe", "tensorwise"]
    if "(tokendrop)" in r["model"]:  # capacity 1.0, expert inputs padded to it
        argv += ["--moe-pad-expert-input-to-capacity"]
    for axis in ("tp", "pp", "cp", "vp", "ep"):
        if r[axis] > 1:
            argv += [f"--{axis}", str(r[axis])]
    code, out, err = cli(*argv)
    assert code == 0, err
    return json.loads(out)["tokens_per_s_per_gpu"]


def test_the_rule_finds_the_published_pairs():
    ids = {p[0]: (p[1]["tokens"], p[2]["tokens"]) for p in PAIRS}
    # the archive's lines 235 / 237 and 516 / 518 (26.04.01 and 26.02 gpt-oss-120b)
    assert ids["26.04.01-GPT-gb200"] == (16640, 13568)
    assert ids["26.02-GPT-gb300"] == (19412, 8359)
    assert len(PAIRS) == 12 and set(MISSES) <= set(ids)
    assert sum(p[0].endswith("gb300") for p in PAIRS) == 4


@pytest.mark.parametrize("pair", [
    pytest.param(p, id=p[0], marks=pytest.mark.xfail(reason=MISSES[p[0]], strict=True))
    if p[0] in MISSES else pytest.param(p, id=p[0]) for p in PAIRS])
def test_rack_vs_host_throughput_ratio_within_15_percent(pair):
    _, rack, host = pair
    published = rack["tokens"] / host["tokens"]
    predicted = _tokens(rack["system"][4:].lower(), rack) / \
        _tokens(host["system"][4:].lower(), host)
    assert (predicted > 1) == (published > 1)  # the direction
    assert abs(predicted / published - 1) <= 0.15, (predicted, published)


if __name__ == "__main__":  # the table docs/systems.md quotes: python tests/test_systems.py
    for pid, rack, host in PAIRS:
        a = _tokens(rack["system"][4:].lower(), rack)
        b = _tokens(host["system"][4:].lower(), host)
        pub, pred = rack["tokens"] / host["tokens"], a / b
        print(f"{pid:<27} L{rack['line']}/L{host['line']}  published {rack['tokens']:>6,.0f} / "
              f"{host['tokens']:>6,.0f} = {pub:.3f}  predicted {a:>6,.0f} / {b:>6,.0f} = "
              f"{pred:.3f}  {pred / pub - 1:+6.1%}" + ("  (xfail)" if pid in MISSES else ""))
