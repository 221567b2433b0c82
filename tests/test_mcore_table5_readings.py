"""Table 5 of the Megatron Core MoE report under the readings docs/memory.md quotes
(``ledger.validation.memory_mcore.modelzoo_readings``): the model scripts' settings held to
the scripts themselves (tests/fixtures/modelzoo, Megatron-MoE-ModelZoo@020b8136), the page
to benchmarks/mcore_table5_readings.py's output."""
import re
from pathlib import Path

from ledger.render.mcore_memory import table5_readings_table
from ledger.validation.memory_mcore import MODELZOO_DTYPES, MODELZOO_OFFLOAD, table5

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "fixtures" / "modelzoo"


def test_the_readings_are_the_scripts_own():
    readme = (ZOO / "best_practice__qwen3__readme.md").read_text(encoding="utf-8")
    mxfp8 = next(line for line in readme.splitlines() if line.startswith("PR=mxfp8 MBS=3"))
    # the GB200 MXFP8 command: Table 5's TP1 EP64 offload run (TP1 PP4 VPP6 EP64 MBS 3)
    assert "TP=1 PP=4 VPP=6 EP=64" in mxfp8 and "GBS=3072" in mxfp8
    assert f"--offload-modules {' '.join(MODELZOO_OFFLOAD)} " in mxfp8
    script = (ZOO / "sbatch_benchmarking.sh").read_text(encoding="utf-8").splitlines()
    assert script[97] == 'if [[ ${PR} == "mxfp8" ]]; then'  # L98, its branch to L105
    assert "--use-precision-aware-optimizer --main-grads-dtype fp32" in script[104]
    assert {f"--{k.replace('_', '-')}" for k in ("exp_avg_dtype", "exp_avg_sq_dtype")} <= \
        set(script[104].split()) and MODELZOO_DTYPES["exp_avg_dtype"] == "bf16"
    off = next(r for r in table5() if "offload moe_act" in r.label)
    assert (off.cfg.tp, off.cfg.pp, off.cfg.vp, off.cfg.ep, off.cfg.micro_batch) == \
        (1, 4, 6, 64, 3)


def test_docs_quote_the_benchmarks_output():
    page = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    assert table5_readings_table() + "\n" in re.findall(r"```text\n(.*?)```", page, re.S)
    assert "python benchmarks/mcore_table5_readings.py" in page


def test_the_guide_reading_is_the_guides_launch():
    """Megatron-LM's DeepSeek-V3 GB200 reproduce guide (tests/fixtures/megatron_guide,
    NVIDIA/Megatron-LM@eb0783b6): its launch flags against the reading's settings."""
    from ledger.validation.bridge_cells import _stages
    from ledger.validation.memory_mcore import GUIDE_SETTINGS, modelzoo_readings

    text = (ROOT / "tests" / "fixtures" / "megatron_guide" /
            "deepseek-v3-gb200-reproduce-guide.md").read_text(encoding="utf-8")
    launch = text.split("### Launch script", 1)[1].split("```", 2)[1]
    flags = {}
    for line in launch.splitlines():
        words = line.rstrip(" \\").split()
        if words and words[0].startswith("--"):
            flags[words[0]] = words[1:]
    tp, pp, ep = (int(flags[f"--{k}-parallel-size"][0])
                  for k in ("tensor-model", "pipeline-model", "expert-model"))
    layout = flags["--pipeline-model-parallel-layout"][0].strip('"')
    mbs, gbs = int(flags["--micro-batch-size"][0]), int(flags["--global-batch-size"][0])
    how, row = next((h, r) for h, r in modelzoo_readings() if h == "Megatron-LM GB200 guide")
    cfg = row.cfg
    assert (tp, pp, ep, mbs) == (cfg.tp, cfg.pp, cfg.ep, cfg.micro_batch) == (1, 8, 32, 1)
    assert _stages(layout) == pp * cfg.vp == 32 and "m" not in layout
    assert row.model.mtp_layers == 0
    assert cfg.num_microbatches == gbs // (mbs * 256 // (tp * pp)) == 64
    assert tuple(flags["--recompute-modules"]) == cfg.recompute_modules == \
        GUIDE_SETTINGS["recompute_modules"]
    assert flags["--main-grads-dtype"] == ["fp32"] and cfg.grad_dtype == "fp32"
    assert flags["--exp-avg-dtype"] == flags["--exp-avg-sq-dtype"] == ["bf16"]
    assert (cfg.exp_avg_dtype, cfg.exp_avg_sq_dtype) == ("bf16", "bf16")
    assert flags["--moe-flex-dispatcher-backend"] == ["hybridep"] and cfg.ep_backend == "hybridep"
    assert set(flags["--cuda-graph-scope"]) == set(cfg.cuda_graph)
    assert "--fp8-param-gather" in flags and "--reuse-grad-buf-for-mxfp8-param-ag" in flags
