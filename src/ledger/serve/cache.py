"""The KV cache of one layer on one GPU, kind by kind: what a token of context adds, and
what the layer keeps.

Each kind of attention layer has one function (``KINDS``) returning a ``LayerCache``:

  full      K and V of every token: 2 x kv heads per GPU x head width x bytes
  mla       DeepSeek-V2's compressed latent and the shared rotary key, one "head" that TP
            does not split
  sliding   a full layer that attends its last ``window`` keys only
  chunked   Llama 4's local layers: each query sees the keys of its own chunk

A layer whose mixer is recurrent (Mamba, linear attention, a short convolution) keeps no
bytes per token but a state per sequence, as vLLM shapes it (``ledger.serve.state``); its
kind is the mixer's (mamba1, mamba2, gdn, kda, lightning, conv). Falcon-H1's layers run
attention and Mamba-2 side by side and keep both ("full+mamba2"); a layer without a mixer
(Nemotron-H's MLP layers) keeps nothing ("none"). What the layer keeps at a context of n
tokens is ``LayerCache.bytes_at``; what a serving engine reserves for it is
``ledger.serve.paging``.

>>> from ledger.model import llama3_70b, deepseek_v3
>>> full_attention(llama3_70b(), 0, tp=8, kv_bytes=2).bytes_per_token  # 2 x 1 x 128 x 2
512
>>> mla(deepseek_v3(), 0, tp=8, kv_bytes=2).bytes_per_token  # (512 + 64) x 2, every rank
1152
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.errors import LedgerError
from ledger.placement import kv_width
from ledger.serve.state import RecurrentState, layer_state

# bytes per cached element: vLLM's --kv-cache-dtype (vllm/utils/torch_utils.py:38-40 at
# 9aaf83ef50: "fp8", "fp8_e4m3", "fp8_e5m2" are stored as uint8; "auto" is the model's
# dtype, bf16 here) with per-tensor scales, which add no bytes per token
# (vllm/v1/kv_cache_interface.py:59-69 per-tensor mode, :152-164 page size); "nvfp4"
# (vLLM's and SGLang's --kv-cache-dtype nvfp4) packs two e2m1 codes a byte and one e4m3
# scale per 16 elements beside them (``kv_row_bytes``)
NVFP4_KV = 9 / 16  # NVFP4's bytes per element where a row divides by 16 (kv_row_bytes)
KV_DTYPES = {"bf16": 2, "fp8": 1, "nvfp4": NVFP4_KV}


def kv_row_bytes(width: int, kv_bytes) -> int:
    """Bytes of one cached row of ``width`` elements (a head's K or V, MLA's latent and
    rotary key): width x the dtype's bytes, or NVFP4's width // 2 bytes of codes and
    width // 16 fp8 block scales (vLLM's --kv-cache-dtype nvfp4, CacheDType in
    vllm/config/cache.py at 002f10e0; nvfp4_kv_cache_full_dim, vllm/utils/torch_utils.py at
    0024350b; FullAttentionSpec.real_page_size_bytes, vllm/v1/kv_cache_interface.py at
    001cabc1).

    >>> kv_row_bytes(128, 2), kv_row_bytes(128, NVFP4_KV)  # 256; 64 codes + 8 scales
    (256, 72)
    """
    if kv_bytes == NVFP4_KV:
        return width // 2 + width // 16
    return width * kv_bytes


@dataclass(frozen=True)
class LayerCache:
    """One layer's cache on one GPU."""

    kind: str  # a key of KINDS
    bytes_per_token: int  # bytes one more token of context adds (below any window)
    window: int | None = None  # keys a query sees at most (sliding window, chunk); None: all
    state: RecurrentState | None = None  # held whatever the context (a recurrent mixer)

    @property
    def state_bytes(self) -> int:
        return self.state.bytes if self.state is not None else 0

    def kept_tokens(self, context: int) -> int:
        """Tokens the layer keeps between decode steps: all of them, or the last
        window - 1 (the next query brings its own key and sees window keys in all;
        transformers' DynamicSlidingWindowLayer keeps the same, cache_utils.py:244-247
        in 5.23.0)."""
        return context if self.window is None else min(context, self.window - 1)

    def bytes_at(self, context: int) -> int:
        """Bytes the layer holds for one sequence of ``context`` tokens."""
        return self.bytes_per_token * self.kept_tokens(context) + self.state_bytes


def kv_heads_per_gpu(model, tp: int) -> int:
    """KV heads one GPU caches: kv_heads / tp, and one replicated head when tp exceeds
    them (vLLM: vllm/config/model.py:1256-1261 ``max(1, total_num_kv_heads //
    tensor_parallel_size)``; the weights replicate them too, which needs tp % kv_heads == 0:
    vllm/model_executor/layers/linear.py:1029-1034)."""
    if model.kv_heads < tp and tp % model.kv_heads:
        raise LedgerError("tp", f"tp({tp}) must divide kv_heads({model.kv_heads}) or be a "
                                f"multiple of it (vLLM replicates a KV head over tp / kv_heads "
                                f"GPUs)")
    if model.kv_heads >= tp and model.kv_heads % tp:
        raise LedgerError("kv_heads", f"kv_heads({model.kv_heads}) is not divisible by "
                                      f"tp({tp})")
    return max(1, model.kv_heads // tp)


def full_attention(model, layer: int, tp: int, kv_bytes: int) -> LayerCache:
    """K (head_dim wide) and V (v_head_dim wide) of each of this GPU's KV heads per token
    (vLLM FullAttentionSpec.real_page_size_bytes, kv_cache_interface.py:279-297:
    block_size x num_kv_heads x (head_size + head_size_v) x dtype bytes, per block)."""
    per_token = kv_heads_per_gpu(model, tp) * (kv_row_bytes(model.head_dim, kv_bytes)
                                               + kv_row_bytes(model.v_head_dim, kv_bytes))
    return LayerCache("full", per_token)


def mla(model, layer: int, tp: int, kv_bytes: int) -> LayerCache:
    """MLA caches c_KV (kv_lora_rank) and the decoupled rotary key k_R (qk_rope_head_dim)
    per token, shared by all heads (DeepSeek-V2 sec. 2.1.2, eq. 9-10): vLLM's MLA layer
    is one KV head of kv_lora_rank + qk_rope_head_dim (mla_attention.py:363, :367;
    MLAAttentionSpec.real_page_size_bytes, kv_cache_interface.py:354-369: no factor 2),
    whole on every TP rank (model.py:1252-1254: "it becomes MQA"). transformers 5.23.0
    caches the same two tensors (modeling_deepseek_v3.py:444-459)."""
    latent = model.kv_lora_rank + model.qk_rope_head_dim
    return LayerCache("mla", kv_row_bytes(latent, kv_bytes))


def _local(kind: str, model, layer: int, tp: int, kv_bytes: int) -> LayerCache:
    base = (mla if model.attention == "mla" else full_attention)(model, layer, tp, kv_bytes)
    return LayerCache(kind, base.bytes_per_token, model.window(layer))


def sliding(model, layer: int, tp: int, kv_bytes: int) -> LayerCache:
    """A window of ``sliding_window`` keys per query (Mistral 7B sec. 2, Gemma 2, gpt-oss):
    the per-token bytes of the layer's attention, kept for the last window - 1 tokens."""
    return _local("sliding", model, layer, tp, kv_bytes)


def chunked(model, layer: int, tp: int, kv_bytes: int) -> LayerCache:
    """Llama 4's chunked local attention: a query sees its own chunk, at most chunk - 1
    earlier keys (transformers caches it as a sliding window of the chunk,
    cache_utils.py:1419-1433 in 5.23.0: "sliding and chunked are the same")."""
    return _local("chunked", model, layer, tp, kv_bytes)


KINDS = {"full": full_attention, "mla": mla, "sliding": sliding, "chunked": chunked}


def layer_kind(model, layer: int) -> str:
    """Which attention cache kind layer ``layer`` (0-based) has."""
    if model.window(layer) is not None:
        return "chunked" if model.local_attention == "chunked" else "sliding"
    return "mla" if model.attention == "mla" else "full"


def _layer(model, i: int, tp: int, kv_bytes: int, state_dtypes: tuple[str, str]) -> LayerCache:
    kind = model.layer_kind(i) if hasattr(model, "layer_kind") else None
    state = layer_state(model, kind.mixer, tp, state_dtypes) if kind is not None else None
    if kind is None or kind.attention:
        view = model.attention_of(kind) if kind is not None else model
        cache = KINDS[layer_kind(view, i)](view, i, tp, kv_bytes)
        if state is None:
            return cache
        return replace(cache, kind=f"{cache.kind}+{state.mixer}", state=state)
    return LayerCache(state.mixer if state is not None else "none", 0, state=state)


def layer_caches(model, layers, tp: int, kv_bytes: int,
                 state_dtypes: tuple[str, str] = ("bfloat16", "bfloat16")) -> list[LayerCache]:
    """The caches of ``layers`` (indices) on one GPU of a TP group of ``tp``: each attention
    layer as it attends (``ModelSpec.attention_of``: a global layer's own K/V shape), each
    recurrent mixer's state in the (conv, ssm) dtypes ``state_dtypes``
    (``ledger.serve.state.state_dtypes``). DeepSeek-V4's compressed entries (and its
    indexer's keys) beside its window are not modelled: refused naming them."""
    if getattr(model, "attention", "mha") == "csa":
        raise LedgerError("model", "DeepSeek-V4's serving cache (the window's K=V, its CSA / "
                                   "HCA compressed entries, the indexer's keys and the "
                                   "compressors' buffers) is not modelled")
    return [_layer(model, i, tp, kv_bytes, state_dtypes) for i in layers]


def decompressed_mla_elements(model) -> int:
    """Elements per token per layer an MLA model would cache with K and V decompressed:
    heads x (qk_nope + qk_rope) for K and heads x v_head_dim for V, as transformers 4.57
    cached them (modeling_deepseek_v3.py:400-421 in 4.57.1). DeepSeek-V3: 128 x 192 +
    128 x 128 = 40,960 against the latent's 576."""
    return int(2 * kv_width(model))  # MLA's kv_heads are its heads
