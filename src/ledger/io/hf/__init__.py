"""A Hugging Face ``config.json``, read family by family as transformers' config classes
read it.

``reader`` opens the file (or a dict), finds the family, reads a composite's text model,
and builds the ModelSpec; ``families`` is the registry of ``model_type`` -> reader;
``keys`` holds the keys many families share (biases, windows, experts); ``dense``,
``layouts``, ``moe``, ``hybrids`` and ``kda`` the readers by kind of model; ``unmodelled`` the
one-line refusals naming the feature the ledger lacks. Defaults are those of the pinned
transformers' config classes, each cited where it is read.
"""
from ledger.io.hf.reader import Reader, from_hf_config, read_config, read_hf_config, spec_from_dict

__all__ = ["Reader", "from_hf_config", "read_config", "read_hf_config", "spec_from_dict"]
