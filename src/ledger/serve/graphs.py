"""vLLM's CUDA-graph memory estimate: what start-up subtracts from the KV cache's budget.

Since v0.21.0 (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` on by default, PR #38284, commit
96a85c5750) ``Worker.determine_available_memory`` calls
``GPUModelRunner.profile_cudagraph_memory`` after the profile run, unless
``--enforce-eager``, and subtracts what it returns (vllm/v1/worker/gpu_worker.py, the
``cudagraph_memory_estimate`` term). The estimate is measured, not computed: vLLM captures,
mode by mode (PIECEWISE, FULL), the first two of that mode's batch sizes, largest first,
into a temporary graph pool and reads ``cudaMemGetInfo`` around each capture; the first
capture's bytes are the shared pool, the second's the cost of each further graph (at least
1 MiB), and

    estimate = max over modes of first capture + sum over modes of (graphs - 1) x per graph

(``profile_cudagraph_memory``, vllm/v1/worker/gpu_model_runner.py, quoted at its line 6461 by
issue #45178 and PR #45197; vLLM 0.18-0.25 log it as "Profiling CUDA graph memory:
PIECEWISE=51 (largest=512), FULL=35 (largest=256)", "Estimated CUDA graph memory: 0.55 GiB
total"). vLLM 0.26 changed what the estimate charges (issue #50780); the rule here is the
two-sample one of the pinned commit.

What one capture holds is not derivable from the model's shape here: the first capture of
a single-token batch already costs 0.36-0.43 GiB in the logs (kernel workspaces and the
pool's first segments, not the batch's activations), and the estimate barely moves with
the model (0.33-1.65 GiB for 0.6B to 35B models with the default 86 or 102 graphs, 0.78
and 1.58 for one model on one GPU under two vLLM releases). So the two
measured terms are two constants, ``FIRST_CAPTURE_BYTES`` and ``PER_GRAPH_BYTES``, fitted by
``fit`` (least squares) on the declared calibration rows of
tests/fixtures/serve/cudagraph_logs.json (benchmarks/fit_cudagraph.py prints the fit and every
row's error); the graphs counted are vLLM's own, from its defaults:

- capture sizes ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` up to
  ``max_cudagraph_capture_size = min(max_num_seqs x 2, 512)``, then at most
  ``max_num_batched_tokens`` (VllmConfig._set_cudagraph_sizes, vllm/config/vllm.py); gpt-oss
  raises the cap to 1024 (GptOssForCausalLMConfig.verify_and_update_config,
  vllm/model_executor/models/config.py: "Overriding max cuda graph capture size to 1024");
- ``cudagraph_mode`` FULL_AND_PIECEWISE (the O2 default): one PIECEWISE graph per capture
  size, one FULL graph per size a uniform decode batch reaches, the sizes up to
  ``max_num_seqs`` (vllm/v1/cudagraph_dispatcher.py; 51 and 35 at max_num_seqs 256 in the
  logs above).
"""
from __future__ import annotations

from dataclasses import dataclass

MiB = 2**20
# Fitted by ``fit`` on the calibration rows of tests/fixtures/serve/cudagraph_logs.json
# (benchmarks/fit_cudagraph.py; tests/test_serve_graphs.py checks these are its output).
FIRST_CAPTURE_BYTES = 704_621_179  # 0.656 GiB: the first capture, the pool's first bytes
PER_GRAPH_BYTES = 2_119_202  # 2.02 MiB: each further graph of a mode
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
    """The graphs of vLLM's defaults (FULL_AND_PIECEWISE) for this engine."""
    sizes = capture_sizes(max_capture_size(model, max_num_seqs, max_num_batched_tokens))
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
