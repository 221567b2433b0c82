"""A checkpoint's bytes, in total and per GPU, and the seconds it takes to write and read.

What is saved is the framework's fact (``ledger.frameworks.checkpoints``): the states it
names (parameters in their resident dtype, the optimizer state with any fp32 master
copy), in the dtypes of ``Framework.state_per_param``. So a bf16 Megatron-Core or
DeepSpeed run saves 2 + 4 + 4 + 4 = 14 bytes per parameter (BLOOM's 2.3 TB: its README
counts 176e9 x 14 / 2^30 = 2,294.77 GiB) and torchtitan's fp32 FSDP2 shards 4 + 4 + 4 = 12.

    total         = saved bytes per parameter x the parameters (each once: a tied output
                    layer on the last stage is the embedding's copy; MTP modules included)
    per GPU       balanced writers: a stage's bytes (what it holds in ledger.placement's
                  layout) / its GPUs (world / pp), the fullest stage; first-replica
                  writers (DeepSpeed, ZeRO < 3): data-parallel rank 0 writes the model
                  states it holds plus its optimizer partition
    write         aggregate storage: total / bandwidth; per node: the fullest node's
                  bytes (GPUs per node x per GPU) / the node's bandwidth
    copy to host  per GPU / the host link's achieved rate (``System.host_bandwidth``:
                  PCIe or NVLink-C2C, one direction, x the link efficiency)
    blocking      synchronous: copy + write; asynchronous: the copy only (the write runs
                  in the background and must end before the next save begins)
    load          on restart the same bytes come back over the same storage: = write

>>> from ledger.model import llama3_8b
>>> from ledger.config import ParallelConfig
>>> from ledger.system import system
>>> ck = checkpoint(llama3_8b(), ParallelConfig(dp=8), system("h100-sxm"), Storage(1e9))
>>> ck.bytes == 14 * 8_030_261_248, round(ck.write_s, 1)  # one node writes all of it
(True, 112.4)
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from ledger.errors import LedgerError
from ledger.frameworks import of as framework_of
from ledger.optim import muon
from ledger.placement import stage_params
from ledger.system import System

MODES = ("sync", "async")


@dataclass(frozen=True)
class Storage:
    """Where checkpoints go: ``bytes_per_s`` for the whole job, or for each node."""

    bytes_per_s: float
    per_node: bool = True


# 1 GB/s per node, from the two published runs that give both a storage rate and a node
# count: Llama 3's Tectonic, 'a sustainable throughput of 2 TB/s' (arXiv:2407.21783 sec.
# 3.3.1) over 16,384 / 8 = 2,048 nodes = 0.98 GB/s per node; BLOOM's 2.3 TB saved 'in 40
# secs' (bigscience tr11-176B-ml chronicles.md L36, README L33) over 48 nodes = 1.20.
DEFAULT_STORAGE = Storage(1e9, per_node=True)


@dataclass(frozen=True)
class Checkpoint:
    bytes: float  # all ranks together: each saved state once
    bytes_per_gpu: float  # the most any one GPU writes
    write_s: float  # from host memory to storage
    d2h_s: float  # the device-to-host copy of the largest share
    blocking_s: float  # what training waits for
    load_s: float  # reading it back on a restart
    mode: str  # "sync" | "async"
    layout: str  # the framework's format


def saved_bytes_per_param(fw, zero_stage: int, optimizer: str = "adam",
                          muon_share: float = 1.0) -> float:
    """Bytes a checkpoint holds per parameter: the states the framework saves, in its
    dtypes (``Framework.state_per_param``; gradients are not saved; ``muon_share``: the
    share of parameters Muon keeps one moment for)."""
    state = fw.state_per_param(zero_stage, optimizer, muon_share=muon_share)
    return sum(getattr(state, f"{name}_bytes") for name in fw.checkpoint.saved)


def _stages(model, cfg, whole: bool) -> list[float]:
    """Parameters per PP rank: the stage's, each once (``whole``), or one GPU's share
    under the config's tensor and expert split."""
    split = SimpleNamespace(tp=1, ep=1, etp=1) if whole else cfg
    shape = SimpleNamespace(tp=split.tp, ep=split.ep, etp=split.etp, pp=cfg.pp, vp=cfg.vp,
                            schedule=cfg.schedule)
    return [dense + expert for dense, expert in stage_params(model, shape,
                                                             mtp_embedding=False)]


def checkpoint_bytes(model, cfg, optimizer: str = "adam") -> tuple[float, float]:
    """(total, the most one GPU writes) of one checkpoint of this placement."""
    fw = framework_of(cfg)
    share = muon.managed_share(model) if muon.form(optimizer) else 1.0
    state = fw.state_per_param(cfg.zero_stage, optimizer, muon_share=share)
    per_param = saved_bytes_per_param(fw, cfg.zero_stage, optimizer, share)
    unique = _stages(model, cfg, whole=True)
    stage_gpus = cfg.world // cfg.pp
    if fw.checkpoint.model_writers == "first-replica" and cfg.zero_stage < 3:
        held = _stages(model, cfg, whole=False)  # what data-parallel rank 0 holds
        optim = state.optim_bytes if "optim" in fw.checkpoint.saved else 0.0
        model_bytes = per_param - optim  # its model states; its optimizer partition, or
        per_gpu = max(model_bytes * h + optim * (u / stage_gpus if cfg.zero_stage else h)
                      for u, h in zip(unique, held))  # the whole optimizer at ZeRO-0
    else:
        per_gpu = max(per_param * u / stage_gpus for u in unique)
    return per_param * (model.params + model.mtp_params), per_gpu


def checkpoint(model, cfg, system: System, storage: Storage = DEFAULT_STORAGE,
               mode: str = "sync", optimizer: str = "adam") -> Checkpoint:
    """One checkpoint of this placement: bytes, write, copy, blocking and load seconds."""
    fw = framework_of(cfg)
    if mode not in MODES:
        raise LedgerError("ckpt_mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "async" and not fw.checkpoint.async_save:
        raise LedgerError("ckpt_async", f"{fw.name} has no asynchronous checkpoint save")
    total, per_gpu = checkpoint_bytes(model, cfg, optimizer)
    if storage.per_node:
        write = per_gpu * min(system.gpus_per_node, cfg.world) / storage.bytes_per_s
    else:
        write = total / storage.bytes_per_s
    d2h = per_gpu / system.host_bandwidth()
    blocking = d2h if mode == "async" else d2h + write
    return Checkpoint(bytes=total, bytes_per_gpu=per_gpu, write_s=write, d2h_s=d2h,
                      blocking_s=blocking, load_s=write, mode=mode,
                      layout=fw.checkpoint.layout)
