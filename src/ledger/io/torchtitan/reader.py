"""``--from-torchtitan FILE``: a torchtitan job TOML, read as torchtitan reads it at the
TOML-era commit it belongs to: v0.1.0 (f7084fc) or 238fa99 (v0.2.2 + 2, the parent of
9810191, which replaced TOML files with Python registries).

The commit is the one whose JobConfig (``data/torchtitan_<commit>.json``, every section,
key and default, with the extensions a job names in ``job.custom_config_module`` or
``experimental.custom_args_module``) knows the file's keys; on a tie, 238fa99. At 238fa99
an unknown key is refused, as torchtitan's ConfigManager refuses it (config/manager.py
:160-171); at v0.1.0 it is dropped, as ``_dict_to_dataclass`` drops it
(config_manager.py:805-817), and listed with --verbose.

The model is ``model.name`` + ``model.flavor`` from torchtitan's own flavours
(``ledger.io.torchtitan.flavours``); FLUX and the VLM are not decoder LMs and are refused, as is a
name the commit does not register (238fa99 protocols/train_spec.py:71-87; v0.1.0 :108-112).
Converters (238fa99 components/quantization/float8.py:238-239, mx.py:171-172; v0.1.0
float8.py:131): ``quantize.linear.float8`` [v0.1.0 ``float8``] is the FP8 recipe of
``recipe_name`` (torchao tensorwise by default), with ``enable_fsdp_float8_all_gather`` its
FP8 all-gather; ``quantize.linear.mx`` [``mx``] is the mxfp8 recipe (torchao's MXLinear:
dense GEMMs in MXFP8, the output head filtered out, routed experts' grouped GEMMs left in
BF16 unless ``quantize.grouped_mm.mx``, which is named); an unregistered converter name is refused (protocols/model_converter.py
:61-63 raises KeyError); the quantize sections without their converter are inert.

Placement (238fa99 config/job_config.py:253-474, distributed/parallel_dims.py:44-56,
136-138; torchtitan/train.py:196-215): data-parallel degree = replicate x shard (shard -1
takes the ranks left over); FSDP shards over shard x cp, so shard > 1 or cp > 1 is ZeRO-3,
with replicate > 1 HSDP; the global batch defaults to local x dp, micro-batch = local
batch unless pp > 1 (then pipeline_parallel_microbatch_size); fsdp_reshard_after_forward
"default" reshards unless pp > 1, "always" under PP too (models/llama3/infra/parallelize.py:319-331); a looped
schedule holds 2 stages per rank unless pipeline_parallel_layers_per_stage says otherwise
(distributed/pipeline_parallel.py:111-115); expert_tensor_parallel_degree has no effect at
ep 1 and must be 1 or tp otherwise (parallel_dims.py:55-56). activation_checkpoint.mode
none / full, selective with an option "n" (every n-th block in full) or "op" (torchtitan's
per-op policy), and training.compile are applied; memory_budget is priced as the per-op
policy, and said. With checkpointing enabled, [checkpoint] interval and async_mode are a
whole run's checkpoint interval and save mode (``ledger.run``, ``--tokens``).
"""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.io.files import parse_toml, read_text
from ledger.io.launch import Launch
from ledger.io.torchtitan.commits import _keys, commit_of
from ledger.io.torchtitan.flavours import COMMITS, FAMILIES, flavours, spec

SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved",
             "InterleavedZeroBubble": "interleaved-zb", "ZBVZeroBubble": "zb-v"}
LOOPED = ("interleaved", "interleaved-zb", "zb-v")
NOT_LM = {"flux": "FLUX is a diffusion model", "vlm": "a vision tower with a language model",
          "transformers_modeling_backend": "its shape is a Hugging Face config.json (give "
          "that file as the model instead)"}
REGISTERED = {"238fa9953e": {"deepseek_v3", "flux", "gpt_oss", "llama3", "llama3_ft", "llama4",
                             "qwen3", "vlm", "transformers_modeling_backend"},
              "f7084fc785": {"llama3", "llama4", "flux"}}
FP8 = {"238fa9953e": ("quantize.linear.float8", "quantize.linear.float8"),
       "f7084fc785": ("float8", "float8")}  # converter name -> its options' section
# the MX linear converter (238fa99 components/quantization/mx.py:27-97, 171; v0.1.0 "mx"):
# torchao's MXLinear on every nn.Linear but filter_fqns (default ["output"])
MX = {"238fa9953e": ("quantize.linear.mx", "quantize.linear.mx"), "f7084fc785": ("mx", "mx")}
CONVERTERS = {"238fa9953e": ("quantize.linear.float8", "quantize.grouped_mm.float8",
                             "quantize.linear.mx", "quantize.grouped_mm.mx"),
              "f7084fc785": ("float8", "mx")}
_TORCHAO = {None: "tensorwise", "tensorwise": "tensorwise", "rowwise": "rowwise"}
# the keys of these sections the reader turns into flags (each held by a test that changes
# it and sees the priced number move: tests/test_launch_applied.py); any other key of them
# set away from its default is named as not modelled, unless it changes nothing priced
MODELLED = {
    "model": ("name", "flavor", "converters"),
    "parallelism": ("tensor_parallel_degree", "pipeline_parallel_degree",
                    "context_parallel_degree", "data_parallel_replicate_degree",
                    "data_parallel_shard_degree", "expert_parallel_degree",
                    "fsdp_reshard_after_forward",
                    "pipeline_parallel_microbatch_size", "pipeline_parallel_schedule",
                    "pipeline_parallel_layers_per_stage", "disable_loss_parallel",
                    "enable_async_tensor_parallel"),
    "activation_checkpoint": ("mode", "selective_ac_option")}
NO_PRICE = {"model": ("hf_assets_path", "tokenizer_path", "print_after_conversion"),
            # priced at etp = tp (or 1 without EP); _placement names any other value
            "parallelism": ("expert_tensor_parallel_degree",),
            "activation_checkpoint": ("debug", "determinism_check", "memory_budget",
                                      "visualize_memory_budget_pareto")}  # the budget: as mode


def _int(v, where: str, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise LedgerError("from_torchtitan", f"{where} must be an integer >= {low}, got {v!r}")
    return v


class _Job:
    """One TOML with torchtitan's defaults under it, and what reading it found."""

    def __init__(self, path: str, sec: dict, short: str, known: dict):
        self.path, self.short, self.sec = path, short, sec
        self.cfg = {s: known.get(s, {}) | sec.get(s, {}) for s in known}
        self.unpriced: list[str] = []
        self.problems: list[str] = []

    def get(self, key: str):
        s, _, k = key.rpartition(".")
        return self.cfg[s][k]

    def given(self, key: str) -> bool:
        s, _, k = key.rpartition(".")
        return k in self.sec.get(s, {})


def _model(job: _Job, gpus_flags: dict, model_flags: dict):
    name, flavour = job.get("model.name"), job.get("model.flavor")
    for key, value in (("model.name", name), ("model.flavor", flavour)):
        if not isinstance(value, str):  # a list or a table cannot name a model
            raise LedgerError("from_torchtitan", f"{key} must be a string, got {value!r}")
    if name in NOT_LM:
        job.problems.append(f"model {name}: {NOT_LM[name]}, not a decoder LM")
        return None
    if name not in REGISTERED[job.short] or name not in FAMILIES:
        job.problems.append(f"model.name {name!r} is not a registered train spec at torchtitan "
                            f"{job.short} (torchtitan refuses it: protocols/train_spec.py)")
        return None
    table = flavours(job.short, name)
    if flavour not in table:
        job.problems.append(f"model.flavor {flavour!r} is not a flavour of {name} at "
                            f"{job.short}; known: {', '.join(table)}")
        return None
    seq = model_flags.pop("seq_len", None)
    if seq is not None and job.given("training.seq_len") and seq != job.get("training.seq_len"):
        raise LedgerError("seq_len", f"given twice: training.seq_len "
                                     f"{job.get('training.seq_len')} in {job.path}, --seq {seq}")
    seq = seq or _int(job.get("training.seq_len"), "training.seq_len")
    vocab = model_flags.pop("vocab", None)
    if model_flags:
        raise LedgerError("model", f"{', '.join(model_flags)} beside {job.path}: torchtitan's "
                                   f"{name} {flavour!r} fixes the shape (only --seq and, where "
                                   f"the tokenizer sets it, --vocab-size apply)")
    if table[flavour]["vocab_size"] < 0 and vocab is None:
        job.problems.append(f"{name} {flavour!r} takes its vocabulary from the tokenizer "
                            f"(model.tokenizer_path {job.get('model.tokenizer_path')!r}): give "
                            f"its size with --vocab-size N beside the file")
        return None
    return spec(job.short, name, flavour, seq, vocab)


def _precision(job: _Job) -> str | None:
    converters = list(job.get("model.converters"))
    unknown = [c for c in converters if c not in CONVERTERS[job.short]]
    if unknown:
        job.problems.append(f"model.converters {unknown} are not registered at torchtitan "
                            f"{job.short} (a KeyError in protocols/model_converter.py; known: "
                            f"{', '.join(CONVERTERS[job.short])})")
        return None
    fp8, options = FP8[job.short]
    mx, mx_options = MX[job.short]
    job.unpriced += [f"model.converters {c!r} (grouped-GEMM FP8 / MXFP8: routed experts "
                     f"priced in BF16)" for c in converters if c not in (fp8, mx)]
    if mx in converters and fp8 not in converters:
        recipe = job.cfg[mx_options].get("recipe_name")
        if not str(recipe).startswith("mxfp8"):
            job.unpriced.append(f"{mx_options}.recipe_name {recipe!r} (priced as mxfp8)")
        return "fp8-mxfp8"
    if mx in converters:
        job.unpriced.append(f"model.converters {mx!r} beside {fp8!r} (priced as float8)")
    if fp8 not in converters:
        return None
    opts = job.cfg[options]
    recipe = opts.get("recipe_name")
    if recipe not in _TORCHAO:
        job.unpriced.append(f"{options}.recipe_name {recipe!r} (priced as tensorwise)")
    gather = bool(opts.get("enable_fsdp_float8_all_gather")) and _TORCHAO.get(recipe) == \
        "tensorwise"
    return "fp8" + ("" if recipe is None else f"-{_TORCHAO.get(recipe, 'tensorwise')}") + \
        ("+param-gather" if gather else "")


def _placement(job: _Job, layers: int, gpus: int | None) -> dict:
    par = job.cfg["parallelism"]
    tp, pp, cp, rep = (_int(par[k], f"parallelism.{k}") for k in (
        "tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree",
        "data_parallel_replicate_degree"))
    ep = _int(par.get("expert_parallel_degree", 1), "parallelism.expert_parallel_degree")
    shard = par["data_parallel_shard_degree"]
    if shard == -1:
        if gpus is None:
            raise LedgerError("from_torchtitan", "parallelism.data_parallel_shard_degree = -1 "
                                                 "takes the ranks left over: give --gpus")
        shard = gpus // (tp * pp * cp * rep)
    shard = _int(shard, "parallelism.data_parallel_shard_degree")
    fsdp = shard > 1 or cp > 1
    flags = {"framework": "torchtitan", "tp": tp, "pp": pp, "cp": cp, "ep": ep,
             "dp": rep * shard, "zero": 3 if fsdp else 0, "gpus": rep * shard * tp * pp * cp}
    if fsdp and rep > 1:
        flags["hsdp_shard"] = shard * cp
    etp = par.get("expert_tensor_parallel_degree", 1)
    if ep > 1 and etp not in (1, tp):
        job.problems.append(f"parallelism.expert_tensor_parallel_degree {etp} must be 1 or "
                            f"tp({tp}) (distributed/parallel_dims.py:55-56)")
    if ep > 1 and etp != tp:
        job.unpriced.append(f"parallelism.expert_tensor_parallel_degree {etp} with tp {tp} "
                            f"(priced at etp = tp)")
    reshard = par["fsdp_reshard_after_forward"]
    if reshard not in ("default", "always", "never"):
        raise LedgerError("from_torchtitan", f"parallelism.fsdp_reshard_after_forward "
                                             f"{reshard!r}: default, always or never")
    if reshard == "never":
        flags["no_reshard"] = True
    elif reshard == "always" and pp > 1:  # "default" would keep them gathered under PP
        flags["reshard"] = True
    tr = job.cfg["training"]
    local = _int(tr.get("local_batch_size") or tr.get("batch_size"), "training.local_batch_size")
    glob = tr["global_batch_size"]
    flags["global_batch"] = local * rep * shard if glob == -1 else \
        _int(glob, "training.global_batch_size")
    flags["micro_batch"] = _int(par["pipeline_parallel_microbatch_size"],
                                "parallelism.pipeline_parallel_microbatch_size") \
        if pp > 1 else local
    if pp > 1:
        flags |= _schedule(job, layers, pp)
    if par.get("enable_async_tensor_parallel") and tp > 1:  # micro-pipelined TP
        flags["tp_overlap"] = True  # (distributed/tensor_parallel.py): priced as --tp-overlap
    if par.get("context_parallel_rotate_method", "allgather") != "allgather":
        job.unpriced.append(f"parallelism.context_parallel_rotate_method "
                            f"{par['context_parallel_rotate_method']!r} (priced as ring)")
    return flags


def _schedule(job: _Job, layers: int, pp: int) -> dict:
    par = job.cfg["parallelism"]
    name = par["pipeline_parallel_schedule"]
    if name not in SCHEDULES:
        raise LedgerError("from_torchtitan", f"parallelism.pipeline_parallel_schedule "
                                             f"{name!r} is not modelled; known: "
                                             f"{', '.join(SCHEDULES)}")
    kind = SCHEDULES[name]
    per_stage = par.get("pipeline_parallel_layers_per_stage")
    vp = 2 if kind in LOOPED else 1
    if per_stage is not None:
        vp = layers // (pp * per_stage)
    for key in ("pipeline_parallel_first_stage_less_layers",
                "pipeline_parallel_last_stage_less_layers"):
        if par.get(key, 1) != 1:
            job.unpriced.append(f"parallelism.{key} {par[key]} (priced as 1)")
    return {"schedule": kind, "vp": vp}


# -- what the step keeps (issue 21): AC policy and compile, read as torchtitan reads them --
def _step(job: _Job) -> dict:
    """torchtitan's activation checkpointing, compile and loss as flags: selective 'op' is
    its per-op policy (the ledger's selective under torchtitan, ledger.arch.checkpointing),
    selective 'n' checkpoints every n-th block in full (models/llama3/infra/parallelize.py,
    distributed/activation_checkpoint.py); memory_budget is priced as the op policy, and
    said. Compile: training.compile compiles the blocks and the loss (f7084fc), [compile]
    enable its components, "model" and "loss" (238fa99 job_config.py:722-727); the loss
    is loss-parallel over TP unless parallelism.disable_loss_parallel
    (ledger.frameworks.losses)."""
    flags = _compile(job)
    ac = job.cfg["activation_checkpoint"]
    mode, option = ac["mode"], str(ac.get("selective_ac_option", "2"))
    if mode in ("none", "full"):
        return flags | {"recompute": mode}
    if mode == "selective" and option == "op":
        return flags | {"recompute": "selective"}
    if mode == "selective" and option.isdigit() and int(option) > 0:
        return flags | {"recompute": "full", "recompute_every": int(option)}
    if mode == "memory_budget":
        job.unpriced.append(f"activation_checkpoint.mode 'memory_budget' (memory_budget "
                            f"{ac.get('memory_budget')}; priced as the per-op policy)")
        return flags | {"recompute": "selective"}
    job.problems.append(f"activation_checkpoint.mode {mode!r} with selective_ac_option "
                        f"{option!r}: none, full, selective with 'op' or a positive layer "
                        f"frequency, or memory_budget")
    return flags | {"recompute": "none"}


def _compile(job: _Job) -> dict:
    comp = job.cfg.get("compile")
    if comp:
        on, parts = bool(comp["enable"]), list(comp["components"])
        model, loss = on and "model" in parts, on and "loss" in parts
    else:
        model = loss = bool(job.cfg["training"].get("compile", False))
    par = job.cfg["parallelism"]
    split = par["tensor_parallel_degree"] > 1 and not par["disable_loss_parallel"]
    flags = {"compile": model}
    if loss != model or (par["tensor_parallel_degree"] > 1 and not split):
        flags["loss"] = "compiled" if loss else "loss-parallel" if split else "eager"
    return flags


def _training(job: _Job) -> None:
    """The training keys that change a priced number the ledger does not model."""
    tr = job.cfg["training"]
    for key, plain in (("mixed_precision_param", "bfloat16"),
                       ("mixed_precision_reduce", "float32"), ("enable_cpu_offload", False)):
        if key in tr and tr[key] != plain:
            job.unpriced.append(f"training.{key} {tr[key]!r}")
    if tr.get("dtype") not in (None, "float32"):
        job.unpriced.append(f"training.dtype {tr['dtype']!r} (every state in it)")


# [checkpoint]'s switch per commit: 238fa99 config/job_config.py:488 (enable), :519
# (interval), :591 (async_mode); v0.1.0 config_manager.py:369 (enable_checkpoint), :404,
# :428
_CKPT_ON = {"238fa9953e": "enable", "f7084fc785": "enable_checkpoint"}
_ASYNC = ("disabled", "async", "async_with_pinned_mem")


def _checkpoint(job: _Job) -> dict:
    """[checkpoint] interval and async_mode, when checkpointing is on, as a whole run's
    checkpoint interval and save mode (``ledger.run``; they change nothing else)."""
    ck = job.cfg.get("checkpoint", {})
    if not ck.get(_CKPT_ON[job.short]):
        return {}
    interval, mode = ck["interval"], ck["async_mode"]
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        job.problems.append(f"checkpoint.interval must be an integer >= 1, got {interval!r}")
    if mode not in _ASYNC:
        job.problems.append(f"checkpoint.async_mode {mode!r}: {', '.join(_ASYNC)}")
    if job.problems:
        return {}
    return {"ckpt_interval": interval} | ({"ckpt_async": True} if mode != "disabled" else {})


def read_launch(path: str, gpus: int | None = None, model_flags: dict | None = None
                ) -> Launch:
    raw = parse_toml(read_text(path, "from_torchtitan"), path, "from_torchtitan")
    sec = _keys(raw)
    short, known, unknown = commit_of(sec)
    job = _Job(path, sec, short, known)
    silent = []
    if unknown and short == "238fa9953e":
        job.problems.append(f"{', '.join(unknown)} are not JobConfig fields (torchtitan's "
                            f"ConfigManager raises: config/manager.py:160-171)")
    elif unknown:
        silent.append(f"dropped by torchtitan {short}: {', '.join(unknown)}")
    model = _model(job, {}, dict(model_flags or {}))
    precision = _precision(job)
    if job.problems:
        raise LedgerError("from_torchtitan", f"{path} (torchtitan {short}): torchtitan would "
                                             f"refuse it, or its numbers would mean nothing: "
                                             + "; ".join(job.problems))
    flags = _placement(job, model.layers, gpus) | _step(job)
    flags |= _checkpoint(job)
    _training(job)
    if job.problems:
        raise LedgerError("from_torchtitan", f"{path}: " + "; ".join(job.problems))
    if precision:
        flags["precision"] = precision
    run_keys = (_CKPT_ON[short], "interval", "async_mode") if "ckpt_interval" in flags else ()
    named = " ".join(job.unpriced)
    job.unpriced += [f"{s}.{k} {sec[s][k]!r}" for s, keys in sec.items() for k in keys
                     if s in MODELLED and k not in MODELLED[s] and k not in NO_PRICE.get(s, ())
                     and k in known.get(s, {}) and sec[s][k] != known[s][k]
                     and f"{s}.{k}" not in named]
    applied = [f"{s}.{k}" for s, keys in sec.items() for k in keys
               if k in MODELLED.get(s, ()) or
               (s == "training" and k in ("local_batch_size", "global_batch_size", "seq_len",
                                          "compile")) or (s == "compile" and k in (
                                              "enable", "components"))
               or (s == "checkpoint" and k in run_keys)]
    applied = [k for k in applied if k not in named]
    named = " ".join(job.unpriced)
    silent += [f"{s}.{k}" for s, keys in sec.items() for k in keys
               if f"{s}.{k}" not in applied and s in known and k in known[s]
               and f"{s}.{k}" not in named]
    return Launch(path=path, model=model, flags=flags, unpriced=tuple(job.unpriced),
                  silent=(f"(read as torchtitan {short}, {COMMITS[short][:7]})", *silent),
                  applied=tuple(applied))
