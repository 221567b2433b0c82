"""Everything a user hands over, read as its framework reads it.

``limits`` bounds every typed number; ``hf/`` reads a Hugging Face ``config.json``
family by family (a composite as its text model; a family the ledger cannot count refused
naming the feature it lacks). ``launch`` is the record a launch file becomes, read
from a Megatron-LM launch (``megatron/``; scripts run through the bash subset of
``shell/``, the environment it hands the trainer read by ``environment``) or a torchtitan
job TOML (``torchtitan/``); ``system`` reads a cluster from
JSON or TOML, ``phases`` a run's phases (``files`` reads a file of either format). The
frameworks' own tables (Megatron's arguments, torchtitan's JobConfig and flavours at
their commits) are data in ``data/``; Megatron's own pipeline splits
(``--pipeline-model-parallel-layout``, first/last) are ``megatron/layout``. Every refusal
is one line.

May import: the specs, ``ledger.frameworks`` and ``ledger.run`` (a phase's record);
nothing below the edge imports it.
"""
from ledger.io.hf.families import FAMILIES
from ledger.io.hf.reader import from_hf_config, read_config, read_hf_config, spec_from_dict
from ledger.io.limits import (
                              MAX_CAPACITY_FACTOR,
                              MAX_DROPOUT,
                              MAX_GLOBAL_BATCH,
                              MAX_GPU_MEMORY_GIB,
                              MAX_GPUS,
                              MAX_GPUS_PER_DOMAIN, MAX_GPUS_PER_NODE,
                              MAX_HEADROOM_GIB,
                              MAX_LAYERS,
                              MAX_MICRO_BATCH,
                              MAX_MICROBATCHES,
                              MAX_MTBF_HOURS,
                              MAX_PRICE,
                              MAX_PUE,
                              MAX_RELAUNCH_MIN,
                              MAX_STEPS,
                              MAX_STORAGE_GBPS,
                              MIN_STORAGE_GBPS,
                              MAX_TIME,
                              MAX_TOKENS,
                              MAX_TOP,
                              MAX_VP,
                              MIN_TIME,
                              OneLineParser,
                              check_finite_json,
                              check_model_size,
                              check_world,
                              count,
                              model_flag,
                              natural,
                              real,
)
from ledger.io.megatron.layout import parse_layout, uneven_layers
from ledger.io.phases import load_phases
from ledger.io.system import load_system

__all__ = ["check_finite_json", "check_model_size", "check_world", "count", "FAMILIES",
           "from_hf_config", "load_phases", "load_system", "MAX_CAPACITY_FACTOR",
           "MAX_DROPOUT", "MAX_GLOBAL_BATCH", "MAX_GPU_MEMORY_GIB", "MAX_GPUS",
           "MAX_GPUS_PER_NODE", "MAX_HEADROOM_GIB", "MAX_LAYERS", "MAX_MICRO_BATCH",
           "MAX_MICROBATCHES", "MAX_MTBF_HOURS", "MAX_PRICE", "MAX_PUE",
           "MAX_RELAUNCH_MIN", "MAX_STEPS", "MAX_STORAGE_GBPS", "MAX_TIME", "MAX_TOKENS",
           "MAX_TOP", "MAX_VP", "MIN_STORAGE_GBPS", "MIN_TIME", "model_flag", "natural",
           "OneLineParser", "parse_layout", "read_config", "read_hf_config", "real",
           "spec_from_dict", "uneven_layers"]
