"""Text and JSON of one served model (``ledger.serve.ServeEstimate``)."""
from __future__ import annotations

from ledger.render.units import fmt_bytes
from ledger.serve import VLLM_COMMIT
from ledger.serve.cache import decompressed_mla_elements
from ledger.serve.graphs import SPREAD
from ledger.serve.paging import cdiv
from ledger.serve.sglang import SGLANG_COMMIT


def _kinds(est) -> list[tuple[str, object, int]]:
    """(kind, a LayerCache of it, layers) for each distinct cache, model order."""
    seen: dict = {}
    for c in est.caches:
        seen[c] = seen.get(c, 0) + 1
    return [(c.kind, c, n) for c, n in seen.items()]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def _header(model, est, system) -> str:
    c = est.cfg
    ep = f" ep={c.ep}" if model.is_moe else ""
    who = f"SGLang {SGLANG_COMMIT[:10]}" if est.sglang else f"vLLM {VLLM_COMMIT[:10]}"
    return (f"{model.name} served: tp={c.tp} pp={c.pp} dp={c.dp}{ep} -> {c.world} GPUs on "
            f"{system.gpu.name}, context {c.context:,}, batch {c.batch}, kv {c.kv_dtype} "
            f"[{who}]")


def _format(est) -> str:
    """The weights' format as served: bf16, or the checkpoint's quantization."""
    q = est.cfg.quant
    if q is None:
        return "bf16"
    scope = "experts, the rest bf16" if q.experts_only else "linear layers"
    backend = f", {est.mxfp4_backend} kernels" if q.method == "mxfp4" else ""
    return f"{q.label}, {scope}{backend}"


def _weights_line(model, est) -> str:
    c = est.cfg
    text = f"  {'weights per GPU':<22}{fmt_bytes(est.weight_bytes_per_gpu, 9)}   ({_format(est)}"
    if model.is_moe:
        how = f"whole experts, ep {c.ep}" if c.ep > 1 else "each split"
        text += f"; routed experts over tp x dp = {c.tp * c.dp} GPUs, {how}"
    if c.pp > 1:
        text += f"; PP rank {max(est.stages, key=lambda s: s.weight_bytes).rank}"
    return text + ")"


def _shape(t) -> str:
    return f"{t.name} {' x '.join(f'{n:,}' for n in t.shape)} {t.dtype}"


def _state_lines(est) -> list[str]:
    """A recurrent layer's state tensors as vLLM keeps them, the same shards as transformers
    keeps them, and the attention pages vLLM raised to hold one."""
    pad = " " * 24
    states = {c.state for c in est.caches if c.state is not None}
    lines = []
    for st in states:
        hf = st.transformers_layout()
        lines += [f"{pad}{st.mixer} state, a sequence and layer: vLLM "
                  f"{' + '.join(_shape(t) for t in st.tensors)} = {fmt_bytes(st.bytes)}",
                  f"{pad}(transformers 5.23 keeps these shards as "
                  f"{' + '.join(_shape(t) for t in hf.tensors)} = {fmt_bytes(hf.bytes)})"]
    page = est.engine.state_page_bytes
    if page is not None:
        state = max(s.bytes for s in states)
        pad_pct = (f"the state padded by {100 * (page - state) / state:.2f}%" if page > state
                   else "no padding")
        lines.append(f"{pad}pages: {est.engine.block_size}-token attention blocks so that a "
                     f"page ({fmt_bytes(page)}) holds a state ({fmt_bytes(state)}): {pad_pct}")
    return lines


def _cache_lines(model, est) -> list[str]:
    c = est.cfg
    top = max(est.stages, key=lambda s: s.kv_bytes_per_sequence)
    hybrid = any(cache.state is not None for cache in est.caches)
    w = max(8, *(len(k) + 1 for k, _, _ in _kinds(est)))
    lines = [f"  {'KV cache per GPU':<22}{fmt_bytes(est.kv_bytes_per_token, 9)} per token, "
             f"{fmt_bytes(est.kv_bytes_per_sequence)} per sequence of {c.context:,} tokens"
             + (f" (PP rank {top.rank})" if c.pp > 1 else ""),
             f"  {'':<22}{'layers':>6}  {'kind':<{w}}{'per token':>13}  {'window':>9}  "
             f"{'tokens kept':>11}" + f"  {'state':>13}" * hybrid]
    for kind, cache, n in _kinds(est):
        window = f"{cache.window:,}" if cache.window else "-"
        attends = cache.bytes_per_token > 0
        per_token = fmt_bytes(cache.bytes_per_token, 9) if attends else f"{'-':>13}"
        kept = f"{cache.kept_tokens(c.context):>11,}" if attends else f"{'-':>11}"
        state = (f"  {fmt_bytes(cache.state_bytes, 9)}" if cache.state else f"  {'-':>13}") \
            * hybrid
        lines.append(f"  {'':<22}{n:>6}  {kind:<{w}}{per_token}  {window:>9}  {kept}{state}")
    if model.attention == "mla":
        per = model.kv_lora_rank + model.qk_rope_head_dim
        lines.append(f"  {'':<22}MLA caches its latent, {per:,} elements a token and layer "
                     f"(vLLM, transformers >= 5); K and V decompressed, as transformers 4.57 "
                     f"cached them: {decompressed_mla_elements(model):,}")
    return lines + _state_lines(est)


def _budget_lines(est) -> list[str]:
    b = est.binding.budget
    lines = []
    if b.given_bytes is not None:
        lines.append(f"  {'memory for KV cache':<22}{fmt_bytes(b.given_bytes, 9)}   "
                     f"(--kv-cache-memory-bytes: no profile run)")
    else:
        u = est.cfg.gpu_memory_utilization
        lines += [f"  {'memory (one GPU)':<22}{fmt_bytes(b.hbm_bytes, 9)} x {u:g} = "
                  f"{fmt_bytes(b.requested_bytes)} for vLLM: weights {fmt_bytes(b.weights_bytes)}"
                  f", profile run {fmt_bytes(b.activation_bytes)} (estimate)",
                  f"  {'':<22}non-torch {fmt_bytes(b.non_torch_bytes)} ("
                  f"{'logged on this GPU' if b.non_torch_logged else 'vLLM measures it'}: "
                  f"--non-torch-gib), CUDA graphs {fmt_bytes(b.cudagraph_bytes)} "
                  f"({_graphs_note(est.cfg, b)}) -> KV cache {fmt_bytes(b.available_bytes)}"]
    return lines


def _graphs_note(cfg, b) -> str:
    """Where the CUDA-graph figure comes from."""
    if cfg.enforce_eager:
        return "--enforce-eager"
    g = b.graphs
    if g is None:
        return "--cudagraph-gib"
    return (f"estimate: {g.piecewise} piecewise + {g.full} full graphs up to {g.largest} "
            f"tokens")


def _margin_lines(est) -> list[str]:
    """Where the CUDA-graph estimate's logged spread holds both verdicts: the estimate with
    which the engine would still start, and the spread's two ends."""
    m = est.graph_margin
    if m is None or m.settled:
        return []
    lo, hi = SPREAD
    if m.threshold_bytes > 0:
        limit = f"starts only while vLLM's estimate is at most {fmt_bytes(m.threshold_bytes)}"
    else:
        limit = "would not start even without the estimate"
    return [f"  {'CUDA-graph margin':<22}{limit}; logged estimates fell x{lo:.2f} to "
            f"x{hi:.2f} of the model's ({fmt_bytes(m.low_bytes)} to {fmt_bytes(m.high_bytes)} "
            f"here, max sequences {m.sequences_low:,} to {m.sequences_high:,}): the verdict "
            f"is within the estimate's uncertainty"]


def _margin_json(m) -> dict | None:
    if m is None:
        return None
    return {"spread": list(SPREAD), "low_bytes": m.low_bytes, "high_bytes": m.high_bytes,
            "threshold_bytes": m.threshold_bytes, "max_sequences_low": m.sequences_low,
            "max_sequences_high": m.sequences_high, "settled": m.settled}


def _graphs_json(g) -> dict | None:
    """The graphs the CUDA-graph estimate counts (None: given or --enforce-eager)."""
    if g is None:
        return None
    return {"piecewise": g.piecewise, "full": g.full, "largest": g.largest}


def _sglang_lines(est) -> list[str]:
    """SGLang's plan on the GPU whose pool is smallest."""
    p = min(est.sglang, key=lambda x: x.max_total_num_tokens)
    c = est.cfg
    given = "--mem-fraction-static" if c.mem_fraction_static is not None else (
        f"SGLang's default: {p.gpu_mem_mb:,.0f} MiB less {p.reserved_mb:,.0f} MiB reserved "
        f"for activations and CUDA graphs (chunked prefill "
        f"{'off' if p.chunked_prefill_size == -1 else format(p.chunked_prefill_size, ',')}, "
        f"CUDA graphs to batch {p.cuda_graph_max_bs})")
    lines = [f"  {'memory (one GPU)':<22}{fmt_bytes(p.total_bytes, 9)} x "
             f"{p.mem_fraction_static:g} for weights and tokens ({given})",
             f"  {'':<22}weights {fmt_bytes(p.weights_bytes)} -> token pool "
             f"{fmt_bytes(p.pool_bytes)}, {fmt_bytes(p.cell_bytes)} a token of every layer"]
    if not p.starts:
        why = ("no memory is left for the token pool" if p.max_total_num_tokens <= 0 else
               f"one request of {c.context:,} tokens needs {c.context:,} tokens, the pool "
               f"holds {p.max_total_num_tokens:,}")
        return lines + [f"  {'max sequences':<22}0: SGLang would refuse to start ({why})"]
    return lines + [f"  {'max sequences':<22}{est.max_sequences:,} of {c.context:,} tokens "
                    f"(max_total_num_tokens={p.max_total_num_tokens:,}, "
                    f"max_running_requests={p.max_running_requests:,})"]


def _pool_lines(est) -> list[str]:
    p, e, c = est.pool, est.engine, est.cfg
    lines = [f"  {'pool':<22}{e.block_size}-token blocks of {fmt_bytes(p.page_bytes)} a layer, "
             f"{p.groups} group{'s' * (p.groups > 1)} of {p.group_size} layers: "
             f"{p.num_blocks:,} blocks; "
             f"a request of {c.context:,} takes {p.blocks_per_request:,}"]
    if p.short is not None:
        need, have = p.short
        why = ("no memory is left for the cache blocks" if have <= 0 else
               f"one request of {c.context:,} tokens needs {fmt_bytes(need)} of KV cache, "
               f"{fmt_bytes(have)} is available")
        lines.append(f"  {'max sequences':<22}0: vLLM would refuse to start ({why})")
        return lines
    replicas = f"; {c.dp} engines (dp)" if c.dp > 1 else ""
    lines.append(f"  {'max sequences':<22}{est.max_sequences:,} of {c.context:,} tokens per "
                 f"engine (\"Maximum concurrency for {c.context:,} tokens per request: "
                 f"{p.max_concurrency:.2f}x\", GPU KV cache size {p.kv_tokens:,} tokens)"
                 f"{replicas}")
    return lines


def _chunk_source(est) -> str:
    """The engine setting the prefill chunk is: vLLM's or SGLang's name for it."""
    return "chunked_prefill_size" if est.cfg.engine == "sglang" else "max_num_batched_tokens"


def _chunks(est) -> str:
    """How the prompt is chunked, by which of the engine's settings, and the roofline."""
    n, chunk = cdiv(est.cfg.context, est.prefill_chunk_tokens), est.prefill_chunk_tokens
    if est.cfg.engine == "sglang" and est.cfg.chunked_prefill_size == -1:
        return "in one pass (chunked_prefill_size -1: not chunked; compute roofline)"
    return (f"in {n:,} chunk{'s' * (n > 1)} of {chunk:,} ({_chunk_source(est)}; "
            f"compute roofline)")


def _time_lines(est) -> list[str]:
    c = est.cfg
    inflight = f", {c.pp} batches in flight" if c.pp > 1 else ""
    return [f"  {'prefill':<22}{_ms(est.prefill_s)} for {c.context:,} tokens {_chunks(est)}",
            f"  {'decode':<22}{_ms(est.decode_s_per_token)} per token at batch {c.batch} "
            f"(memory roofline): {est.decode_tokens_per_s:,.0f} tokens/s per engine{inflight}"]


def _comm_lines(est) -> list[str]:
    top = est.binding
    if not any(s.comms for s in est.stages):
        return []
    where = f" (PP rank {top.rank})" if est.cfg.pp > 1 else ""
    lines = [f"  {'axis':<4} {'collective':<16}{'link':<8}{'bytes/token':>13}  "
             f"{'calls/pass':>10}  payload, per GPU{where}"]
    for r in top.comms:
        unit = " per sampled token" if r.per_sampled_token else ""
        lines.append(f"  {r.axis:<4} {r.kind:<16}{r.link:<8}{fmt_bytes(r.bytes_per_token, 9)}  "
                     f"{r.calls:>10}  {r.what}{unit}")
    return lines


def serve_text(model, system, est) -> str:
    """What one GPU holds, how many sequences fit, what a token costs."""
    times = _time_lines(est) if est.starts else []  # no engine, no time
    plan = _sglang_lines(est) if est.sglang else [*_budget_lines(est), *_pool_lines(est),
                                                  *_margin_lines(est)]
    lines = [_header(model, est, system), _weights_line(model, est), *_cache_lines(model, est),
             *plan, *times, *_comm_lines(est)]
    if est.cfg.pp > 1 and not est.sglang:
        lines.append(f"  {'PP rank':<8}{'layers':>7}{'weights':>14}{'KV/sequence':>14}"
                     f"{'KV memory':>14}{'blocks':>10}")
        for s, blocks in zip(est.stages, est.pool.worker_blocks):
            lines.append(f"  {s.rank:<8}{len(s.layers):>7}{fmt_bytes(s.weight_bytes, 10)}"
                         f"{fmt_bytes(s.kv_bytes_per_sequence, 10)}"
                         f"{fmt_bytes(s.budget.available_bytes, 10)}{blocks:>10,}")
    return "\n".join(lines)


def _rows(rows) -> list[dict]:
    return [{"axis": r.axis, "kind": r.kind, "link": r.link, "bytes_per_token": r.bytes_per_token,
             "calls_per_pass": r.calls, "group": r.group, "what": r.what,
             "per_sampled_token": r.per_sampled_token} for r in rows]


def _state(state) -> dict | None:
    """A recurrent state's tensors, vLLM's and transformers' layouts."""
    if state is None:
        return None
    hf = state.transformers_layout()
    return {"mixer": state.mixer, "bytes": state.bytes, "transformers_bytes": hf.bytes,
            "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                         "transformers_shape": list(h.shape), "transformers_dtype": h.dtype}
                        for t, h in zip(state.tensors, hf.tensors)]}


def _quant_json(est) -> dict:
    q = est.cfg.quant
    if q is None:
        return {"method": None, "label": "bf16"}
    return {"method": q.method, "label": q.label, "weight": q.weight, "scale": q.scale,
            "group": q.group, "block": list(q.block) if q.block else None,
            "activations": q.activations, "ignore": list(q.ignore), "source": q.source,
            "mxfp4_backend": est.mxfp4_backend if q.method == "mxfp4" else None}


def serve_json(model, system, est) -> dict:
    """One JSON object; bytes per GPU, seconds, the engine's settings and every stage."""
    c, p, e = est.cfg, est.pool, est.engine
    # the headline pool figures are the engine's own: SGLang's token pool, not the vLLM
    # pool the estimate also holds (the fewest tokens of any stage)
    tokens, concurrency = (min(x.max_total_num_tokens for x in est.sglang),
                           min(x.max_concurrency for x in est.sglang)) if est.sglang \
        else (p.kv_tokens, p.max_concurrency)
    return {
        "model": model.name, "gpu": system.gpu.name, "vllm_commit": VLLM_COMMIT,
        "tp": c.tp, "pp": c.pp, "dp": c.dp, "ep": c.ep, "world": c.world,
        "context": c.context, "batch": c.batch, "kv_dtype": c.kv_dtype,
        "weight_bytes_per_gpu": est.weight_bytes_per_gpu,
        "weights_format": _quant_json(est),
        "kv_bytes_per_token": est.kv_bytes_per_token,
        "kv_bytes_per_sequence": est.kv_bytes_per_sequence,
        "kv_bytes_per_sequence_paged": p.request_bytes,
        "max_sequences": est.max_sequences if est.starts else 0,
        "max_concurrency": concurrency, "gpu_kv_cache_tokens": tokens,
        "starts": est.starts, "engine_name": c.engine,
        "cudagraph_margin": _margin_json(est.graph_margin),
        "sglang": [{"mem_fraction_static": x.mem_fraction_static, "reserved_mb": x.reserved_mb,
                    "chunked_prefill_size": x.chunked_prefill_size,
                    "cuda_graph_max_bs": x.cuda_graph_max_bs, "cell_bytes": x.cell_bytes,
                    "pool_bytes": x.pool_bytes, "max_total_num_tokens": x.max_total_num_tokens,
                    "max_running_requests": x.max_running_requests,
                    "gpu_mem_mb": x.gpu_mem_mb, "total_bytes": x.total_bytes}
                   for x in est.sglang] if est.sglang else None,
        "prefill_s": est.prefill_s, "prefill_chunk_tokens": est.prefill_chunk_tokens,
        "prefill_chunk_from": _chunk_source(est),
        "decode_s_per_token": est.decode_s_per_token,
        "decode_tokens_per_s": est.decode_tokens_per_s,
        "engine": {"block_size": e.block_size, "max_num_batched_tokens":
                   e.max_num_batched_tokens, "max_num_seqs": e.max_num_seqs,
                   "hybrid_kv_cache_manager": e.hybrid_manager,
                   "state_page_bytes": e.state_page_bytes,
                   "mamba_cache_dtype": c.mamba_cache_dtype,
                   "mamba_ssm_cache_dtype": c.mamba_ssm_cache_dtype,
                   "gpu_memory_utilization": c.gpu_memory_utilization},
        "pool": {"page_bytes": p.page_bytes, "groups": p.groups, "group_size": p.group_size,
                 "num_blocks": p.num_blocks, "blocks_per_request": p.blocks_per_request},
        "layers": [{"kind": k, "layers": n, "bytes_per_token": cache.bytes_per_token,
                    "window": cache.window, "kept_tokens": cache.kept_tokens(c.context),
                    "state_bytes": cache.state_bytes, "state": _state(cache.state)}
                   for k, cache, n in _kinds(est)],
        "stages": [{"rank": s.rank, "layers": len(s.layers), "weight_bytes": s.weight_bytes,
                    "kv_bytes_per_token": s.kv_bytes_per_token,
                    "kv_bytes_per_sequence": s.kv_bytes_per_sequence,
                    "memory": {"hbm_bytes": s.budget.hbm_bytes,
                               "requested_bytes": s.budget.requested_bytes,
                               "weights_bytes": s.budget.weights_bytes,
                               "profile_activation_bytes": s.budget.activation_bytes,
                               "non_torch_bytes": s.budget.non_torch_bytes,
                               "cudagraph_bytes": s.budget.cudagraph_bytes,
                               "cudagraphs": _graphs_json(s.budget.graphs),
                               "kv_cache_bytes": s.budget.available_bytes},
                    "decode_s": s.decode_s, "comms": _rows(s.comms)} for s in est.stages],
    }
