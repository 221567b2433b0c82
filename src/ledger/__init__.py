"""train-ledger: parallel training as state placement.

The package reads bottom to top. Each line may import the lines above it, never one
below it, and nothing imports in a circle (tests/test_layers.py derives the graph from
the code and holds it to this order):

    errors       the one exception the core raises, and its validators
    pipeline     schedules as data, the simulator, closed-form makespans (pure arithmetic)
    anatomy      what each layer is (its kind; the recurrent mixers of hybrid stacks) and
                 a ModelSpec's exact parameter count, term by term
    checks       the construction checks of a ModelSpec
    model        ModelSpec: a decoder's shape and exact parameter count; released presets
    formats      number formats: bytes of a tensor in BF16, FP8, MXFP8, NVFP4, NF4, INT4
    memory       bytes per parameter of each resident state (StateBytes)
    frameworks   each framework's conventions as data, with sources; FP8 recipes
    finetune     what trains: frozen kinds and layers, peft's LoRA / DoRA adapters, NF4 bytes
    optim        Muon: the matrices it orthogonalises, Newton-Schulz FLOPs, its gathers
    config       ParallelConfig and MoESpec: how a run is placed
    system       GPU presets, hosts and NVLink domains, links; every figure's source
    arch         one layer: FLOPs, saved tensors, activations
    placement    collectives, dense and expert comms, rank layout, stages, footprint, place()
    step         GEMM and DP time, step time, MFU
    serve        inference: weights and KV cache per GPU, vLLM's paged pool, decode and prefill
    plan         the search over every placement
    validation   published runs: calibration and prediction rows
    run          whole runs: phases, checkpoints, failures, days, GPU-hours, cost, energy
    io           what a user hands over: typed limits, config.json, launch files, systems
    render       text, JSON, HTML, plan tables, time lines
    parallel     the seed's ledger.parallel: its names gathered, its report
    api          the Python API: load a model, report / estimate / plan / serve as typed
                 results with to_dict() (docs/api.md)
    cli          the train-ledger command
    toys verify  torch.distributed: the mechanisms run for real, and measured

``model``, ``config`` and ``system`` are the frozen inputs every layer types against; they
sit on what they need to check themselves at construction - the framework a config names
and the pipeline schedule it runs. The analytic core (all but ``toys`` and ``verify``)
needs only the standard library and numpy, and never imports torch.

The public names below load lazily, so ``python -m ledger.parallel`` and the CLI import
only what they use.
"""
from importlib import import_module

__version__ = "0.1.0"

_HOME = {
    "coll_bytes": "placement", "LedgerError": "errors", "StateBytes": "memory",
    "state_bytes": "memory", "ModelSpec": "model", "preset": "model", "Comm": "placement",
    "MoESpec": "config", "ParallelConfig": "config", "Placement": "placement",
    "activation_bytes_per_layer": "placement", "per_gpu_state": "placement",
    "place": "placement", "pp_bubble_fraction": "pipeline", "report": "render",
    # the Python API (ledger.api, docs/api.md): ledger.api.report / estimate / plan / serve
    "load_model": "api", "estimate_many": "api",
}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name in _HOME:
        return getattr(import_module(f"ledger.{_HOME[name]}"), name)
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")


def __dir__():
    return __all__
