"""Megatron's pipeline-only settings on the command line (``ledger.frameworks.pipeline_checks``):
refused in one line, exit 2, where Megatron refuses them and off Megatron; priced where it
runs them."""
from __future__ import annotations

import pytest

from ledger.cli import main

BASE = "estimate llama3-8b --tp 2 --pp 2 --dp 4 --microbatches 8"


def _refused(argv: str, capsys) -> str:
    assert main(argv.split()) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv, said", [
    # model_parallel_config.py L545-549 @d98e8a64: no deferral without pipeline parallelism
    ("estimate llama3-8b --tp 2 --dp 4 --wgrad-deferral 0", "got pp(1) fusion on limit 0"),
    ("report llama3-8b --gpus 8 --tp 2 --dp 4 --wgrad-deferral 3", "got pp(1) fusion on limit 3"),
    # L550-553: nor without gradient-accumulation fusion
    (f"{BASE} --no-gradient-accumulation-fusion --wgrad-deferral 0",
     "got pp(2) fusion off limit 0"),
    # a Megatron setting: torchtitan and DeepSpeed have none
    (f"{BASE} --framework torchtitan --wgrad-deferral 0", "framework torchtitan has no such"),
    (f"{BASE} --framework deepspeed --wgrad-deferral 0", "framework deepspeed has no such"),
])
def test_wgrad_deferral_refused_where_megatron_refuses_it(argv, said, capsys):
    err = _refused(argv, capsys)
    assert err.startswith("error: wgrad_deferral: ") and said in err, err


def test_wgrad_deferral_priced_where_megatron_runs_it(capsys):
    """PP 2 with the fusion (Megatron's default): accepted, and the last stage, holding the
    output layer's inputs and logits' gradients to the flush, becomes the peak."""
    import json

    peaks = []
    for extra in ("", " --wgrad-deferral 0"):
        assert main(f"{BASE} --json{extra}".split()) == 0
        out = json.loads(capsys.readouterr().out)
        peaks.append(out["memory_per_gpu_bytes"])
    assert peaks[1] > peaks[0], peaks


@pytest.mark.parametrize("argv, said", [
    # PyTorch's ScheduleInterleaved1F1B (torchtitan) fixes its rounds: no such setting
    ("estimate llama3-8b --tp 2 --framework torchtitan --pp 4 --vp 2 --microbatches 8 "
     "--gpus 8 --vp-group 4", "framework torchtitan has no such setting"),
    # no pipeline, so no interleaved schedule to group
    ("estimate llama3-8b --tp 2 --vp-group 4", "pp(1) has no pipeline"),
    ("report llama3-8b --tp 2 --vp-group 4", "pp(1) has no pipeline"),
    # a pipeline without interleaving (ledger.pipeline.check)
    ("estimate llama3-8b --tp 2 --pp 4 --microbatches 8 --vp-group 4", "1f1b has none"),
])
def test_vp_group_refused_off_megatron_and_without_interleaving(argv, said, capsys):
    err = _refused(argv, capsys)
    assert err.startswith("error: vp_group: ") and said in err, err


def test_vp_group_priced_under_megatrons_interleaved_schedule(capsys):
    """A longer round holds more micro-batches in the warm-up ((v-1) g + 2 (pp-1-r),
    schedules.py L959-965 @d98e8a64): a group of 8 peaks above the default pp(4)."""
    import json

    peaks = []
    for group in ("", " --vp-group 8"):
        argv = "estimate llama3-8b --tp 2 --pp 4 --vp 2 --microbatches 8 --gpus 8 --json"
        assert main(f"{argv}{group}".split()) == 0
        peaks.append(json.loads(capsys.readouterr().out)["memory_per_gpu_bytes"])
    assert peaks[1] > peaks[0], peaks
