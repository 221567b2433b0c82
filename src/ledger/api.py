"""The Python API: what the ``train-ledger`` command does, as calls that return typed
results.

>>> from ledger import api
>>> m = api.load_model("llama3-70b")
>>> e = api.estimate(m, tp=8, pp=4, dp=4, num_microbatches=16)
>>> e.fits, e.config.world
(True, 128)
>>> e.to_dict()["config"]["tp"]
8

``load_model`` takes a preset name, a ``config.json`` (or a folder holding one) or a hub id
(``org/name``, from the local Hugging Face cache). ``report``, ``estimate``, ``plan`` and
``serve`` take the model and the placement (``ParallelConfig``'s fields as keywords, or a
``config=``) and return a ``Report``, ``Estimate``, ``Plan`` or ``Serve``: the core's result
in ``.result`` (its fields read through as attributes) and ``to_dict()``, the same JSON as
the command's ``--json``. ``estimate_many`` sizes many placements in one call.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.model import PRESETS, ModelSpec, preset
from ledger.system import System, system as _system

DEFAULT_GPU = "h100-sxm"


def load_model(name: str | Path, seq: int | None = None) -> ModelSpec:
    """A preset, a config.json (or its folder) or a hub id in the local HF cache; ``seq``
    sets the run's sequence length (default: the preset's, or a config's min(capacity,
    4096))."""
    from ledger.io.hf import read_hf_config
    from ledger.io.hf.hub import hub_config, is_hub_id

    text = str(name)
    if text.lower() in PRESETS:
        m = preset(text)
    elif text.endswith(".json") or Path(text).exists():
        m = read_hf_config(text)[0]
    elif is_hub_id(text):
        m = read_hf_config(hub_config(text), name=text)[0]
    else:
        m = preset(text)  # refuses, naming the presets
    return m.with_seq(seq) if seq is not None else m


def system(gpu: str | System = DEFAULT_GPU, gpus_per_node: int = 8) -> System:
    """A GPU preset's system (``train-ledger gpus`` lists them), or the System given."""
    return gpu if isinstance(gpu, System) else _system(gpu, gpus_per_node)


class _Result:
    """A typed result: the core's record in ``result`` (its fields read through)."""

    result: object

    def __getattr__(self, name: str):
        if name == "result":
            raise AttributeError(name)
        return getattr(self.result, name)


@dataclass(frozen=True)
class Report(_Result):
    """One placement's ledger: per-GPU bytes, communication, bubble (``report --json``)."""

    model: ModelSpec
    config: ParallelConfig
    result: object  # ledger.placement.Placement

    def to_dict(self) -> dict:
        from ledger.render.text import placement_json

        return placement_json(self.model, self.config, self.result, self.config.precision,
                              "adam")


@dataclass(frozen=True)
class Estimate(_Result):
    """Step time, MFU, memory and where the time goes (``estimate --json``)."""

    model: ModelSpec
    config: ParallelConfig
    system: System
    result: object  # ledger.step.StepEstimate

    def to_dict(self) -> dict:
        from ledger.render import estimate_json

        return estimate_json(self.model, self.config, self.system, self.result)


@dataclass(frozen=True)
class Plan(_Result):
    """The ranked placements of a search (``plan --json``); ``best`` is #1 or None."""

    model: ModelSpec
    system: System
    gpus: int
    result: object  # ledger.plan.PlanResult

    @property
    def best(self):
        return self.result.plans[0] if self.result.plans else None

    def to_dict(self) -> dict:
        from ledger.render import plan_json

        return plan_json(self.model, self.system, self.result) | {"gpus": self.gpus}


@dataclass(frozen=True)
class Serve(_Result):
    """Serving with vLLM: weights, KV cache, concurrency, time (``serve --json``)."""

    model: ModelSpec
    system: System
    result: object  # ledger.serve.ServeEstimate

    def to_dict(self) -> dict:
        from ledger.render import serve_json

        return serve_json(self.model, self.system, self.result)


def _config(config: ParallelConfig | None, axes: dict) -> ParallelConfig:
    if config is not None and axes:
        raise LedgerError("config", f"give config= or its fields ({', '.join(axes)}), "
                                    f"not both")
    return config if config is not None else ParallelConfig(**axes)


def report(model: ModelSpec, config: ParallelConfig | None = None, *,
           gpu: str | System = DEFAULT_GPU, **axes) -> Report:
    """One placement's ledger (``train-ledger report``)."""
    from ledger.placement import place

    cfg = _config(config, axes)
    sysm = system(gpu)
    return Report(model, cfg, place(model, cfg, precision=cfg.precision,
                                    gpus_per_node=sysm.gpus_per_node))


def estimate(model: ModelSpec, config: ParallelConfig | None = None, *,
             gpu: str | System = DEFAULT_GPU, tp_overlap: bool = False, **axes) -> Estimate:
    """Step time and MFU of one placement (``train-ledger estimate``)."""
    from ledger.step import estimate as step_estimate

    cfg, sysm = _config(config, axes), system(gpu)
    return Estimate(model, cfg, sysm, step_estimate(model, cfg, sysm, tp_overlap=tp_overlap))


def estimate_many(model: ModelSpec, configs, *, gpu: str | System = DEFAULT_GPU,
                  tp_overlap: bool = False) -> list[Estimate]:
    """Many placements in one process (each a ParallelConfig or a dict of its fields)."""
    sysm = system(gpu)
    return [estimate(model, c if isinstance(c, ParallelConfig) else ParallelConfig(**c),
                     gpu=sysm, tp_overlap=tp_overlap) for c in configs]


def plan(model: ModelSpec, gpus: int, global_batch: int, *, gpu: str | System = DEFAULT_GPU,
         **kw) -> Plan:
    """The fastest placements on ``gpus`` GPUs (``train-ledger plan``); ``kw`` as
    ``ledger.plan.plan``'s (top, pins, framework, precision, finetune, ...)."""
    from ledger.plan import plan as search

    sysm = system(gpu)
    return Plan(model, sysm, gpus, search(model, gpus, sysm, global_batch, **kw))


def serve(model: ModelSpec, context: int, *, gpu: str | System = DEFAULT_GPU, **kw) -> Serve:
    """Serving with vLLM at ``context`` tokens (``train-ledger serve``); ``kw`` as
    ``ledger.serve.ServeConfig``'s (tp, pp, dp, ep, batch, kv_dtype, ...)."""
    from ledger.serve import ServeConfig, serve as size

    sysm = system(gpu)
    return Serve(model, sysm, size(model, ServeConfig(context=context, **kw), sysm))
