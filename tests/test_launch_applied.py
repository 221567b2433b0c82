"""Every torchtitan setting the reader lists as applied changes the priced number it names
(issue 34: ``enable_async_tensor_parallel = true`` was listed as applied and priced as
off, 10.21 s either way). One case per key of ``MODELLED``: torchtitan's shipped
llama4_17bx16e.toml (238fa99), the key changed, and the estimate moves.
"""
import json
import re
from pathlib import Path

import pytest

from ledger.io.torchtitan.reader import MODELLED
from test_bad_input import run

BASE = (Path(__file__).parent / "fixtures" / "launch" / "torchtitan" / "238fa9953e" /
        "torchtitan" / "models" / "llama4" / "train_configs" / "llama4_17bx16e.toml")
PP2 = {("parallelism", "pipeline_parallel_degree"): "2"}

# (section, key) -> (settings under both sides, the new value); PP2: read only with pp > 1
CASES = {
    ("model", "name"): ({}, '"deepseek_v3"'),  # with flavor 16B (NAME_FLAVOUR)
    ("model", "flavor"): ({}, '"17bx128e"'),
    ("model", "converters"): ({}, '["quantize.linear.float8"]'),
    ("parallelism", "tensor_parallel_degree"): ({}, "4"),
    ("parallelism", "pipeline_parallel_degree"): ({}, "2"),
    ("parallelism", "context_parallel_degree"): ({}, "2"),
    ("parallelism", "data_parallel_replicate_degree"): ({}, "2"),
    ("parallelism", "data_parallel_shard_degree"): ({}, "16"),
    ("parallelism", "expert_parallel_degree"): ({}, "8"),
    ("parallelism", "fsdp_reshard_after_forward"): ({}, '"never"'),
    ("parallelism", "pipeline_parallel_microbatch_size"): (PP2, "2"),
    ("parallelism", "pipeline_parallel_schedule"): (PP2, '"GPipe"'),
    ("parallelism", "pipeline_parallel_layers_per_stage"): (
        {**PP2, ("parallelism", "pipeline_parallel_schedule"): '"Interleaved1F1B"'}, "6"),
    ("parallelism", "disable_loss_parallel"): ({}, "true"),
    ("parallelism", "enable_async_tensor_parallel"): ({}, "true"),
    ("activation_checkpoint", "mode"): ({}, '"none"'),
    ("activation_checkpoint", "selective_ac_option"): (
        {("activation_checkpoint", "mode"): '"selective"'}, '"op"'),
}
NAME_FLAVOUR = ("model", "flavor", '"16B"')  # a flavour of the other model


def setting(text: str, section: str, key: str, value: str) -> str:
    """``text`` with ``key = value`` in ``[section]`` (replaced, or added under it)."""
    head = re.search(rf"^\[{re.escape(section)}\][^\n]*\n", text, re.M)
    end = re.search(r"^\[", text[head.end():], re.M)
    stop = head.end() + (end.start() if end else len(text) - head.end())
    body = text[head.end():stop]
    line = re.compile(rf"^#?\s*{re.escape(key)}\s*=.*$", re.M)
    body = line.sub(f"{key} = {value}", body, 1) if line.search(body) else \
        f"{key} = {value}\n" + body
    return text[:head.end()] + body + text[stop:]


def priced(tmp_path, text: str, name: str) -> tuple:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    gpus = ["--gpus", "256"] if "data_parallel_shard_degree = -1" in text else []
    code, out, err = run(["estimate", "--from-torchtitan", str(path), *gpus, "--json",
                          "--verbose"])
    assert code == 0, err
    d = json.loads(out)
    return (d["step_time_s"], d["memory_per_gpu_bytes"]), err


def test_every_modelled_key_has_a_case():
    assert set(CASES) == {(s, k) for s, keys in MODELLED.items() for k in keys}


@pytest.mark.parametrize("section,key", sorted(CASES))
def test_an_applied_setting_moves_the_priced_number(tmp_path, section, key):
    rest, value = CASES[(section, key)]
    base = BASE.read_text()
    for (s, k), v in rest.items():
        base = setting(base, s, k, v)
    before, _ = priced(tmp_path, base, "base")
    changed = setting(base, section, key, value)
    if (section, key) == ("model", "name"):
        changed = setting(changed, *NAME_FLAVOUR)
    after, err = priced(tmp_path, changed, "changed")
    assert after != before
    assert f"{section}.{key}" in next(line for line in err.splitlines()
                                      if line.startswith("note: applied:"))


def test_async_tp_is_priced_as_tp_overlap(tmp_path):
    """enable_async_tensor_parallel: the same step as --tp-overlap beside the file."""
    base = BASE.read_text()
    on, _ = priced(tmp_path, setting(base, "parallelism", "enable_async_tensor_parallel",
                                     "true"), "on")
    path = tmp_path / "off.toml"
    path.write_text(base)
    code, out, err = run(["estimate", "--from-torchtitan", str(path), "--gpus", "256",
                          "--json", "--tp-overlap"])
    assert code == 0, err
    assert json.loads(out)["step_time_s"] == on[0]


def test_an_unmodelled_setting_away_from_its_default_is_named(tmp_path):
    text = setting(BASE.read_text(), "parallelism", "pipeline_parallel_schedule_csv",
                   '"my.csv"')
    _, err = priced(tmp_path, text, "csv")
    assert "not modelled, so the figures are approximate: " in err
    assert "parallelism.pipeline_parallel_schedule_csv 'my.csv'" in err


def _gather_issued_s(tmp_path, text: str, name: str) -> float:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    code, out, err = run(["estimate", "--from-torchtitan", str(path), "--gpus", "256",
                          "--json"])
    assert code == 0, err
    return sum(e["issued_s"] for e in json.loads(out)["exposed"] if "all_gather" in e["call"])


def test_reshard_always_under_pp_is_priced_as_resharding(tmp_path):
    """torchtitan's "default" keeps FSDP params gathered after forward when pp > 1 and
    "always" reshards them anyway (models/llama3/infra/parallelize.py:319-331 @238fa99), so
    every micro-batch's forward gathers again: more all-gather traffic per step (both were
    priced as "default" before). The memory stays: torch's pipelining keeps the stage
    gathered through the backwards until the last micro-batch either way."""
    base = setting(BASE.read_text(), "parallelism", "pipeline_parallel_degree", "2")
    default = _gather_issued_s(tmp_path, base, "default")
    always = _gather_issued_s(tmp_path, setting(base, "parallelism",
                                                "fsdp_reshard_after_forward", '"always"'),
                              "always")
    assert always > 1.5 * default > 0, (default, always)


def test_reshard_flags_exclude_each_other():
    code, _, err = run(["estimate", "llama3-8b", "--dp", "8", "--zero", "3", "--reshard",
                        "--no-reshard"])
    assert code == 2 and "--reshard" in err and len(err.strip().splitlines()) == 1, err
