"""vLLM's CUDA-graph memory estimate: what start-up subtracts from the KV cache's budget.

Read in vLLM's released sources that bracket the pinned commit, 0.21.0 and 0.22.0 (the same
in every line cited but for the BreakableCUDAGraphWrapper instances 0.22.0 also reroutes;
file:line at 0.22.0). The estimate is taken before the cache is sized, and subtracted:
``Worker.determine_available_memory`` runs the profile run, reads the torch peak, then - on
CUDA, unless ``cudagraph_mode`` is NONE (``--enforce-eager``) - calls
``GPUModelRunner.profile_cudagraph_memory`` inside the same ``memory_profiling`` span
(vllm/v1/worker/gpu_worker.py:392-411), and gives the cache ``requested - (weights + torch
peak + non-torch increase) - estimate`` (:447-451); ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``
(default 1, vllm/envs.py:1954-1955; PR #38284 made it the default in v0.21.0) only chooses
whether the estimate is subtracted (:425-429). The graphs themselves are captured after the
cache is allocated (``compile_or_warm_up_model`` -> ``capture_model``, gpu_worker.py:610),
and vLLM logs what they took beside the estimate ("CUDA graph pool memory: A GiB (actual),
E GiB (estimated)", :613-628).

The estimate is measured, not computed (``profile_cudagraph_memory``,
vllm/v1/worker/gpu_model_runner.py:6265-6371): with a minimal cache of
``max_cudagraph_capture_size`` blocks (:6187), vLLM empties torch's cache (:6303), then for
each mode (PIECEWISE, then FULL: ``CudagraphDispatcher.get_capture_descs``,
vllm/v1/cudagraph_dispatcher.py:330-354) warms up and captures that mode's two largest
batch sizes (:6306) into a temporary graph pool, reading ``cudaMemGetInfo`` around each
(:6310-6325). The first sample is whatever that capture made the process hold - the eager
warm-up's new allocator segments, the graph pool, kernels and workspaces loaded for the
first time - and the second (at least 1 MiB, "for driver overhead", :6329) stands for every
further graph of the mode:

    estimate = max over modes of first sample + sum over modes of (graphs - 1) x second

(:6362-6364; logged "Estimated CUDA graph memory: X GiB total"). Neither sample has a
closed form in the code's terms: what a first capture holds depends on the GPU, the kernels
chosen and what earlier steps already loaded. Logs show it: the same Qwen3-8B and the same
51 + 35 graphs logged 0.52 GiB on a 24 GB GPU and 2.35 GiB on an A100; a single-token
capture of one model 0.36 and 0.43 GiB on two GPUs; 18 graphs of Qwen3-0.6B 0.08 GiB. So
the two samples are two constants, ``FIRST_CAPTURE_BYTES`` and ``PER_GRAPH_BYTES``, fitted
by ``fit`` (least squares) on the declared calibration rows of
tests/fixtures/serve/cudagraph_logs.json, and ``SPREAD`` is how far the logged estimates
fell from the fit with each row left out of its own fit (``spread``): the ratio of logged to
predicted, lowest and highest. benchmarks/fit_cudagraph.py prints all three and every row.
The graphs counted are vLLM's own, from its defaults:

- capture sizes ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` up to
  ``max_cudagraph_capture_size = min(max_num_seqs x 2, 512)``, then at most
  ``max_num_batched_tokens``, which is itself captured where the grid misses it
  (VllmConfig._set_cudagraph_sizes, vllm/config/vllm.py:1646-1707); gpt-oss raises the cap
  to 1024 unless the user set the sizes (GptOssForCausalLMConfig.verify_and_update_config,
  vllm/model_executor/models/config.py:158-171: "This will increase the number of CUDA
  graphs from 67 to 83");
- ``cudagraph_mode`` FULL_AND_PIECEWISE (the O2 default): one PIECEWISE graph per capture
  size, one FULL graph per size a uniform decode batch reaches, the sizes up to
  ``max_num_seqs`` (vllm/v1/cudagraph_dispatcher.py; 51 and 35 at max_num_seqs 256 in the
  logs).

vLLM 0.26 changed what the estimate charges (issue #50780); the rule here is the two-sample
one of the pinned commit.
"""
from __future__ import annotations

from dataclasses import dataclass

MiB = 2**20
# Fitted by ``fit`` and ``spread`` on the calibration rows of
# tests/fixtures/serve/cudagraph_logs.json (benchmarks/fit_cudagraph.py;
# tests/test_serve_graphs.py checks these are its output).
FIRST_CAPTURE_BYTES = 394_493_865  # 0.367 GiB: the first capture
PER_GRAPH_BYTES = 7_546_513  # 7.20 MiB: each further graph of a mode
SPREAD = (0.1528, 3.0261)  # logged / left-out prediction, lowest and highest
MIN_PER_GRAPH_BYTES = MiB  # vLLM's floor: "at least 1 MiB per graph for driver overhead"
DEFAULT_MAX_CAPTURE = 512  # the cap of min(max_num_seqs x 2, 512)
MAX_CAPTURE_BY_FAMILY = {"gpt_oss": 1024}  # verify_and_update_config's override


def capture_sizes(max_size: int) -> list[int]:
    """vLLM's default CUDA-graph batch sizes up to ``max_size``: 1, 2, 4, every 8 to 248,
    every 16 from 256."""
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in sizes if s <= max_size]


def max_capture_size(model, max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """The largest captured batch: min(max_num_seqs x 2, 512), or the model's override,
    at most max_num_batched_tokens."""
    cap = MAX_CAPTURE_BY_FAMILY.get(getattr(model, "family", None))
    if cap is None:
        cap = min(max_num_seqs * 2, DEFAULT_MAX_CAPTURE)
    return min(cap, max_num_batched_tokens)


def estimate_bytes(piecewise: int, full: int, first: float = FIRST_CAPTURE_BYTES,
                   each: float = PER_GRAPH_BYTES) -> float:
    """vLLM's estimate for ``piecewise`` and ``full`` graphs: one shared first capture and
    ``each`` for every further graph of a mode (at least 1 MiB); 0 with no graphs."""
    modes = [n for n in (piecewise, full) if n > 0]
    if not modes:
        return 0.0
    return first + sum(n - 1 for n in modes) * max(each, MIN_PER_GRAPH_BYTES)


@dataclass(frozen=True)
class Graphs:
    """The CUDA graphs vLLM captures on one GPU, and the memory its estimate subtracts."""

    piecewise: int  # mixed prefill-decode batches, one graph per capture size
    full: int  # uniform decode batches
    largest: int  # the largest captured batch, tokens

    @property
    def estimate_bytes(self) -> float:
        return estimate_bytes(self.piecewise, self.full)


def graphs(model, max_num_seqs: int, max_num_batched_tokens: int) -> Graphs:
    """The graphs of vLLM's defaults (FULL_AND_PIECEWISE) for this engine; a
    ``max_num_batched_tokens`` below the cap is captured too, on the grid or not."""
    largest = max_capture_size(model, max_num_seqs, max_num_batched_tokens)
    sizes = capture_sizes(largest)
    if max_num_batched_tokens <= largest and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    return Graphs(len(sizes), sum(1 for s in sizes if s <= max_num_seqs), sizes[-1])


def fit(rows) -> tuple[float, float]:
    """(first capture, per graph) bytes by least squares over ``rows`` of
    (PIECEWISE graphs, FULL graphs, logged estimate in GiB): the estimate is
    first + k x each, k the graphs beyond each mode's first."""
    xs = [sum(n - 1 for n in (p, f) if n > 0) for p, f, _ in rows]
    ys = [gib * 2**30 for _, _, gib in rows]
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    each = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - each * mx, each


def spread(rows) -> tuple[float, float]:
    """(lowest, highest) ratio of a row's logged estimate to the prediction of the fit of
    the other ``rows``: how far below and above the model vLLM's measurement has fallen."""
    ratios = []
    for i, (p, f, gib) in enumerate(rows):
        others = rows[:i] + rows[i + 1:]
        ratios.append(gib * 2**30 / estimate_bytes(p, f, *fit(others)))
    return min(ratios), max(ratios)

