"""``--from-megatron FILE``: a Megatron-LM ``pretrain_gpt.py`` launch, read as Megatron
reads it.

FILE is a launch script (read by ``ledger.io.shell`` as bash would run it, for the
``pretrain_gpt.py`` command it runs and the ``torchrun`` world around it), or a file of
bare flags. It may be given as a command line, ``"TP=8 EP=64 train.sh org/model"``:
variables set before the script and its arguments. The flags are parsed by the table of
Megatron's own arguments (``ledger.io.megatron.args``), so switches are switches and an
absent flag has Megatron's default. Every given flag is then one of:

- modelled (``MODELLED``): applied, under the ledger's names (``ledger.io.megatron.model``;
  --save-interval and --async-save are a whole run's checkpoint settings, ``ledger.run``);
- changing nothing the ledger prices (``NO_EFFECT`` and the argument groups in
  ``NO_EFFECT_GROUPS``: logging, checkpoints, data, learning rate, ...): accepted silently
  and listed with ``--verbose``; so is any flag given at Megatron's default value;
- anything else changes a priced number the ledger does not model: it is named, all such
  flags in one line, and the figures are marked approximate.

A launch Megatron refuses is refused with every reason at once (``ledger.io.megatron.model.refusals``).

The environment the script hands pretrain_gpt.py (its exports, the variables set before
its launcher or before the script) is read by ``ledger.io.environment``, its settings
joining the flags' three lists.
"""
from __future__ import annotations

import os
import shlex

from ledger.config import OFFLOAD_MODULES
from ledger.errors import LedgerError
from ledger.frameworks.dsa_loss import model_problem, of_megatron
from ledger.frameworks.megatron_tokenizers import PRETRAIN_GPT_DEFAULTS
from ledger.io.environment import (alloc_refusals, attention_refusals, cublas_refusals,
                                   read_env)
from ledger.io.megatron import flags as launch_flags
from ledger.io.megatron import model as mm
from ledger.io.files import read_text
from ledger.io.launch import Launch
from ledger.io.megatron.args import namespace, parse, table
from ledger.io.shell.run import launches

# Megatron's argument groups whose flags change nothing the ledger prices
NO_EFFECT_GROUPS = {f"_add_{g}_args" for g in (
    "checkpointing", "logging", "learning_rate", "validation", "inference", "rl", "one_logger",
    "inprocess_restart", "rerun_machine", "straggler_detector", "ft_package", "autoresume",
    "msc", "fault_injector", "initialization", "workload_inspector_server", "data",
    "tokenizer", "vision", "biencoder", "sft")} | {"add_modelopt_args"}
# flags of the other groups that change nothing priced: optimiser hyper-parameters, fusions
# and kernels (time the ledger's GEMM model does not split), rotary and router numerics,
# run control
NO_EFFECT = {f"--{n}" for n in """
adam-beta1 adam-beta2 adam-eps apply-layernorm-1p
attention-softmax-in-fp32 calculate-per-token-loss clip-grad
disable-bf16-reduced-precision-matmul distributed-backend
distributed-timeout-minutes empty-unused-memory-level enable-experimental
exit-duration-in-mins exit-interval exit-signal-handler fp8-amax-compute-algo
fp8-amax-history-len fp8-margin fp8-interval fsdp-manual-registration glu-linear-offset
init-method-std init-model-with-meta-device manual-gc manual-gc-interval moe-aux-loss-coeff
moe-grouped-gemm moe-per-layer-logging moe-permute-fusion moe-router-bias-update-rate
moe-router-dtype moe-router-enable-expert-bias moe-router-force-load-balancing
moe-router-load-balancing-type moe-router-pre-softmax moe-router-score-function
moe-router-topk-scaling-factor moe-token-drop-policy
moe-z-loss-coeff moe-input-jitter-eps mscale mscale-all-dim mtp-loss-scaling-factor
no-bias-dropout-fusion no-bias-gelu-fusion no-bias-swiglu-fusion
no-check-for-nan-in-loss-and-grad no-masked-softmax-fusion
no-rope-freq no-rope-fusion norm-epsilon
profile profile-step-end profile-step-start profile-ranks
rope-scaling-factor rope-type rotary-base rotary-interleaved rotary-percent
rotary-scaling-factor rotary-seq-len-interpolation-factor seed train-iters train-samples
transformer-impl use-flash-attn use-mcore-models use-rope-scaling weight-decay
timing-log-level timing-log-option
no-fp8-wgrad sgd-momentum tp-comm-overlap-cfg
moe-enable-deepep
attention-dropout muon-momentum muon-nesterov muon-scale-mode
muon-extra-scale-factor muon-coefficient-type muon-fp32-matmul-prec muon-use-syrk muon-no-split-qkv
use-torch-optimizer-for-cpu-offload no-pin-cpu-grads no-pin-cpu-params
squared-relu megatron-fsdp-grad-comm-dtype
""".split()}  # attention-dropout: fused attention keeps no mask (ledger.io.megatron.flags._step);
# moe-enable-deepep: flex with the deepep backend, the flex default (transformer_config.py
# L1743-1752);
# use-torch-optimizer-for-cpu-offload: overridden for adam (optimizer/__init__.py L515-521),
# torch's SGD for sgd, priced alike; no-pin-cpu-grads / -params: the host copies' pinning;
# squared-relu: a non-gated MLP like the default gelu (argument_utils.py L320-322 @d98e8a64
# sets only the activation), the same two matrices, one elementwise pass and one fc1-wide
# tensor kept for backward (torch.pow(F.relu(x), 2), activations.py L9-11: relu's output, pow's input);
# with --swiglu it is refused (model.refusals); megatron-fsdp-grad-comm-dtype: the FSDP
# gradient reduce-scatter's wire dtype, at the main grads' dtype no extra buffer
# (distributed_data_parallel_config.py L201-212) - another dtype is named
# (ledger.io.megatron.flags._host).
# Named as not priced (neither here nor in MODELLED): --reuse-grad-buf-for-mxfp8-param-ag,
# the MXFP8 param all-gather written
# into the grad buffer instead of a persistent param buffer (param_and_grad_buffer.py
# L1240-1265), a buffer the ledger's mxfp8 param gather does not split
# of MODELLED, Megatron-FSDP's double buffers (ledger.io.megatron.flags.double_buffer):
# applied as fsdp_double_buffer under --use-megatron-fsdp at optim_grads_params (the ZeRO-3
# the ledger prices them at), named at a lower sharding (its gradient buckets' pool,
# unpriced), and silent without Megatron-FSDP (nothing else reads fsdp_double_buffer;
# --use-nccl-ub then registers the DDP's own buffers with NCCL, the same bytes:
# distributed_data_parallel.py L313-326 @d98e8a64)
DOUBLE_BUFFER = {"--fsdp-double-buffer", "--use-nccl-ub"}
# the flex dispatcher's SMs (ledger.io.megatron.flags.ep_sms): applied as ep_sms (the SMs
# an overlapped all-to-all takes from compute, ledger.step.ep_sms; DeepEP's buffers,
# ledger.placement.ep_buffers) where an MoE launch runs the flex dispatcher, silent
# elsewhere (no dispatcher reads them) and a deprecated knob beside the unified one
NUM_SMS = {"--" + dest.replace("_", "-") for dest in launch_flags.NUM_SMS}
# the routed experts' paged stash (ledger.io.megatron.flags._step, as Megatron-Bridge's rows
# read it: ledger.frameworks.paged_stash.of_megatron): applied where an MoE launch runs it;
# the rank capacity factor alone (static padded expert rows, no stash) is named, and the
# CUDA buffer factor without the stash is silent (no buffer)
PAGED_STASH = {"--moe-paged-stash", "--moe-paged-stash-buffer-size-factor-cuda",
               "--moe-expert-rank-capacity-factor"}
# the indexer loss (ledger.frameworks.dsa_loss.of_megatron): applied where the model has
# the CSA layers the ledger prices it on (``read_launch``; none at d98e8a64, which has no
# CSA variant); named where DSA layers run it (dsa.py L1890-1926 @d98e8a64, not modelled);
# silent where no layer reads it
INDEXER_LOSS = {"--dsa-indexer-loss-coeff", "--dsa-indexer-use-sparse-loss"}
# flags the reader applies (their values reach the model or the placement)
MODELLED = {f"--{n}" for n in """
activation-func-clamp-value num-layers hidden-size num-attention-heads ffn-hidden-size group-query-attention
num-query-groups kv-channels seq-length max-position-embeddings position-embedding-type
use-rotary-position-embeddings no-position-embedding swiglu quick-geglu
untie-embeddings-and-output-weights normalization disable-bias-linear add-qkv-bias
qk-layernorm vocab-size padded-vocab-size make-vocab-size-divisible-by no-pad-vocab-size
tokenizer-type tokenizer-model num-experts moe-router-topk moe-ffn-hidden-size
moe-shared-expert-intermediate-size moe-layer-freq mtp-num-layers moe-router-num-groups
moe-router-group-topk multi-latent-attention q-lora-rank kv-lora-rank qk-head-dim
qk-pos-emb-head-dim v-head-dim softmax-type window-size window-attn-skip-freq
tensor-model-parallel-size pipeline-model-parallel-size context-parallel-size
expert-model-parallel-size expert-tensor-parallel-size moe-token-dispatcher-type
num-layers-per-virtual-pipeline-stage num-virtual-stages-per-pipeline-rank
account-for-embedding-in-pipeline-split account-for-loss-in-pipeline-split
sequence-parallel use-distributed-optimizer use-megatron-fsdp
data-parallel-sharding-strategy micro-batch-size global-batch-size recompute-activations
recompute-granularity recompute-method recompute-num-layers recompute-modules cp-comm-type
tp-comm-overlap bf16 fp16 grad-reduce-in-bf16 accumulate-allreduce-grads-in-fp32
megatron-fsdp-main-grads-dtype fp8-format fp8-recipe
fp8-param-gather optimizer hidden-dropout fp4-format fp4-recipe fp4-param-gather
first-last-layers-bf16 num-layers-at-start-in-bf16 num-layers-at-end-in-bf16
no-gradient-accumulation-fusion
enable-mhc-connections mhc-num-residual-streams
muon-num-ns-steps muon-tp-mode muon-scalar-optimizer
use-precision-aware-optimizer main-grads-dtype main-params-dtype exp-avg-dtype exp-avg-sq-dtype
attention-backend
cpu-offloading-num-layers optimizer-cpu-offload optimizer-offload-fraction
overlap-cpu-optimizer-d2h-h2d fine-grained-activation-offloading offload-modules
activation-offload-fraction cross-entropy-loss-fusion cross-entropy-fusion-impl
save-interval persistent-save-interval async-save
overlap-grad-reduce overlap-param-gather overlap-moe-expert-parallel-comm
decoder-first-pipeline-num-layers decoder-last-pipeline-num-layers
pipeline-model-parallel-layout
cuda-graph-impl enable-cuda-graph cuda-graph-modules cuda-graph-scope
no-overlap-p2p-communication moe-flex-dispatcher-backend moe-permute-fusion-into-hybridep
moe-expert-capacity-factor moe-pad-expert-input-to-capacity
moe-latent-size mtp-use-repeated-layer moe-shared-expert-overlap delay-wgrad-compute
ddp-bucket-size fsdp-double-buffer use-nccl-ub
defer-embedding-wgrad-compute wgrad-deferral-limit
microbatch-group-size-per-virtual-pipeline-stage num-distributed-optimizer-instances
""".split()}
# what a modelled flag's value must be for the ledger to price it exactly: else named
_EXACT = {
    "--recompute-modules": (lambda v: not set(v) - set(mm.READ_MODULES),
                            "gdn_norm_out, gdp_in_proj, gdp_qkv and mhc act on Gated "
                            "DeltaNet, GatedDeltaProduct and HyperConnection layers the "
                            "reader does not build: priced as not recomputed"),
    "--offload-modules": (lambda v: not set(v) - set(OFFLOAD_MODULES),
                          "the others priced as kept on the GPU"),
    "--cp-comm-type": (lambda v: all(x in mm.CP_KINDS for x in v), "priced as ring"),
    "--position-embedding-type": (lambda v: v not in ("relative", "yarn"),
                                  "no relative-bias table; YaRN's eager RoPE (its factor is "
                                  "no flag: ledger.step.eager) not priced"),
    "--fp8-recipe": (lambda v: v in ("delayed", "tensorwise", "blockwise", "mxfp8"),
                     "priced as the delayed recipe"),
    "--fp4-recipe": (lambda v: v == "nvfp4", "priced as the nvfp4 recipe"),
    "--optimizer": (lambda v: v in ("adam", "sgd", "muon", "dist_muon"), "priced as adam"),
    "--muon-num-ns-steps": (lambda v: v == 5, "priced at 5 Newton-Schulz steps"),
    "--muon-tp-mode": (lambda v: v == "duplicated", "priced as duplicated"),
    "--muon-scalar-optimizer": (lambda v: v == "adam", "priced with adam"),
    # knowledge distillation: a teacher model built and loaded beside the student
    # (megatron/post_training/model_builder.py L474-500, checkpointing.py L211-223 @d98e8a64),
    # its weights and forward activations on the same GPUs
    "--export-kd-teacher-load": (lambda v: v is None,
                                 "a distillation teacher model on the GPUs: not priced"),
    # fp64: the router's GEMMs in torch.mm (moe/moe_utils.py L1395-1396, L1434-1436 @d98e8a64),
    # not TE's te_general_gemm (L1389, L1425), so PyTorch's cuBLAS workspaces on every MoE rank
    # (ledger.placement.buffers); its numerics change nothing else priced
    "--moe-router-dtype": (lambda v: v != "fp64",
                           "the router's GEMMs on PyTorch's cuBLAS workspaces: not priced"),
    # local: its DotProductAttention applied (flags._step); its own linear and norm layers
    # (LocalSpecProvider, megatron/core/models/backends.py L99-131 @d98e8a64) are not TE's.
    # inference_optimized: InferenceSpecProvider (backends.py L149-203): TE's fused attention
    # (TEDotProductAttention, so flash as priced) and the Inference* linear layers built on
    # TE's, written for inference - their training buffers are not modelled
    "--transformer-impl": (lambda v: v == "transformer_engine", {
        "local": "its attention keeps the scores and its layers no TE buffers, as priced; "
                 "its own linear and norm layers' saved tensors priced as Transformer "
                 "Engine's",
        "inference_optimized": "Megatron's inference layer spec: its attention is TE's fused "
                               "kernel, as priced; its inference linear layers priced as "
                               "Transformer Engine's"}),
}
TOKENIZER_FILES = "the vocabulary comes from the tokenizer's files"
DEFAULT_PRECISION = "bf16-fp32grad"  # the megatron convention's own dtypes (frameworks)


def split_command(given: str) -> tuple[str, list[str], dict[str, str]]:
    """``path``, or ``"VAR=v ... path arg ..."``: the script, its arguments, its variables."""
    if os.path.exists(given):
        return given, [], {}
    try:
        words = shlex.split(given)
    except ValueError as e:
        raise LedgerError("from_megatron", f"{given}: {e}") from None
    env = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    if not words:
        raise LedgerError("from_megatron", f"no launch file in {given!r}")
    return words[0], words[1:], env


def launch_words(given: str) -> tuple[str, list[str], int | None, dict[str, str]]:
    """The file, the words it hands pretrain_gpt.py, the world its launcher starts and the
    environment its process gets (``ledger.io.environment``)."""
    path, args, env = split_command(given)
    text = read_text(path, "from_megatron")
    found = launches(text, path, args, env)
    if found:
        words, environ = found[0]
        k = next(i for i, w in enumerate(words) if os.path.basename(w) == "pretrain_gpt.py")
        return path, words[k + 1:], _world(words[:k]), environ
    try:  # a file of bare flags, one or many per line
        words = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as e:
        raise LedgerError("from_megatron", f"{path}: {e}") from None
    if not words or not words[0].startswith("--"):
        raise LedgerError("from_megatron", f"{path} runs no pretrain_gpt.py and is not a "
                                           f"file of flags (a modelopt conf is sourced by "
                                           f"examples/post_training/modelopt/train.sh: give "
                                           f"--from-megatron 'train.sh org/model')")
    return path, words, None, env


def _world(launcher: list[str]) -> int | None:
    """torchrun's (or python -m torch.distributed.run's) --nproc_per_node x --nnodes, when
    both are plain numbers."""
    starts = [i for i, w in enumerate(launcher) if os.path.basename(w) == "torchrun"
              or w in ("torch.distributed.run", "torch.distributed.launch")]
    if not starts:
        return None
    opts, i = {}, starts[0] + 1
    while i < len(launcher):
        name, eq, value = launcher[i].partition("=")
        if not eq and i + 1 < len(launcher):
            value, i = launcher[i + 1], i + 1
        opts[name.lstrip("-").replace("-", "_")] = value
        i += 1
    nproc, nodes = opts.get("nproc_per_node", "1"), opts.get("nnodes", "1")
    return int(nproc) * int(nodes) if nproc.isdigit() and nodes.isdigit() else None


def classify(parsed, ns: dict, facts: dict | None = None
             ) -> tuple[list[str], list[str], list[str]]:
    """(applied, unpriced, silent): the given flags by what the ledger does with them;
    ``facts``: the CLI flags the launch sets (``placement_flags``'s, the indexer loss)."""
    flags, facts = table()["flags"], facts or {}
    applied, unpriced, silent = [], [], []
    for flag, words in parsed.given.items():
        spec, shown = flags[flag], " ".join((flag, *words))
        value = ns[spec["dest"]]
        if flag in _EXACT and not _EXACT[flag][0](value):
            why = _EXACT[flag][1]  # one reason, or one per value
            why = why.get(value, "not priced") if isinstance(why, dict) else why
            unpriced.append(f"{shown} ({why})")
        elif flag in DOUBLE_BUFFER:
            if not (ns["use_megatron_fsdp"] and value):
                silent.append(shown)
            elif launch_flags.zero_stage(ns) == 3:  # under Megatron-FSDP: its strategy
                applied.append(shown)
            else:
                unpriced.append(f"{shown} (Megatron-FSDP's double buffers priced under "
                                f"optim_grads_params only)")
        elif flag in NUM_SMS:
            flex = launch_flags.flex_dispatch(ns)
            wins = flag == "--moe-flex-dispatcher-num-sms" or \
                ns.get("moe_flex_dispatcher_num_sms") is None
            (applied if flex and wins and value is not None else silent).append(shown)
        elif flag in PAGED_STASH:
            (applied if "paged_stash" in facts else unpriced
             if flag == "--moe-expert-rank-capacity-factor" and ns.get("num_experts")
             else silent).append(shown)
        elif flag in INDEXER_LOSS:
            run = of_megatron(ns.get("dsa_indexer_loss_coeff"),
                              ns.get("dsa_indexer_use_sparse_loss")) != "none"
            (applied if "indexer_loss" in facts else unpriced
             if run and ns.get("experimental_attention_variant") == "dsa" else silent
             ).append(shown)
        elif flag in MODELLED:
            applied.append(shown)
        elif flag in NO_EFFECT or spec["group"] in NO_EFFECT_GROUPS or \
                value == spec.get("default"):
            silent.append(shown)
        else:
            unpriced.append(shown)
    return applied, unpriced, silent


def read_launch(given: str, gpus: int | None = None, model_flags: dict | None = None
                ) -> Launch:
    path, words, launcher_world, environ = launch_words(given)
    parsed = parse(words, path)
    from ledger.io.megatron.flags import apply_model_flags, placement_flags, semantic_notes

    ns = namespace(parsed)
    ns |= {k: v for k, v in PRETRAIN_GPT_DEFAULTS.items() if ns.get(k) is None}
    notes, tokenizer_size = apply_model_flags(ns, parsed, model_flags or {}, path)
    world = gpus or launcher_world
    problems = [f"unrecognized arguments: {' '.join(parsed.unknown)}"] if parsed.unknown else []
    problems += [msg for _, msg in parsed.bad]
    problems += [f"{f} expected a value" for f in parsed.no_value
                 if table()["flags"][f]["group"] not in NO_EFFECT_GROUPS]
    unread = {f for f, _ in parsed.bad}
    problems += [p for p in mm.refusals(ns, world) if not any(p.startswith(f"no {f} ")
                                                                for f in unread)]
    backend = str(ns.get("attention_backend") or "auto")  # AttnBackend.auto: the default
    problems += alloc_refusals(environ) + cublas_refusals(environ)
    problems += attention_refusals(environ, backend.rpartition(".")[2])
    try:
        flags, more = placement_flags(ns, path) if not problems else ({}, [])
    except LedgerError as e:
        problems.append(str(e).split(": ", 1)[1])
    rows = mm.vocab(ns, tokenizer_size)
    if rows is None and not problems:
        kind = ns["tokenizer_type"]  # Megatron's own tokenizers read --vocab-file
        files = "--vocab-file" if kind in mm.FILE_TOKENIZERS else "--tokenizer-model"
        default = "" if "--tokenizer-type" in parsed.given else " (pretrain_gpt.py's default)"
        problems.append(f"--tokenizer-type {kind}{default} with {files} "
                        f"{ns.get(files[2:].replace('-', '_'))}: {TOKENIZER_FILES}; give its "
                        f"size with --vocab-size N beside the launch file")
    if problems:
        raise LedgerError("from_megatron", f"{path}: Megatron would refuse this launch, or "
                                           f"its numbers would mean nothing: "
                                           + "; ".join(problems))
    spec = mm.model_spec(ns, f"megatron:{os.path.basename(path)}", rows)
    loss = of_megatron(ns.get("dsa_indexer_loss_coeff"), ns.get("dsa_indexer_use_sparse_loss"))
    if loss != "none" and model_problem(spec, loss) is None:  # as the Bridge rows read it
        flags["indexer_loss"] = loss
    applied, unpriced, silent = classify(parsed, ns, flags)
    env_flags, *env_lists = read_env(environ, tp=ns["tensor_model_parallel_size"],
                                     cp=ns["context_parallel_size"])
    for mine, theirs in zip((applied, unpriced, silent), env_lists):
        mine += theirs
    silent += [f"{f} (no value: an unset variable?)" for f in parsed.no_value]
    precision, odd = mm.precision(ns)
    unpriced += odd + more
    named = {u.split()[0] for u in unpriced}  # a silent flag's value named (flags._host)
    silent = [s for s in silent if s.split()[0] not in named]
    notes += semantic_notes(ns, parsed)
    if world is not None:
        flags["gpus"] = world
    elif gpus is None:
        notes.append("the launch does not hold its world size: dp = 1 here; give --gpus N")
    return Launch(path=path, model=spec,
                  flags=flags | env_flags | ({} if precision == DEFAULT_PRECISION else
                                 {"precision": precision}), notes=tuple(notes),
                  unpriced=tuple(unpriced), silent=tuple(silent), applied=tuple(applied))
