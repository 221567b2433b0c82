"""The environment a launch hands its training process, read as the libraries that read it.

A launch script's ``export VAR=value`` lines and ``VAR=value torchrun ...`` prefixes reach
the trainer's process (``ledger.io.shell.run.launches``); PyTorch, NCCL and
TransformerEngine read some of them. Each variable is then one of:

- modelled (``read_env`` applies it as a CLI destination): the caching allocator's
  expandable segments, NCCL's NVLS switch, PyTorch's cuBLAS workspace size;
- changing nothing the ledger prices (``SILENT``, and any name no library here reads: the
  script's own variables - paths, ports, tokens);
- read by a library, changing a priced number the ledger does not model (``UNPRICED``,
  and any other name in a library's namespace, ``LIBRARY_PREFIXES``): named, all in one
  line with the launch's other unmodelled settings, and the figures marked approximate.

TransformerEngine's attention switches are Megatron's to check against its
--attention-backend (``attention_refusals``).
"""
from __future__ import annotations

import argparse
import re

from ledger.errors import clip

# PyTorch's allocator settings: PYTORCH_ALLOC_CONF, else the deprecated
# PYTORCH_CUDA_ALLOC_CONF (c10/core/AllocatorConfig.cpp L14-34 @pytorch 0ac71663:
# AcceleratorAllocatorConfig::instance parses the first one set). parseArgs (same file)
# reads "key:value" pairs split at commas; an option it does not know is skipped
ALLOC_CONF = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
# expandable_segments (parseExpandableSegments, AllocatorConfig.cpp L177-184 @0ac71663) is
# read by ConfigTokenizer::toBool (c10/core/AllocatorConfig.h L80-95 in torch 2.13.0, git
# cf30153c): "True" or "False", any other value a TORCH_CHECK_VALUE failure - the run stops
# (alloc_refusals)
TOGGLES = ("True", "False")
# its other options change nothing priced: pinned host memory's registration and threads,
# the allocator lock held around cudaMalloc (parseArgs' pinned_* and release_lock_on_*)
# options that change the reserved bytes the ledger prices with PyTorch's defaults
# (ledger.placement.allocator): split and rounding sizes, an early release of cached
# blocks, another allocator altogether
ALLOC_UNPRICED = {"max_split_size_mb": "blocks above it are never split",
                  "max_non_split_rounding_mb": "large blocks' rounding",
                  "roundup_power2_divisions": "allocation sizes' rounding",
                  "garbage_collection_threshold": "cached blocks released early",
                  "backend": "cudaMallocAsync: the driver's pool, not the caching allocator"}

# NCCL_NVLS_ENABLE (src/transport/nvls.cc L159 @NVIDIA/nccl 5067397c: NCCL_PARAM(NvlsEnable,
# "NVLS_ENABLE", 2), 2 NCCL's own choice): 0 -> ParallelConfig.nccl_nvls False (no NVLS
# buffers, ledger.placement.nccl_buffers), any other integer -> NVLS where the switches
# multicast
NVLS = "NCCL_NVLS_ENABLE"

# CUBLAS_WORKSPACE_CONFIG: PyTorch's own cuBLAS workspace, one per handle and stream
# (ledger.placement.buffers), its ":SIZE:COUNT" pairs summed as SIZE KiB x COUNT
# (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize @pytorch 26a39059: no
# pair parsed, a warning and the default) -> ParallelConfig.cublas_workspace_bytes
CUBLAS_CONFIG = "CUBLAS_WORKSPACE_CONFIG"


# PyTorch reads each number with std::stoull (parseChosenWorkspaceSize @26a39059): one
# above 2^64 - 1 throws std::out_of_range and the run stops; a total beyond any GPU's memory
# (1 TiB here) fails the first torch GEMM's allocation - both refused, on the CLI and in a
# launch's environment alike
CUBLAS_MAX_NUMBER = 2**64 - 1
CUBLAS_MAX_BYTES = 2**40
CUBLAS_EXPECTS = (":SIZE:COUNT pairs (SIZE KiB x COUNT, e.g. :4096:8), each number below "
                  "2^64, at most 1 TiB in all")


def cublas_config_bytes(text: str) -> int | None:
    """The bytes ``CUBLAS_WORKSPACE_CONFIG=text`` sets (None: no pair, PyTorch's default);
    a ValueError naming what is wrong for a number PyTorch refuses or a total no GPU holds."""
    pairs = re.findall(r":([0-9]+):([0-9]+)", text)
    if not pairs:
        return None
    digits = [n.lstrip("0") or "0" for pair in pairs for n in pair]
    if any(len(n) > 20 or int(n) > CUBLAS_MAX_NUMBER for n in digits):
        raise ValueError("a number above 2^64 - 1, which PyTorch's parse refuses")
    total = sum(int(size) * 1024 * int(count) for size, count in pairs)
    if total > CUBLAS_MAX_BYTES:
        raise ValueError(f"{total / 2**40:,.0f} TiB in all, beyond any GPU's memory")
    return total


def cublas_bytes(text: str) -> int:
    """--cublas-workspace-config: ``cublas_config_bytes``, or argparse's one-line refusal
    showing the expected form."""
    try:
        size = cublas_config_bytes(text)
    except ValueError as e:
        size, why = None, f" ({e})"
    else:
        why = ""
    if size is None:
        raise argparse.ArgumentTypeError(f"must be {CUBLAS_EXPECTS}, got "
                                         f"{clip(repr(text), 60)}{why}")
    return size


def cublas_refusals(env: dict[str, str]) -> list[str]:
    """A CUBLAS_WORKSPACE_CONFIG PyTorch refuses, or no GPU holds (``cublas_config_bytes``)."""
    if CUBLAS_CONFIG not in env:
        return []
    try:
        cublas_config_bytes(env[CUBLAS_CONFIG])
    except ValueError as e:
        return [f"{CUBLAS_CONFIG}={clip(env[CUBLAS_CONFIG], 60)}: {e} (expected "
                f"{CUBLAS_EXPECTS})"]
    return []


# read by a library, changing nothing priced: name -> why
SILENT = {
    # ProcessGroupNCCL's constructor (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp,
    # recent PyTorch as indexed; the pinned 2.13.0 is a CPU build here and ships no NCCL)
    # warns "TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment
    # variable is thus deprecated"; older releases read it as a switch, default off
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "PyTorch's default now",
    "NCCL_AVOID_RECORD_STREAMS": "the old name of TORCH_NCCL_AVOID_RECORD_STREAMS",
    "NCCL_IB_SL": "the InfiniBand service level (net_ib/connect.cc L19 @nccl 5067397c)",
    "NCCL_IB_TIMEOUT": "the InfiniBand retry timeout (net_ib/connect.cc L15)",
    "NCCL_SOCKET_IFNAME": "the bootstrap interface (misc/socket.cc L196)",
    "NCCL_IB_HCA": "which HCAs NCCL uses (net_ib/init.cc L317); the system file gives "
                   "the bandwidth",
    "NCCL_DEBUG": "logging", "NCCL_DEBUG_SUBSYS": "logging", "NCCL_DEBUG_FILE": "logging",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "error handling", "NCCL_ASYNC_ERROR_HANDLING":
        "error handling", "TORCH_DISTRIBUTED_DEBUG": "logging", "TORCH_CPP_LOG_LEVEL":
        "logging", "TORCH_NCCL_TRACE_BUFFER_SIZE": "the flight recorder's log",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "error handling", "TORCH_NCCL_BLOCKING_WAIT":
        "error handling", "NVTE_DEBUG": "logging", "NVTE_DEBUG_LEVEL": "logging",
    "CUDA_VISIBLE_DEVICES": "the launcher's --nproc_per_node sets the world",
    "TORCH_HOME": "a cache path", "TORCH_EXTENSIONS_DIR": "a cache path",
    "TORCHINDUCTOR_CACHE_DIR": "a cache path", "CUDA_CACHE_PATH": "a cache path",
    # LayerNorm kernels' SMs left to communication: kernel time the ledger's GEMM model
    # does not split (as Megatron's fusion flags, ledger.io.megatron.reader.NO_EFFECT)
    "NVTE_FWD_LAYERNORM_SM_MARGIN": "LayerNorm kernel time, not split",
    "NVTE_BWD_LAYERNORM_SM_MARGIN": "LayerNorm kernel time, not split",
    # which FlashAttention generation TE loads: the same fused kernel's memory
    "NVTE_FLASH_ATTN_V2": "a FlashAttention generation", "NVTE_FLASH_ATTN_V3":
        "a FlashAttention generation", "NVTE_FLASH_ATTN_V4": "a FlashAttention generation",
}
# CUDA's hardware work queues: Megatron relies on 1 so that a TP collective is issued
# before the GEMM it overlaps (tensor_parallel/layers.py L678-L710 @d98e8a64), the order the
# ledger prices, and asks for 1 under TP or CP > 1 alone (training/arguments.py L1451-1479);
# with TP = CP = 1 no overlap relies on it. 1 is silent, another value named under TP or
# CP > 1, silent otherwise
MAX_CONNECTIONS = "CUDA_DEVICE_MAX_CONNECTIONS"
# read by a library, changing a priced number the ledger does not model: name -> why
UNPRICED = {
    "NCCL_ALGO": "NCCL's algorithm choice (graph/tuning.cc L458): collectives priced at "
                 "NCCL's own",
    "NCCL_PROTO": "NCCL's protocol choice (graph/tuning.cc L453): priced at NCCL's own",
    "NCCL_MIN_NCHANNELS": "channels (graph/connect.cc L331): priced at NCCL's own",
    "NCCL_MAX_NCHANNELS": "channels (graph/connect.cc L332): priced at NCCL's own",
    "NCCL_MIN_CTAS": "CTAs (init.cc L1726): priced at NCCL's own",
    "NCCL_MAX_CTAS": "CTAs (init.cc L1725): priced at NCCL's own",
    "NCCL_NCHANNELS_PER_NET_PEER": "channels per network peer (init.cc L1729)",
    "NCCL_BUFFSIZE": "NCCL's per-channel buffers (init.cc L814): priced at the default",
    "NCCL_P2P_NET_CHUNKSIZE": "the pipeline's inter-node sends' chunk (init.cc L818, "
                              "default 128 KiB): priced at the link's rate",
    "NCCL_P2P_DISABLE": "NVLink P2P off (graph/paths.cc L289): priced over NVLink",
    "NCCL_P2P_LEVEL": "where NCCL uses P2P (graph/paths.cc L289)",
    "NCCL_SHM_DISABLE": "shared-memory transport off (transport/shm.cc L55)",
    "NCCL_IB_DISABLE": "InfiniBand off (net_ib/init.cc L27): priced over InfiniBand",
    "NCCL_CROSS_NIC": "rings across NICs (graph/search.cc L16)",
    "NCCL_COLLNET_ENABLE": "SHARP in-network reductions (init.cc L63)",
    "NCCL_CUMEM_ENABLE": "NCCL's buffers through cuMem (misc/cudawrap.cc L16)",
    "NCCL_IB_QPS_PER_CONNECTION": "queue pairs per connection (net_ib/connect.cc L60)",
    "NCCL_NVLS_CHUNKSIZE": "the NVLS buffers' chunk (transport/nvls.cc L160): priced at "
                           "the default 128 KiB",
    "CUDA_LAUNCH_BLOCKING": "every kernel launch synchronous: the host's launches not "
                            "overlapped",
}
# namespaces of the libraries that read the environment: a name here that neither table
# holds is named (its effect is not known to be nil); any other name is the script's own
LIBRARY_PREFIXES = ("NCCL_", "TORCH_NCCL_", "NVTE_", "PYTORCH_", "TORCH_", "CUDA_",
                    "NVSHMEM_", "UB_")
# TransformerEngine's attention switches (attention/dot_product_attention/utils.py L538-544
# @TE d0067d0d, each 1 unless set); Megatron sets them from --attention-backend and
# asserts a value already set agrees (language_module.py L108-148 @d98e8a64)
TE_ATTENTION = ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN")
ATTENTION_EXPECTS = {"auto": (1, 1, 1), "flash": (1, 0, 0), "fused": (0, 1, 0),
                     "unfused": (0, 0, 1), "local": (0, 0, 0)}


def read_env(env: dict[str, str], *, tp: int, cp: int
             ) -> tuple[dict, list[str], list[str], list[str]]:
    """(flags, applied, unpriced, silent) of a launch's environment, under its tensor and
    context parallel sizes."""
    flags, applied, unpriced, silent = {}, [], [], []
    conf = _alloc_setting(env)
    for name in sorted(env):
        shown = f"{name}={env[name]}"
        if name in ALLOC_CONF:
            if name != conf:
                silent.append(f"{shown} ({conf} is read first)")
                continue
            on, named = _alloc_conf(env[name])
            if on is not None:
                flags["expandable_segments"] = on
            if named:
                unpriced.append(f"{shown} ({'; '.join(named)})")
            (applied if on else silent).append(shown)
        elif name == NVLS:
            value = env[name].strip()
            if value.lstrip("-").isdigit():
                if int(value) != 2:
                    flags["nccl_nvls"] = int(value) != 0
                (applied if int(value) != 2 else silent).append(shown)
            else:
                unpriced.append(f"{shown} (not an integer: NCCL's own choice priced)")
        elif name == CUBLAS_CONFIG:
            size = None if cublas_refusals(env) else cublas_config_bytes(env[name])
            if size is not None:
                flags["cublas_workspace_bytes"] = size
            (applied if size is not None else silent).append(shown)
        elif name == MAX_CONNECTIONS:
            if env[name].strip() == "1" or max(tp, cp) == 1:
                silent.append(shown)
            else:
                unpriced.append(f"{shown} (Megatron's TP and CP overlaps rely on 1: "
                                f"priced as 1)")
        elif name in TE_ATTENTION or name in SILENT:
            silent.append(shown)
        elif name in UNPRICED:
            unpriced.append(f"{shown} ({UNPRICED[name]})")
        elif name.startswith(LIBRARY_PREFIXES):
            unpriced.append(f"{shown} (read by the libraries, not modelled)")
        else:
            silent.append(shown)
    return flags, applied, unpriced, silent


def _alloc_setting(env: dict[str, str]) -> str | None:
    """The allocator variable PyTorch reads (``ALLOC_CONF``, the first one set), or None."""
    return next((n for n in ALLOC_CONF if n in env), None)


def _alloc_items(text: str) -> list[tuple[str, str]]:
    """The ``key:value`` pairs of an allocator setting, blanks dropped as PyTorch's
    tokenizer drops them."""
    return [tuple("".join(s.split()) for s in item.partition(":")[::2])
            for item in text.split(",") if item.strip()]


def _alloc_conf(text: str) -> tuple[bool | None, list[str]]:
    """(expandable segments, None where unset; the options named) of an allocator setting
    ``key:value,key:value``; the other options change nothing priced or are skipped by
    parseArgs."""
    on, named = None, []
    for key, value in _alloc_items(text):
        item = f"{key}:{value}"
        if key == "expandable_segments":
            on = value == "True"
        elif key in ALLOC_UNPRICED:
            named.append(f"{item}: {ALLOC_UNPRICED[key]}")
    return on, named


def alloc_refusals(env: dict[str, str]) -> list[str]:
    """PyTorch stops the run on an expandable_segments value other than True or False in
    the allocator setting it reads (ConfigTokenizer::toBool, ``TOGGLES``)."""
    conf = _alloc_setting(env)
    if conf is None:
        return []
    return [f"{conf}={env[conf]}: expandable_segments:{value} - PyTorch takes only True or "
            f"False there and stops the run (its allocator's ConfigTokenizer::toBool)"
            for key, value in _alloc_items(env[conf])
            if key == "expandable_segments" and value not in TOGGLES]


def attention_refusals(env: dict[str, str], backend: str) -> list[str]:
    """Megatron's assertion: a TE attention switch set must be what --attention-backend
    sets it to."""
    expects = ATTENTION_EXPECTS.get(backend)
    if expects is None:
        return []
    return [f"{name}={env[name]} but --attention-backend {backend} sets it to {want} "
            f"(Megatron asserts it: unset it, or choose the backend with --attention-backend)"
            for name, want in zip(TE_ATTENTION, expects)
            if name in env and env[name] != str(want)]
