"""A Megatron launch's environment, read as PyTorch, NCCL and TransformerEngine read it
(ledger.io.environment): what the script exports, or sets before its torchrun, reaches
the trainer's process; what the ledger models is applied, what changes nothing priced is
silent, the rest is named in the one line of unmodelled settings. Fixtures: Megatron-LM's
own launches and its MoE README's environment block (tests/fixtures/launch/SOURCES.md)."""
import json
import shlex
import subprocess
import sys

import pytest

from ledger.io.environment import alloc_refusals, read_env
from ledger.io.megatron.reader import read_launch
from ledger.io.shell.run import commands, launches
from test_launch_files import MEG, run

MOE = "blocks/moe_README__mixtral_8x7b.sh c t d"
DSV3 = str(MEG / "examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh")


def test_exported_and_prefixed_variables_reach_the_command():
    text = ("A=1\nexport B=2\nC=3\nexport C\nexport D=4\nunset D\nE=5 true\n"
            "F=6 torchrun pretrain_gpt.py --x\nenv G=7 torchrun pretrain_gpt.py --y\n")
    (_, first), (_, second) = launches(text, "t.sh", (), {"H": "8"})
    assert first == {"B": "2", "C": "3", "F": "6", "H": "8"}  # A, D, E are not handed on
    assert second == {"B": "2", "C": "3", "G": "7", "H": "8"}


def test_a_bare_export_of_an_unset_variable_hands_on_nothing(tmp_path):
    """bash's `export NAME` of a name with no value marks it, and hands the child nothing
    until a value is set: NCCL_NVLS_ENABLE exported bare is not in the trainer's
    environment - not named, the figures not approximate."""
    text = "export A\nexport B\nB=2\nexport C=\ntorchrun pretrain_gpt.py --x\n"
    (_, env), = launches(text, "t.sh", (), {"D": ""})
    assert env == {"B": "2", "C": "", "D": ""}
    script = tmp_path / "bare.sh"
    script.write_text(f"export NCCL_NVLS_ENABLE\nsource {MEG / MOE.split()[0]} c t d\n")
    code, out, err = run("report", "--from-megatron", str(script), "--vocab-size", "32000",
                         "--verbose")
    assert code == 0, err
    assert "NCCL_NVLS_ENABLE" not in err and "approximate" not in err + out


def _readme_env() -> str:
    """The MoE README's environment block, as the variables set before its launch."""
    block = MEG / "blocks" / "moe_README__env.sh"
    _, env = commands(block.read_text(), str(block))
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))


def test_the_moe_readme_environment_is_applied():
    """expandable_segments:True and NCCL_NVLS_ENABLE=0, as the README sets them: applied
    (ParallelConfig.expandable_segments, nccl_nvls False); the NVLS buffers leave the
    budget and nothing is named."""
    env = _readme_env()
    assert env == "NCCL_NVLS_ENABLE=0 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    code, out, err = run("report", "--from-megatron", f"{env} {MOE}", "--vocab-size", "32000",
                         "--json")
    base_code, base, _ = run("report", "--from-megatron", MOE, "--vocab-size", "32000",
                             "--json")
    assert code == base_code == 0 and "not modelled" not in err and "approximate" not in err
    d, b = json.loads(out), json.loads(base)
    assert (d["config"]["expandable_segments"], d["config"]["nccl_nvls"]) == (True, False)
    assert (b["config"]["expandable_segments"], b["config"]["nccl_nvls"]) == (False, None)
    assert "NCCL NVLS buffers" in b["memory"]["context_named"]
    assert "NCCL NVLS buffers" not in d["memory"]["context_named"]
    assert d["memory"]["required"] < b["memory"]["required"]


def test_megatron_fsdp_launch_environment_by_kind():
    """sbatch_mfsdp_deepseek_v3.sh exports ten variables: NCCL's P2P network chunk changes
    the pipeline's sends, not modelled - named; the InfiniBand service level and timeout,
    TE's LayerNorm SM margins, PyTorch's record-streams default and the script's own paths
    change nothing priced."""
    launch = read_launch(f"{DSV3}", gpus=256, model_flags={"vocab": 128815})
    env_named = [u for u in launch.unpriced if u.split("=")[0].isupper()]
    assert [u.split(" ")[0] for u in env_named] == ["NCCL_P2P_NET_CHUNKSIZE=2097152"]
    for quiet in ("NCCL_IB_SL=1", "NCCL_IB_TIMEOUT=19", "NVTE_FWD_LAYERNORM_SM_MARGIN=16",
                  "TORCH_NCCL_AVOID_RECORD_STREAMS=1", "PYTHONWARNINGS=ignore"):
        assert quiet in launch.silent, launch.silent
    assert "expandable_segments" not in launch.flags and launch.approximate


def test_unmodelled_settings_are_named_on_one_line():
    """An allocator option the ledger does not model, NCCL's algorithm and an unknown NCCL
    variable: named together, with the launch's other unmodelled flags, on one line."""
    env = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:512 " \
          "NCCL_ALGO=Tree NCCL_NEW_KNOB=1 CUDA_DEVICE_MAX_CONNECTIONS=8"
    code, out, err = run("report", "--from-megatron", f"{env} {MOE}", "--vocab-size", "32000",
                         "--json")
    assert code == 0, err
    named = [line for line in err.splitlines() if "max_split_size_mb" in line]
    assert len(named) == 1 and "NCCL_ALGO=Tree" in named[0] and "NCCL_NEW_KNOB=1" in named[0]
    # the script's own `export CUDA_DEVICE_MAX_CONNECTIONS=1` replaces the 8 set before it
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in named[0]
    assert read_env({"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, tp=2, cp=1)[2] == [
        "CUDA_DEVICE_MAX_CONNECTIONS=8 (Megatron's TP and CP overlaps rely on 1: priced as 1)"]
    assert json.loads(out)["config"]["expandable_segments"] is True


def test_an_allocator_setting_pytorch_stops_on_is_refused():
    """expandable_segments takes exactly True or False (ConfigTokenizer::toBool,
    c10/core/AllocatorConfig.h): `true` stops the run at the allocator's first use, so the
    launch is refused in one line naming the variable and its value, as Megatron's own
    refusals are - not read as off."""
    for env in ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:true",
                "PYTORCH_ALLOC_CONF=max_split_size_mb:512,expandable_segments:1"):
        code, out, err = run("report", "--from-megatron", f"{env} {MOE}",
                             "--vocab-size", "32000")
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert env in err and "Traceback" not in err
    # the variable PyTorch does not read (PYTORCH_ALLOC_CONF is read first) stops nothing
    env = "PYTORCH_ALLOC_CONF=expandable_segments:True PYTORCH_CUDA_ALLOC_CONF=" \
          "expandable_segments:true"
    code, out, err = run("report", "--from-megatron", f"{env} {MOE}", "--vocab-size", "32000",
                         "--json")
    assert code == 0 and json.loads(out)["config"]["expandable_segments"] is True, err


def test_the_allocator_values_refused_are_those_pytorch_refuses():
    """The pinned torch's own parser (a CPU build parses the same setting) against the
    reader: each value accepted by one is accepted by the other."""
    pytest.importorskip("torch")
    code = ("import sys, torch\nfor v in sys.argv[1:]:\n    try:\n        torch._C."
            "_accelerator_setAllocatorSettings('expandable_segments:' + v); print(1)\n"
            "    except ValueError:\n        print(0)\n")
    values = ["True", "False", "true", "false", "1", "0", "on", "TRUE"]
    r = subprocess.run([sys.executable, "-c", code, *values], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    torch_ok = [line == "1" for line in r.stdout.split()]
    ours = [not alloc_refusals({"PYTORCH_ALLOC_CONF": f"expandable_segments:{v}"})
            for v in values]
    assert ours == torch_ok == [True, True] + [False] * 6


def test_max_connections_is_named_only_where_an_overlap_relies_on_it(tmp_path):
    """Megatron relies on CUDA_DEVICE_MAX_CONNECTIONS=1 only for TP's and CP's overlaps
    (tensor_parallel/layers.py L678-710, training/arguments.py L1451-1479 @d98e8a64): the
    MoE README's launch (TP 1, CP 1) with 8 connections prices nothing differently - silent,
    not approximate; the same launch at TP 2 names it; CP 2 alone too."""
    text = (MEG / MOE.split()[0]).read_text()
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1\n" in text
    assert "--tensor-model-parallel-size 1\n" in text
    eight = text.replace("export CUDA_DEVICE_MAX_CONNECTIONS=1\n",
                         "export CUDA_DEVICE_MAX_CONNECTIONS=8\n")
    found = {}
    for tp in (1, 2):  # on 8 nodes, as TP 2 x EP 8 x PP 4 needs
        script = tmp_path / f"tp{tp}.sh"
        script.write_text(eight.replace("--tensor-model-parallel-size 1\n",
                                        f"--tensor-model-parallel-size {tp}\n"))
        found[tp] = run("report", "--from-megatron", f"NNODES=8 {script} c t d", "--vocab-size",
                        "32000", "--verbose")
    (code1, out1, err1), (code2, out2, err2) = found[1], found[2]
    assert code1 == code2 == 0, err1 + err2
    assert "not modelled" not in err1 and "approximate" not in err1 + out1
    assert "CUDA_DEVICE_MAX_CONNECTIONS=8" in err1.split("accepted, changes no priced")[1]
    named = [line for line in err2.splitlines() if "not modelled" in line]
    assert len(named) == 1 and "CUDA_DEVICE_MAX_CONNECTIONS=8 (Megatron's TP" in named[0]
    assert "approximate" in err2 + out2
    assert read_env({"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, tp=1, cp=2)[2] != []
    assert read_env({"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, tp=1, cp=1)[2] == []


def test_te_attention_switch_against_the_backend_is_refused_as_megatron_does():
    """Megatron asserts NVTE_FUSED_ATTN / NVTE_FLASH_ATTN / NVTE_UNFUSED_ATTN agree with
    --attention-backend (language_module.py L124-126 @d98e8a64): under the default auto
    each must be 1; set to 1 it is silent."""
    code, out, err = run("report", "--from-megatron", f"NVTE_FUSED_ATTN=0 {MOE}",
                         "--vocab-size", "32000")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "NVTE_FUSED_ATTN=0 but --attention-backend auto sets it to 1" in err
    code, _, err = run("report", "--from-megatron", f"NVTE_FLASH_ATTN=1 {MOE}",
                       "--vocab-size", "32000", "--verbose")
    assert code == 0 and "NVTE_FLASH_ATTN=1" in err.split("accepted, changes no priced")[1]
