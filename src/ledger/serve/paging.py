"""vLLM's paged KV cache: pages, groups, blocks, and how many sequences fit.

Each layer's cache becomes a spec of ``block_size``-token pages (``spec``); layers of
different kinds form groups of equal size that share one pool of pages (``groups``); the
pool holds ``available // page // group size`` blocks on each worker and the fewest over
the pipeline's workers is what every worker keeps (``pool``); a request at the longest
length may hold ``blocks_per_request`` of them, and

    max concurrency = num_blocks / blocks_per_request      (a fraction: vLLM logs "%.2fx")

All of it is vllm/v1/kv_cache_interface.py and vllm/v1/core/kv_cache_utils.py at the
commit in ``ledger.serve.engine``. Worked example (Llama-3-70B at TP 8, bf16, 50 GiB for
the cache, 8,192 tokens): a page is 16 x 512 B = 8,192 B per layer, 50 GiB // 8,192 // 80
layers = 81,920 blocks, 8,192 / 16 = 512 blocks a request: 160.00x.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.errors import LedgerError


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Spec:
    """A layer's KV-cache spec as vLLM's grouping compares them."""

    kind: str  # "full" (FullAttention and MLA specs), "sliding", "chunked", "state"
    page_bytes: int  # one block of one layer
    block_size: int  # tokens per block
    window: int | None = None

    def admission_blocks(self, max_model_len: int, batched_tokens: int) -> int:
        """Blocks one request may hold (``max_memory_usage_bytes`` / page):
        full   cdiv(max_model_len, block)            kv_cache_interface.py:210-218
        sliding cdiv(min(window - 1 + batched, L), block) + 1 (the window may start
               inside a block)                         :463-495
        chunked cdiv(min(chunk + batched, L), block)  :415-432
        state  1 (one state per sequence; mamba_cache_mode "none", :582-592)."""
        if self.kind == "full":
            return cdiv(max_model_len, self.block_size)
        if self.kind == "sliding":
            return cdiv(min(self.window - 1 + batched_tokens, max_model_len),
                        self.block_size) + 1
        if self.kind == "chunked":
            return cdiv(min(self.window + batched_tokens, max_model_len), self.block_size)
        return 1


def specs(cache, block_size: int, state_page: int | None = None) -> list[Spec]:
    """A ``ledger.serve.cache.LayerCache`` as vLLM's specs: an attention page is
    block_size x the layer's bytes per token (AttentionSpec.real_page_size_bytes,
    kv_cache_interface.py:167-184; MLA :354-369); a recurrent state is one page of its
    state bytes (MambaSpec.page_size_bytes, :572-580), padded to ``state_page`` when vLLM
    aligned it to the attention page (``align_hybrid``). A layer that runs both (Falcon-H1)
    has both; one without a mixer, none."""
    out = []
    if cache.bytes_per_token:
        kind = "full" if cache.window is None else cache.kind.split("+")[0]
        out.append(Spec(kind, block_size * cache.bytes_per_token, block_size, cache.window))
    if cache.state is not None:
        out.append(Spec("state", state_page or cache.state_bytes, block_size))
    return out


def align_hybrid(caches: list, block_size: int) -> tuple[int, int | None]:
    """(block size, padded state page) of a model with attention and recurrent layers, as
    vLLM aligns them (Platform._align_hybrid_block_size, vllm/platforms/interface.py:
    509-676, with mamba_cache_mode "none": vLLM turns prefix caching off for hybrids,
    vllm/config/model.py:1817-1823, and then the mode, models/config.py:388-395): the
    attention block grows to the fewest multiples of ``align`` tokens whose page holds one
    state,

        attn_block = align x cdiv(state page, align x attention bytes per token)  :640-645

    with align = max(the backend's smallest kernel block, block_size) = block_size here
    (FlashAttention: MultipleOf(16), or 16, 32, 64 with a float32 state, flash_attn.py:
    77-94; :618-626), and the state page is padded to exactly the attention page
    (:658-676). Without both kinds nothing changes (:608-609; an attention-free model
    has no attention backend, :485-487).

    >>> from ledger.serve.cache import LayerCache
    >>> from ledger.serve.state import RecurrentState, StateTensor
    >>> s = RecurrentState("gdn", (StateTensor("conv", (4096, 3), "bfloat16", True),
    ...                            StateTensor("ssm", (16, 128, 128), "bfloat16")))  # 548,864 B
    >>> align_hybrid([LayerCache("full", 1024), LayerCache("gdn", 0, state=s)], 16)
    (544, 557056)
    """
    per_token = [c.bytes_per_token for c in caches if c.bytes_per_token]
    states = [c.state_bytes for c in caches if c.state is not None]
    if not per_token or not states:
        return block_size, None
    attn, state = per_token[0], max(states)  # vLLM sizes both from the model's config
    block = max(block_size, block_size * cdiv(state, block_size * attn))
    return block, block * attn


def unify_without_hybrid_manager(specs: list[Spec]) -> list[Spec]:
    """With the hybrid manager off, a model with full and local layers caches every
    local layer in full (unify_hybrid_kv_cache_specs, kv_cache_utils.py:1324-1417: "we
    do not enable any optimizations for saving KV cache memory")."""
    kinds = {s.kind for s in specs}
    if "state" in kinds and len(kinds) > 1:
        raise LedgerError("hybrid_kv_cache_manager", "vLLM cannot cache recurrent layers "
                                                     "beside attention without its hybrid "
                                                     "KV-cache manager "
                                                     "(unify_hybrid_kv_cache_specs, "
                                                     "kv_cache_utils.py:1410-1417)")
    if "full" not in kinds or not kinds & {"sliding", "chunked"}:
        return specs
    return [replace(s, kind="full", window=None) if s.kind in ("sliding", "chunked") else s
            for s in specs]


def _unify_pages(specs: list[Spec]) -> list[Spec]:
    """Smaller pages take more tokens per block until every page is the largest
    (unify_kv_cache_spec_page_size, kv_cache_utils.py:1012-1049)."""
    top = max(s.page_bytes for s in specs)
    out = []
    for s in specs:
        if top % s.page_bytes:
            raise LedgerError("model", f"vLLM cannot unify KV pages of {s.page_bytes:,} and "
                                       f"{top:,} bytes (kv_cache_utils.py:1039-1043)")
        ratio = top // s.page_bytes
        out.append(replace(s, page_bytes=top, block_size=s.block_size * ratio))
    return out


def groups(specs: list[Spec]) -> list[tuple[Spec, list[int]]]:
    """The KV-cache groups: (spec, layer indices). One group of every layer when all specs
    are equal (kv_cache_utils.py:1638-1643); otherwise pages unified, layers of each spec
    split into groups of ``group_size`` = the fewest layers of any spec (or the most,
    when most < 1.5 x fewest), layers[i::n] to group i of n, the last padded
    (_get_kv_cache_groups_uniform_page_size, :1057-1176)."""
    if len(set(specs)) == 1:
        return [(specs[0], list(range(len(specs))))]
    specs = _unify_pages(specs)
    by_spec: dict[Spec, list[int]] = {}
    for i, s in enumerate(specs):
        by_spec.setdefault(s, []).append(i)
    fewest = min(len(v) for v in by_spec.values())
    most = max(len(v) for v in by_spec.values())
    size = most if most < fewest * 1.5 else fewest
    out = []
    for s, layers in by_spec.items():
        n = cdiv(len(layers), size)
        out += [(s, layers[i::n]) for i in range(n)]
    return out


@dataclass(frozen=True)
class Pool:
    """The KV-cache pool every worker of one engine keeps, and what it admits."""

    page_bytes: int  # one block of one layer
    groups: int  # KV-cache groups
    group_size: int  # layer slots per group on the fullest worker
    num_blocks: int  # blocks per layer slot (the fewest over the workers)
    blocks_per_request: int  # blocks a request at max_model_len holds, over all groups
    request_bytes: int  # bytes one such request needs on the fullest worker
    max_concurrency: float  # num_blocks / blocks_per_request: vLLM's "%.2fx"
    kv_tokens: int  # "GPU KV cache size: %s tokens" = int(max_concurrency x max_model_len)
    # (needed, available) bytes on the first worker that cannot hold one request, where
    # vLLM refuses to start (_check_enough_kv_cache_memory, kv_cache_utils.py:691-728:
    # "No available memory for the cache blocks" when available <= 0); None: it starts
    short: tuple[float, float] | None = None
    worker_blocks: tuple[int, ...] = ()  # each pipeline worker's own count, before the min
    worker_need_bytes: tuple[int, ...] = ()  # what one request needs on each worker

    @property
    def binding_worker(self) -> int:
        """The pipeline worker whose memory sets ``num_blocks`` (the first with the fewest)."""
        return self.worker_blocks.index(min(self.worker_blocks)) if self.worker_blocks else 0


def pool(caches: list, workers: list[list[int]], available: list[float], max_model_len: int,
         eng) -> Pool:
    """The pool of an engine whose layers have ``caches`` (LayerCache, model order) and
    whose pipeline workers hold the layers ``workers[r]`` with ``available[r]`` bytes for
    the cache each (get_kv_cache_configs, kv_cache_utils.py:1945-2074: global groups
    projected on each worker, num_blocks the minimum). ``eng``: an Engine."""
    entries = [(i, s) for i, c in enumerate(caches)
               for s in specs(c, eng.block_size, eng.state_page_bytes)]
    all_specs = [s for _, s in entries]
    if not eng.hybrid_manager:
        all_specs = unify_without_hybrid_manager(all_specs)
    grouped = [(s, [entries[j][0] for j in members]) for s, members in groups(all_specs)]
    page = grouped[0][0].page_bytes
    per_request = sum(s.admission_blocks(max_model_len, eng.max_num_batched_tokens)
                      for s, _ in grouped)  # get_max_concurrency_for_kv_cache_config :877-895
    sizes = []
    for held in workers:
        mine = set(held)
        sizes.append(max(sum(i in mine for i in members) for _, members in grouped))
    blocks = [max(int(avail // page // max(size, 1)), 0) for avail, size in zip(available, sizes)]
    num_blocks = min(blocks)  # get_num_blocks :935-952, then the minimum :2061-2071
    # one request at max_model_len on each worker (_max_memory_usage_bytes_from_groups
    # :1741-1801): its layer slots x page x the request's blocks
    needs = [size * page * per_request for size in sizes]
    short = next(((n, a) for n, a in zip(needs, available) if a <= 0 or n > a), None)
    conc = num_blocks / per_request
    return Pool(page, len(grouped), max(sizes), num_blocks, per_request, max(needs), conc,
                int(conc * max_model_len), short, tuple(blocks), tuple(needs))
