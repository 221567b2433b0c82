"""The CLI's inputs assembled: the model (positional or from a launch file), the
system, the schedule's times. Checks that span flags live here; nothing prints (the
notes of a launch file are returned for ``ledger.cli`` to print)."""
from __future__ import annotations

import argparse

from ledger.cli.args import build_parser
from ledger.cli.graph_flags import check_graph_impl, check_graph_run
from ledger.cli.megatron_only import check_megatron_only
from ledger.cli.step_flags import check_ep_sms, check_shared_overlap, unpriced_flags
from ledger.errors import LedgerError
from ledger.frameworks.dsa_loss import model_problem as dsa_loss_problem
from ledger.model import ModelSpec


# what ``plan`` takes from a launch file: the job's size, and the run's facts it holds
# fixed in every placement (search.RUN_FACTS, HOST_FACTS, EXPERT_FACTS and the buffers and
# dtypes), so that it prices the file's own placement as report does - its token
# dispatcher, the flex dispatcher's backend and SMs, and its expert TP where the file sets
# one (``PLAN_ETP``: else Megatron's, each candidate's tp); the placement it searches
PLAN_FROM_FILE = ("gpus", "global_batch", "framework", "precision", "optimizer", "dropout",
                  "loss", "compile", "no_flash", "recompute_modules", "grad_dtype",
                  "master_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "cuda_graph_scope",
                  "cuda_graph_impl", "cublas_workspace_bytes",
                  "shared_expert_overlap", "delay_wgrad", "dp_bucket_params",
                  "fp8_attention", "fp8_output_proj", "fused_grouped_mlp", "nccl_nvls",
                  "expandable_segments", "grad_accumulation_fusion", "fsdp_double_buffer",
                  "transformer_impl", "paged_stash", "indexer_loss",
                  "moe_dispatcher", "ep_backend", "ep_sms", "hybridep_permute_fusion",
                  "cpu_offloading_num_layers")
# what a launch sets that plan neither holds nor searches (its grid prices none of them:
# deferral needs pp > 1, a micro-batch group and optimizer instances must divide each
# candidate's pp / m and dp x cp), named in one stderr line (``messages``); estimate and
# report price them
PLAN_NOT_HELD = {"wgrad_deferral": "--defer-embedding-wgrad-compute",
                 "vp_group": "--microbatch-group-size-per-virtual-pipeline-stage",
                 "num_distributed_optimizer_instances": "--num-distributed-optimizer-instances"}
# what a launch file sets that no CLI flag types (``ledger.io.megatron.flags``): the experts'
# paged stash (Megatron-Bridge's recipes and Megatron launches only)
FROM_FILE_ONLY = ("paged_stash", "stage_layers")  # and a launch's account-for-* split
# the launch flag whose expert TP plan holds (arguments.py L587-588 @d98e8a64: unset, it
# is the run's tp, and follows each candidate's)
PLAN_ETP = "--expert-tensor-parallel-size"


def source(a: argparse.Namespace):
    """The launch config named by --from-megatron / --from-torchtitan (or None), its
    placement merged into the flags: a flag also given on the command line must agree.
    The model flags given beside the file reach the reader, which applies or refuses
    each (``ledger.io.megatron.flags``, ``ledger.io.torchtitan.reader``)."""
    given = [(k, getattr(a, k, None)) for k in ("from_megatron", "from_torchtitan")
             if getattr(a, k, None)]
    if not given:
        return None
    if len(given) == 2:
        raise LedgerError("from_megatron", "give --from-megatron or --from-torchtitan, not both")
    if a.model is not None:
        raise LedgerError("model", f"{a.model!r} given twice: on the command line and by "
                                   f"{given[0][1]}; drop one")
    from ledger.cli.model_flags import given_model_flags

    model_flags = given_model_flags(a)
    if given[0][0] == "from_megatron":
        from ledger.io.megatron.reader import read_launch
    else:
        from ledger.io.torchtitan.reader import read_launch
    launch = read_launch(given[0][1], gpus=getattr(a, "gpus", None), model_flags=model_flags)
    if "moe_latent" in model_flags:  # typed: held to the file's width as on its own
        from ledger.cli.model_flags import check_latent

        check_latent(model_flags["moe_latent"], launch.model.hidden)
    if a.cmd == "serve":  # the file gives the model; its training layout is not the serving one
        return launch
    defaults = vars(build_parser().parse_args([a.cmd]))
    a.plan_not_held = [PLAN_NOT_HELD[d] for d in PLAN_NOT_HELD if a.cmd == "plan"
                       and launch.flags.get(d) not in (None, defaults.get(d, None))]
    for dest, value in launch.flags.items():
        if dest in FROM_FILE_ONLY and (a.cmd != "plan" or dest in PLAN_FROM_FILE):
            setattr(a, dest, value)
            continue
        if dest not in defaults or (a.cmd == "plan" and dest not in PLAN_FROM_FILE
                                    and not (dest == "etp" and _sets_etp(launch))):
            continue  # the planner searches the placement; the file sizes the job
        mine = getattr(a, dest)
        if mine != defaults[dest] and mine != value:
            raise LedgerError(dest, f"given twice: {mine} on the command line, {value} from "
                                    f"{launch.path} (its settings and defaults); drop one")
        setattr(a, dest, value)
    return launch


def _sets_etp(launch) -> bool:
    """The launch file gives its expert TP (``PLAN_ETP``) rather than leaving it to tp."""
    return any(x.split()[0] == PLAN_ETP for x in launch.applied)


def messages(a: argparse.Namespace) -> list[str]:
    """What to say on stderr about the launch file before the figures: its notes; with
    --verbose, what was applied and what was accepted as changing nothing priced. What it
    sets that the ledger does not model is said with the typed flags' (``unpriced_messages``)."""
    launch = a.launch
    if launch is None:
        return []
    out = [f"warning: {n}" for n in launch.notes]
    if getattr(a, "plan_not_held", None):
        out.append(f"warning: held settings not searched: {', '.join(a.plan_not_held)} "
                   f"(plan prices every placement without them; estimate prices them)")
    if getattr(a, "verbose", False):
        if launch.applied:
            out.append(f"note: applied: {' '.join(launch.applied)}")
        if launch.silent:
            out.append(f"note: accepted, changes no priced number: {' '.join(launch.silent)}")
    return out


def unpriced_settings(a: argparse.Namespace) -> tuple[list[str], str]:
    """What the launch file sets and the command line types that the ledger does not
    price (the file's first, a typed one it already names once), and who sets them."""
    typed = unpriced_flags(a)
    served = getattr(a, "serve_unpriced", None)  # serve: what the checkpoint declares
    if served:
        return served, "the checkpoint sets"
    launch = a.launch
    filed = list(launch.unpriced) if launch is not None else []
    if not filed:
        return typed, "the command line sets"
    more = [t for t in typed if t not in filed]
    return [*filed, *more], \
        f"{launch.path} and the command line set" if more else f"{launch.path} sets"


def unpriced_messages(a: argparse.Namespace) -> list[str]:
    """Everything unpriced, the launch file's and the typed flags', in one line for stderr
    once the figures are made (a refused input says only its error)."""
    unpriced, _ = unpriced_settings(a)
    return [f"warning: not modelled, so the figures are approximate: "
            f"{'; '.join(unpriced)}"] if unpriced else []


def mark_approximate(a: argparse.Namespace, text: str) -> str:
    """The output marked approximate when the launch or the typed flags set what the ledger
    does not model: a last line of text, or an "approximate" list in JSON."""
    unpriced, who = unpriced_settings(a)
    if not unpriced:
        return text
    if getattr(a, "json", False):
        import json

        d = json.loads(text)
        d["approximate"] = unpriced
        return json.dumps(d, indent=1 if a.cmd == "plan" else 2, allow_nan=False)
    return (text + f"\napproximate: {who} {len(unpriced)} thing(s) the "
                   f"ledger does not model (named on stderr)")


def model(a: argparse.Namespace) -> ModelSpec:
    """The model from the positional argument, or from a launch config file, within the
    stated limits (ledger.io.limits)."""
    from ledger.io import check_model_size

    spec = _model(a)
    check_model_size(spec)
    check_shared_overlap(a, spec)
    check_graph_impl(a, spec)
    check_graph_run(a)
    check_megatron_only(a)
    if (why := dsa_loss_problem(spec, getattr(a, "indexer_loss", None) or "none")):
        raise LedgerError("indexer_loss", why)
    return spec


def _model(a: argparse.Namespace) -> ModelSpec:
    launch = a.launch
    if launch is not None:
        return launch.model
    if a.model is None:
        raise LedgerError("model", "give a model (a preset, a config.json or 'custom'), or "
                                   "--from-megatron FILE / --from-torchtitan FILE")
    from ledger.cli.model_flags import load_model

    return load_model(a)


FINETUNE_BATCH = 16  # sequences per step when a fine-tune names none: the QLoRA paper's
# Guanaco runs, batch 1 x 16 accumulation steps (artidoro/qlora scripts/finetune_guanaco_65b.sh)


def plan_model(a: argparse.Namespace) -> ModelSpec:
    model_ = model(a)
    if a.min_gpus and a.gpus is not None:
        raise LedgerError("min_gpus", f"--min-gpus searches the world size; drop --gpus {a.gpus}")
    if a.global_batch is None and a.finetune is not None:
        a.global_batch, a.batch_defaulted = FINETUNE_BATCH, True
    for name, flag in (("gpus", "--gpus (or --min-gpus)"), ("global_batch", "--global-batch")):
        if getattr(a, name) is None and not (name == "gpus" and a.min_gpus):
            raise LedgerError(name, f"plan needs {flag}")
    from ledger.frameworks import get

    fw = get(a.framework)
    problem = fw.schedule_problem(a.schedule) if a.schedule is not None else None
    if problem is not None:
        raise LedgerError(*problem)
    for name in ("overlap_grad_reduce", "overlap_param_gather"):
        if getattr(a, name) is not None and set(fw.zero_stages) <= set(fw.overlap_fixed):
            raise LedgerError(name, f"{fw.name} decides it at every ZeRO stage it offers; "
                                    f"drop --{'' if getattr(a, name) else 'no-'}"
                                    f"{name.replace('_', '-')}")
    if a.ep_overlap and not model_.is_moe:
        raise LedgerError("ep_overlap", f"{model_.name} has no experts to overlap")
    if a.ep_overlap:  # pinned on: refused where no placement can run it, as estimate does
        from ledger.frameworks.host_checks import ep_overlap_refusal

        pp = a.pp if a.pp is not None or a.schedule in (None, "1f1b") else 2  # (pp > 1)
        problem = ep_overlap_refusal(fw, a.schedule, pp, a.ep, a.recompute,
                                     a.moe_dispatcher or fw.moe_dispatcher)
        if problem is not None:
            raise LedgerError("ep_overlap", problem)
    if (a.tp or 1) > 1 or (a.cp or 1) > 1:  # a pinned width the model cannot split, by name
        from ledger.placement import split_problem

        problem = split_problem(model_, a.tp or 1, a.cp or 1)
        if problem is not None:
            raise LedgerError(*problem)
    for field, problem in _megatron_problems(a, model_):
        raise LedgerError(field, problem)
    if a.vp is not None and a.pp is not None:  # the pins must be a pipeline it runs
        sched = a.schedule or ("interleaved" if a.vp > 1 else "1f1b")
        fw.check_pipeline(model_.layers, a.pp, a.vp, sched)
    return model_


def _megatron_problems(a: argparse.Namespace, model_: ModelSpec) -> list:
    """What Megatron refuses of the planner's fixed flags on this model (the checks the
    CLI's config and the launch reader share): recompute modules its layers lack or its
    FP8 recipe cannot recompute, the
    shared experts' overlap beside their recompute; with --ep-overlap pinned, the shared
    experts' overlap beside it or --delay-wgrad-compute without it (unpinned, the planner
    drops per row what does not run with its EP overlap: ledger.plan.search._config)."""
    from ledger.arch.recurrent import has_gdn
    from ledger.frameworks.host_checks import moe_overlap_problems
    from ledger.frameworks.recompute_modules import MLA_ATTENTIONS, recompute_module_problems

    from ledger.frameworks import get
    from ledger.frameworks.fp8 import is_fp8, recipe

    mods, shared = getattr(a, "recompute_modules", None), \
        bool(getattr(a, "shared_expert_overlap", False))
    precision = getattr(a, "precision", None)
    fp8 = recipe(get(a.framework).family, precision).name if is_fp8(precision) else None
    out = recompute_module_problems(mods, has_gdn(model_), model_.hc_mult > 0,
                                    model_.attention in MLA_ATTENTIONS, model_.is_moe, fp8)
    out += moe_overlap_problems(shared, bool(model_.is_moe and model_.shared_experts), None,
                                False, False, mods)
    if a.ep_overlap is not None:
        out += moe_overlap_problems(shared, None, None, a.ep_overlap,
                                    bool(getattr(a, "delay_wgrad", False)))
    return out


def vp(a: argparse.Namespace) -> int:
    """Stages per PP rank: as given, else 2 for ZB-V and DualPipe(V) (two per rank), else 1."""
    from ledger.config import TWO_STAGES

    return a.vp or (2 if a.schedule in TWO_STAGES else 1)


def stage_split(a: argparse.Namespace, model_) -> tuple[tuple[int, ...] | None, int]:
    """(layers per model stage, vp) from Megatron's layout or first/last flags, else
    (None, the stages per rank --vp and --schedule give)."""
    layout = getattr(a, "pipeline_layout", None)
    first, last = getattr(a, "decoder_first", None), getattr(a, "decoder_last", None)
    if getattr(a, "stage_layers", None) is not None:  # a launch's (io.megatron.flags)
        return tuple(a.stage_layers), vp(a)
    if layout is None and first is None and last is None:
        return None, vp(a)
    if a.pp == 1:
        raise LedgerError("pipeline_model_parallel_layout", "a layer split needs pp > 1, "
                                                            "got pp(1)")
    from ledger.io import parse_layout, uneven_layers

    if layout is not None:
        if first is not None or last is not None or a.vp is not None:
            raise LedgerError("pipeline_model_parallel_layout",
                              "--pipeline-model-parallel-layout sets the split and vp alone: "
                              "drop --vp and --decoder-first/last-pipeline-num-layers")
        return parse_layout(layout, a.pp, model_.layers, model_.mtp_layers)
    return uneven_layers(a.pp, vp(a), model_.layers, first, last), vp(a)


DEFAULT_GPU = "h100-sxm"


def system(a: argparse.Namespace):
    """The GPU preset's usual cluster, or a system file; --gpus-per-node applies to either
    and is refused when the file says otherwise; --gpu-memory sets its GPU's memory."""
    from ledger.io import load_system
    from ledger.system import system as preset

    gib = getattr(a, "gpu_memory", None)
    if gib is not None and a.gpu is None and not a.system and a.cmd != "report":
        base = preset(DEFAULT_GPU).gpu
        raise LedgerError("gpu_memory", f"--gpu-memory {gib:g} alone keeps the default "
                                        f"{base.name}'s {base.bf16_flops / 1e12:,.0f} TFLOP/s and "
                                        f"{base.hbm_bytes_per_s / 1e12:g} TB/s: name the GPU "
                                        f"(--gpu NAME, see 'gpus') or a --system file")
    domain = getattr(a, "gpus_per_domain", None)
    sysm = load_system(a.system, gpus_per_node=a.gpus_per_node, gpus_per_domain=domain) \
        if a.system else preset(a.gpu or DEFAULT_GPU, a.gpus_per_node, domain)
    check_ep_sms(a, sysm)
    return with_memory(sysm, gib)


def with_memory(sysm, gib: float | None):
    """The system with its GPU's memory set by --gpu-memory (GiB); the GPU's name marked
    with a * as a --system file's overrides are."""
    if gib is None:
        return sysm
    from dataclasses import replace

    name = sysm.gpu.name.rstrip("*") + "*"
    return replace(sysm, gpu=replace(sysm.gpu, name=name, hbm_bytes=gib * 2**30))


def backward_time(a: argparse.Namespace) -> float:
    """The full backward time; a split backward's halves must add up to it."""
    from ledger.pipeline import SPLIT_BACKWARD

    halves = [x for x in (a.t_in, a.t_w) if x is not None]
    if halves and a.kind not in SPLIT_BACKWARD:
        raise LedgerError("tB", f"{a.kind} runs a full backward; --tB/--tW apply to "
                                f"{', '.join(SPLIT_BACKWARD)}")
    if len(halves) == 2:
        if a.tb is not None and a.tb != a.t_in + a.t_w:
            raise LedgerError("tb", f"tb({a.tb:g}) != tB({a.t_in:g}) + tW({a.t_w:g})")
        return a.t_in + a.t_w
    tb = 2.0 if a.tb is None else a.tb
    if halves and halves[0] >= tb:
        name = "tB" if a.t_in is not None else "tW"
        raise LedgerError(name, f"{name}({halves[0]:g}) must be below tb({tb:g}), which "
                                f"the other half shares")
    return tb


_LORA_FLAGS = ("lora_rank", "lora_alpha", "lora_targets", "lora_dropout", "dora")
_QLORA_FLAGS = ("no_double_quant", "kbit_upcast")


def finetune(a: argparse.Namespace):
    """The FineTune the flags describe (None without --finetune); a flag the method does
    not use is refused, naming it."""
    from ledger.finetune import ALL_LINEAR, FineTune

    method = getattr(a, "finetune", None)
    given = [f for f in _LORA_FLAGS + _QLORA_FLAGS + ("freeze", "freeze_layers")
             if getattr(a, f, None) not in (None, False)]
    if method is None:
        if given:
            raise LedgerError(given[0], f"--{given[0].replace('_', '-')} needs --finetune "
                                        f"full, lora or qlora")
        return None
    unused = [f for f in given if (f in _LORA_FLAGS and method == "full")
              or (f in _QLORA_FLAGS and method != "qlora")]
    if unused:
        raise LedgerError(unused[0], f"--{unused[0].replace('_', '-')} does not apply to "
                                     f"--finetune {method}")
    targets = a.lora_targets
    if targets is not None and ALL_LINEAR in targets:
        if len(targets) > 1:
            raise LedgerError("lora_targets", f"all-linear stands alone, got "
                                              f"{','.join(targets)}")
        targets = ALL_LINEAR
    kw = {k: v for k, v in (("lora_rank", a.lora_rank), ("lora_alpha", a.lora_alpha),
                            ("lora_dropout", a.lora_dropout),
                            ("freeze_layers", a.freeze_layers)) if v is not None}
    return FineTune(method=method, lora_targets=targets, dora=a.dora,
                    freeze=a.freeze or (), double_quant=not a.no_double_quant,
                    kbit_upcast=a.kbit_upcast, **kw)


def fp8_precision(a: argparse.Namespace) -> None:
    """--precision fp8 (fp4) with --fp8-recipe / --fp8-param-gather (--fp4-recipe /
    --fp4-param-gather) as one precision string (``ledger.frameworks.fp8.spell``), which
    the config carries; the flags need their --precision."""
    ends = tuple(getattr(a, "bf16_layers", None) or (0, 0))
    if any(ends) and getattr(a, "precision", None) not in ("fp8", "fp4"):
        raise LedgerError("bf16_layers", f"needs --precision fp8 or fp4, got --precision "
                                         f"{a.precision}")
    for w in ("fp8", "fp4"):
        recipe = getattr(a, f"{w}_recipe", None)
        gather = getattr(a, f"{w}_param_gather", False)
        if (recipe or gather) and getattr(a, "precision", None) != w:
            flag = f"{w}_recipe" if recipe else f"{w}_param_gather"
            raise LedgerError(flag, f"needs --precision {w}, got --precision {a.precision}")
        if getattr(a, "precision", None) == w:
            from ledger.frameworks import spell

            a.precision = spell(recipe, gather, w, ends)
