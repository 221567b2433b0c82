"""Serving: the same placement with two kinds of state, weights and the KV cache.

``cache`` sizes each layer's KV cache kind by kind (GQA, MLA's latent, sliding and chunked
windows; one function per kind) and ``state`` a recurrent layer's state (Mamba-1/2, Gated
DeltaNet, KDA, lightning attention, short convolutions) as vLLM shapes it; ``engine``
holds the layout (``ServeConfig``) and vLLM's defaults at a named commit; ``quant`` how a
checkpoint stores its weights (its ``quantization_config`` as vLLM reads it; a preset's
release in ``checkpoints``) and ``qbytes`` each quantized matrix's bytes (``ledger.formats``)
and what vLLM's kernels repack; ``skips`` which modules each method leaves unquantized, its
list matched by the method's own rule; ``weights`` the weights per GPU from the ledger's sharding
over vLLM's pipeline split; ``disk`` a checkpoint's bytes on disk (with the MTP modules vLLM
does not load); ``sglang`` SGLang's static fraction and token pool; ``graphs``
the CUDA graphs vLLM captures and its estimate of their memory; ``budget`` the
memory vLLM leaves for the cache after its profile run and that estimate; ``margin`` the
verdict at both ends of the estimate's logged spread; ``paging`` vLLM's pages, groups,
blocks, the alignment of attention and state pages, and maximum concurrency; ``comms``
the collectives per token; ``timing`` decode from the memory roofline and prefill from
compute; ``estimate`` puts them together - ``serve(model, cfg, system)``.

May import: the specs, ``ledger.formats`` (bytes of a tensor in a number format),
``ledger.finetune.modules`` (each layer's weight matrices), ``ledger.arch`` (FLOPs),
``ledger.placement`` (parameter sharding, collectives, the rank layout).
"""
from ledger.serve.cache import KINDS, KV_DTYPES, LayerCache, layer_caches, layer_kind
from ledger.serve.engine import (
                                 BLOCK_SIZE,
                                 GPU_MEMORY_UTILIZATION,
                                 VLLM_COMMIT,
                                 Engine,
                                 ServeConfig,
                                 engine,
)
from ledger.serve.estimate import ServeEstimate, Stage, serve
from ledger.serve.paging import Pool, Spec, align_hybrid, groups, specs
from ledger.serve.state import RecurrentState, StateTensor, state_dtypes
from ledger.serve.weights import pipeline_split, weight_bytes_by_rank

__all__ = ["BLOCK_SIZE", "Engine", "GPU_MEMORY_UTILIZATION", "KINDS", "KV_DTYPES", "LayerCache",
           "Pool", "RecurrentState", "ServeConfig", "ServeEstimate", "Spec", "Stage",
           "StateTensor", "VLLM_COMMIT", "align_hybrid", "engine", "groups", "layer_caches",
           "layer_kind", "pipeline_split", "serve", "specs", "state_dtypes",
           "weight_bytes_by_rank"]
