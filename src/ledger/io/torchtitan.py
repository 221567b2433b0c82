"""``--from-torchtitan FILE``: a torchtitan job TOML (the TOML-era config, torchtitan at
238fa99, the parent of 9810191 which replaced TOML files with Python registries).

Keys and defaults, torchtitan/config/job_config.py at that commit: [model] name "llama3",
flavor "debugmodel" (:100-104); [training] local_batch_size 8, global_batch_size -1
(= local_batch_size x data-parallel degree), seq_len 2048 (:253-261); [parallelism]
data_parallel_replicate_degree 1, data_parallel_shard_degree -1 (the ranks left over),
fsdp_reshard_after_forward "default", tensor_parallel_degree 1, pipeline_parallel_degree
1, pipeline_parallel_layers_per_stage None, pipeline_parallel_schedule "1F1B",
pipeline_parallel_microbatch_size 1, context_parallel_degree 1, expert_parallel_degree 1
(:313-454); [activation_checkpoint] mode "selective" (:652). The data-parallel degree is
replicate x shard (torchtitan/train.py:196-213); FSDP shards over shard x cp, so shard > 1
or cp > 1 is ZeRO-3 and replicate > 1 with it is HSDP. A looped schedule holds 2 stages
per rank unless pipeline_parallel_layers_per_stage says otherwise
(torchtitan/distributed/pipeline_parallel.py:111-115). Flavours map to the presets with
the same shape (torchtitan/models/llama3/__init__.py: 8B, 70B, 405B).
Keys of sections that change nothing the ledger prices (job, metrics, optimizer,
lr_scheduler, checkpoint, ...) are accepted; any other key is refused by name.
"""
from __future__ import annotations

import tomllib

from ledger.errors import LedgerError
from ledger.io.launch import Launch, read_text
from ledger.model import preset

FLAVOURS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b",
            ("llama3", "405B"): "llama3-405b"}
SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved",
             "InterleavedZeroBubble": "interleaved-zb", "ZBVZeroBubble": "zb-v"}
LOOPED = ("interleaved", "interleaved-zb", "zb-v")
_PRICED = {
    "model": {"name": "llama3", "flavor": "debugmodel", "hf_assets_path": None,
              "tokenizer_path": None, "converters": [], "print_after_conversion": False},
    "training": {"local_batch_size": 8, "batch_size": None, "global_batch_size": -1,
                 "seq_len": 2048, "dataset": None, "dataset_path": None, "max_norm": None,
                 "steps": None, "gc_freq": None, "mixed_precision_param": "bfloat16",
                 "mixed_precision_reduce": "float32", "dtype": None},
    "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                    "fsdp_reshard_after_forward": "default", "tensor_parallel_degree": 1,
                    "pipeline_parallel_degree": 1, "pipeline_parallel_schedule": "1F1B",
                    "pipeline_parallel_microbatch_size": 1,
                    "pipeline_parallel_layers_per_stage": None,
                    "context_parallel_degree": 1, "expert_parallel_degree": 1,
                    "enable_async_tensor_parallel": False, "disable_loss_parallel": False,
                    "context_parallel_rotate_method": "allgather"},
    "activation_checkpoint": {"mode": "selective", "selective_ac_option": "2"},
}
_UNPRICED = ("job", "profiling", "metrics", "optimizer", "lr_scheduler", "checkpoint",
             "comm", "validation", "experimental", "fault_tolerance", "memory_estimation",
             "dataloader")


def sections(raw: dict, path: str) -> dict:
    """Each priced section with torchtitan's defaults filled in; unknown keys refused."""
    out = {}
    for name, value in raw.items():
        if name in _UNPRICED:
            continue
        if name not in _PRICED or not isinstance(value, dict):
            raise LedgerError("from_torchtitan", f"[{name}] in {path} is not modelled by the "
                                                 f"ledger")
        for key in value:
            if key not in _PRICED[name]:
                raise LedgerError("from_torchtitan", f"{name}.{key} in {path} is not "
                                                     f"modelled by the ledger")
    for name, defaults in _PRICED.items():
        out[name] = defaults | raw.get(name, {})
    return out


def _int(sec: dict, key: str, where: str, low: int = 1) -> int:
    v = sec[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise LedgerError("from_torchtitan", f"{where}.{key} must be an integer >= {low}, "
                                             f"got {v!r}")
    return v


def placement_flags(s: dict, layers: int, gpus: int | None) -> dict:
    """The CLI flags a job sets (framework torchtitan)."""
    par, tr = s["parallelism"], s["training"]
    tp, pp, cp, ep, rep = (_int(par, k, "parallelism") for k in (
        "tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree",
        "expert_parallel_degree", "data_parallel_replicate_degree"))
    shard = par["data_parallel_shard_degree"]
    if shard == -1:
        if gpus is None:
            raise LedgerError("from_torchtitan", "parallelism.data_parallel_shard_degree = -1 "
                                                 "takes the ranks left over: give --gpus")
        shard = gpus // (tp * pp * cp * rep)
    shard = _int({"data_parallel_shard_degree": shard}, "data_parallel_shard_degree",
                 "parallelism")
    fsdp = shard > 1 or cp > 1
    flags = {"framework": "torchtitan", "tp": tp, "pp": pp, "cp": cp, "ep": ep,
             "dp": rep * shard, "zero": 3 if fsdp else 0,
             "gpus": rep * shard * tp * pp * cp}
    if fsdp and rep > 1:
        flags["hsdp_shard"] = shard * cp
    reshard = par["fsdp_reshard_after_forward"]
    if reshard not in ("default", "always", "never"):
        raise LedgerError("from_torchtitan", f"parallelism.fsdp_reshard_after_forward "
                                             f"{reshard!r}: default, always or never")
    if reshard == "never":
        flags["no_reshard"] = True
    local = _int(tr, "batch_size" if tr.get("batch_size") else "local_batch_size", "training")
    glob = tr["global_batch_size"]
    flags["global_batch"] = local * rep * shard if glob == -1 else \
        _int(tr, "global_batch_size", "training")
    flags["micro_batch"] = _int(par, "pipeline_parallel_microbatch_size", "parallelism") \
        if pp > 1 else local
    if pp > 1:
        flags |= _schedule(par, layers, pp)
    return flags


def _schedule(par: dict, layers: int, pp: int) -> dict:
    name = par["pipeline_parallel_schedule"]
    if name not in SCHEDULES:
        raise LedgerError("from_torchtitan", f"parallelism.pipeline_parallel_schedule "
                                             f"{name!r} is not modelled; known: "
                                             f"{', '.join(SCHEDULES)}")
    kind = SCHEDULES[name]
    per_stage = par["pipeline_parallel_layers_per_stage"]
    vp = 2 if kind in LOOPED else 1
    if per_stage is not None:
        vp = layers // (pp * per_stage)
    return {"schedule": kind, "vp": vp}


def _recompute(s: dict) -> tuple[str, tuple[str, ...]]:
    """torchtitan's AC mode; its selective (every n-th layer in full, or an op-level
    policy) is priced as Korthikanti's selective recompute, and said so."""
    ac = s["activation_checkpoint"]
    mode = ac["mode"]
    if mode in ("none", "full"):
        return mode, ()
    if mode == "selective":
        return "selective", (f"activation_checkpoint.mode = 'selective' (option "
                             f"{ac['selective_ac_option']!r}) priced as the ledger's selective "
                             f"recompute (Korthikanti et al. 2022: the attention core)",)
    raise LedgerError("from_torchtitan", f"activation_checkpoint.mode {mode!r} is not "
                                         f"modelled; none, selective or full")


def read_launch(path: str, gpus: int | None = None) -> Launch:
    try:
        raw = tomllib.loads(read_text(path, "from_torchtitan"))
    except tomllib.TOMLDecodeError as e:
        raise LedgerError("from_torchtitan", f"{path} is not valid TOML: {e}") from None
    s = sections(raw, path)
    key = (s["model"]["name"], s["model"]["flavor"])
    if key not in FLAVOURS:
        raise LedgerError("from_torchtitan", f"model {key[0]} flavor {key[1]!r} has no "
                                             f"preset here; known: "
                                             + ", ".join(f"{n} {f}" for n, f in FLAVOURS))
    seq = _int(s["training"], "seq_len", "training")
    model = preset(FLAVOURS[key]).with_seq(seq)
    flags = placement_flags(s, model.layers, gpus)
    recompute, notes = _recompute(s)
    return Launch(path=path, model=model, flags=flags | {"recompute": recompute}, notes=notes)
