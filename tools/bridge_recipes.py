#!/usr/bin/env python3
"""Megatron-Bridge's recipes as ``tools/bridge_tables.py`` reads them, with git and ast (nothing
of Megatron-Bridge is imported or run): the 0.2-0.5 ``WorkloadBaseConfig`` presets, the 0.1
YAML ``perf_matrix``, the recipe functions of 0.2-0.6 (their ``cfg.<section>.<field>``
assignments, helpers expanded) and the precision each row ran (mixed_precision.py)."""
from __future__ import annotations

import ast
import re
import subprocess

import yaml

REPO = "NVIDIA-NeMo/Megatron-Bridge"

# each table release -> the Megatron-Bridge version its container ships: the docs' own
# version switcher at the tables' commit pairs them (docs/versions1.json L7-48 @ 067f987d:
# "0.4.2 · 26.04.01" L23, "0.5.1 · 26.06.01" L13, "0.3.1 · 26.02.01" L33; "0.1.0 · 25.09"
# read at its last rc tag, v0.1.0rc3)
RELEASE_REF = {"25.09": "v0.1.0rc3", "25.11": "v0.2.0", "26.02": "v0.3.0", "26.02.01": "v0.3.1",
               "26.04": "v0.4.0", "26.04.01": "v0.4.2", "26.06": "v0.5.0", "26.06.01": "v0.5.1",
               "26.08": "v0.6.0"}

GPUS = {"DGX-GB300": "gb300", "DGX-GB200": "gb200", "DGX-B300": "b300", "DGX-B200": "b200",
        "DGX-H100": "h100"}

# table name -> (model key, recipe token of 0.2-0.5 presets, 0.6 function prefix, 0.1 yaml file)
MODELS = {
    "LLAMA3_8B": ("llama3-8b", "LLAMA3_8B", "llama3_8b", "llama3/llama3_8b_llm_pretrain.yaml"),
    "LLAMA3_70B": ("llama3-70b", "LLAMA3_70B", "llama3_70b",
                   "llama3/llama3_70b_llm_pretrain.yaml"),
    "LLAMA3.1_405B": ("llama3.1-405b", "LLAMA31_405B", "llama31_405b",
                      "llama31/llama31_405b_llm_pretrain.yaml"),
    "DeepSeekV3": ("deepseek-v3", "DEEPSEEK_V3", "deepseek_v3",
                   "deepseek/deepseek_v3_llm_pretrain.yaml"),
    "DeepSeekV4 Flash": ("deepseek-v4-flash", "DEEPSEEK_V4_FLASH", "deepseek_v4_flash", None),
    "GPT OSS 120B": ("gpt-oss-120b", "GPT_OSS_120B", "gpt_oss_120b", None),
    "Qwen3_30B_a3B": ("qwen3-30b-a3b", "QWEN3_30B_A3B", "qwen3_30b_a3b",
                      "qwen3/qwen3_30b_a3b_llm_pretrain.yaml"),
    "Qwen3_235B_a22B": ("qwen3-235b-a22b", "QWEN3_235B_A22B", "qwen3_235b_a22b",
                        "qwen3/qwen3_235b_a22b_llm_pretrain.yaml"),
    "Kimi_K2": ("kimi-k2", "KIMI_K2", "kimi_k2", None),
    "Nemotron_3_Nano": ("nemotron-3-nano", "NEMOTRON_3_NANO", "nemotron_3_nano", None),
    "Nemotron_3_Super": ("nemotron-3-super", "NEMOTRON_3_SUPER", "nemotron_3_super", None),
    "Nemotron_3_Ultra": ("nemotron-3-ultra", "NEMOTRON_3_ULTRA", "nemotron_3_ultra", None),
    "Nemotron_3_5_Lightning": ("nemotron-3.5-lightning", "NEMOTRON_3_5_LIGHTNING",
                               "nemotron_3_5_lightning", None),
}

PRECISIONS = {"BF16": "bf16", "FP8": "fp8_cs", "FP8-CS": "fp8_cs", "FP8-MX": "fp8_mx",
              "MXFP8": "fp8_mx", "NVFP4": "nvfp4"}

# recipe field -> row field, for the figures the table states
STATED = {"num_gpus": "gpus", "global_batch_size": "gbs", "micro_batch_size": "mbs",
          "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
          "context_parallel_size": "cp", "virtual_pipeline_model_parallel_size": "vp",
          "expert_model_parallel_size": "ep"}


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True,
                          text=True).stdout


def show(gitdir: str, ref: str, path: str) -> str | None:
    try:
        return git(gitdir, "show", f"{ref}:{path}")
    except subprocess.CalledProcessError:
        return None


# ---------------------------------------------------------------- recipes: 0.2 - 0.5

def _literal(node, env):
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id][0]
        return "expr:" + ast.unparse(node)


def workload_presets(gitdir: str, ref: str) -> dict[str, tuple[dict, str, int]]:
    """Every preset of every *workload_base_configs.py at ref: name -> (fields, path, line)."""
    utils = show(gitdir, ref, "scripts/performance/utils/utils.py")
    defaults = {}
    for node in ast.walk(ast.parse(utils)):
        if isinstance(node, ast.ClassDef) and node.name == "WorkloadBaseConfig":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and item.value is not None:
                    defaults[item.target.id] = _literal(item.value, {})
    presets = {}
    files = [p for p in git(gitdir, "ls-tree", "-r", "--name-only", ref,
                            "scripts/performance/configs").split()
             if p.endswith("workload_base_configs.py")]
    for path in files:
        env: dict[str, tuple[dict, str, int]] = {}
        for node in ast.parse(show(gitdir, ref, path)).body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                continue
            name, value = node.targets[0].id, node.value
            if isinstance(value, ast.Name) and value.id in env:
                env[name] = (env[value.id][0], path, node.lineno)
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                kw = {k.arg: _literal(k.value, env) for k in value.keywords if k.arg}
                if value.func.id == "WorkloadBaseConfig":
                    env[name] = ({**defaults, **kw}, path, node.lineno)
                elif value.func.id == "replace" and isinstance(value.args[0], ast.Name) \
                        and value.args[0].id in env:
                    env[name] = ({**env[value.args[0].id][0], **kw}, path, node.lineno)
        presets.update(env)
    return presets


def _score(fields: dict, row: dict) -> int:
    return sum(1 for rk, key in STATED.items() if rk in fields and
               _norm(key, fields[rk]) == _norm(key, row[key]))


def _norm(key, value):
    if key == "vp" and (value is None or value == 1):
        return None
    return value


def match_preset(presets: dict, row: dict) -> tuple[str, tuple] | None:
    token = MODELS[row["table_model"]][1]
    prec = row["precision"].upper()
    gpu = row["gpu"].upper()
    cands = []
    for name, val in presets.items():
        if not re.match(rf"^{token}_", name) or any(t in name for t in
                                                   ("FINETUNE", "SFT", "LORA", "PEFT")):
            continue
        if re.search(rf"(^|_){gpu}_{prec}(_|$)", name):
            cands.append((name, val))
    if not cands:
        return None

    def variant(name):
        m = re.search(r"_V(\d+)$", name)
        return int(m.group(1)) if m else 0
    best = max(cands, key=lambda c: (_score(c[1][0], row), variant(c[0]) == 2,
                                     variant(c[0]) == 1, variant(c[0]) == 0))
    return best


# ---------------------------------------------------------------- recipes: 0.1 yaml

def yaml_recipe(gitdir: str, ref: str, row: dict):
    rel = MODELS[row["table_model"]][3]
    if rel is None:
        return None
    path = f"scripts/performance/configs/{rel}"
    text = show(gitdir, ref, path)
    if text is None:
        return None
    doc = yaml.safe_load(text)
    entry = doc.get("perf_matrix", {}).get(row["gpu"], {}).get(f"num_gpus_{row['gpus']}")
    if entry is None:
        return None
    key = {"fp8_cs": "fp8_cs", "fp8_mx": "fp8_mx", "fp8_sc": "fp8_ss", "bf16": "bf16"}[
        row["precision"]]
    fields = dict(entry.get("common") or {})
    fields.update(entry.get(key) or {})
    line = next((i for i, s in enumerate(text.splitlines(), 1)
                 if s.strip() == f"{row['gpu']}:"), None)
    ren = {"num_gpus_per_node": "gpus_per_node", "gbs": "global_batch_size",
           "mbs": "micro_batch_size", "tp": "tensor_model_parallel_size",
           "pp": "pipeline_model_parallel_size", "cp": "context_parallel_size",
           "vp": "virtual_pipeline_model_parallel_size", "ep": "expert_model_parallel_size",
           "etp": "expert_tensor_parallel_size", "fsdp": "use_megatron_fsdp"}
    fields = {ren.get(k, k): v for k, v in fields.items()}
    fields["num_gpus"] = row["gpus"]
    model_cfg = doc.get("ConfigContainer", {})
    return (f"perf_matrix.{row['gpu']}.num_gpus_{row['gpus']}.common+{key}", fields, path, line,
            {"ConfigContainer": model_cfg})


# ---------------------------------------------------------------- recipe functions

PREC_06 = {"bf16": "bf16", "fp8_cs": "fp8cs", "fp8_mx": "fp8mx", "nvfp4": "nvfp4",
           "fp8_sc": "fp8sc"}


def _functions(text: str, path: str | None = None) -> dict[str, ast.FunctionDef]:
    """A module's top-level functions by name, each marked with its file (``source_path``)."""
    out = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    for n in out.values():
        n.source_path = path
    return out


def _callee(funcs: dict, name: str) -> tuple[ast.FunctionDef, dict]:
    """A callable name's function and the names its body calls: an imported recipe
    function's are its own module's (``_module_functions``), the rest share ``funcs``."""
    found = funcs[name]
    return found if isinstance(found, tuple) else (found, funcs)


# Megatron-Bridge's CUDA-graph helpers (src/megatron/bridge/utils/cuda_graph.py, from v0.5.0;
# called by the 0.6 perf recipes) -> the model fields each sets, as the Megatron-Core the
# release pins has them: v0.6.0's 3rdparty/Megatron-LM is cd4afffa, whose
# megatron/core/transformer/enums.py L61 defines CudaGraphModule and transformer_config.py
# L1047 cuda_graph_modules (the old cuda_graph_scope, L1086-1092, migrated into it at
# L2383-2406), so each helper takes its cuda_graph_modules branch: set_cuda_graph_modules
# (L77-86 @ v0.6.0) the modules it is given, scope None; clear_cuda_graph_modules (L89-92) none;
# set_full_iteration_cuda_graph (L95-105) impl full_iteration, no modules, scope None.
# The recipe's own call line and the helper's def line at the ref are kept in the row
# (``graph_helpers``).
GRAPH_HELPER_PATH = "src/megatron/bridge/utils/cuda_graph.py"


def _graph_modules(node) -> list | str:
    """A literal module list as names (``CudaGraphModule.attn`` -> "attn"), else "expr:..."."""
    if isinstance(node, (ast.List, ast.Tuple)):
        names = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str)
                 else e.attr if isinstance(e, ast.Attribute) else None for e in node.elts]
        if None not in names:
            return names
    value = _literal(node, {})
    return [value] if isinstance(value, str) and not value.startswith("expr:") else value


GRAPH_HELPERS = {
    "set_cuda_graph_modules": lambda call: [
        ("model.cuda_graph_modules", _graph_modules(call.args[1])),
        ("model.cuda_graph_scope", None)],
    "clear_cuda_graph_modules": lambda call: [
        ("model.cuda_graph_modules", []), ("model.cuda_graph_scope", None)],
    "set_full_iteration_cuda_graph": lambda call: [
        ("model.cuda_graph_impl", "full_iteration"), ("model.cuda_graph_modules", []),
        ("model.cuda_graph_scope", None)],
}


def bound(fn: ast.FunctionDef, call: ast.Call | None, env: dict) -> dict:
    """A helper's parameters as ``_literal``'s environment (name -> (value,)): its literal
    defaults, then the call's literal arguments, positional and keyword, by name - 0.6's
    DeepSeek-V3 recipes pass their choices as keywords
    (``_enable_deepseek_full_iteration_mxfp8(cfg, fp8_dot_product_attention=True,
    fp8_output_proj=True)``, perf_recipes/deepseek/gb300/deepseek_v3.py L157 @ v0.6.0, whose
    body assigns ``cfg.model.fp8_output_proj = fp8_output_proj``, common.py L49-82). A
    parameter whose value is not a literal stays unbound (its uses stay "expr:...")."""
    a = fn.args
    out = {}
    positional = a.posonlyargs + a.args
    for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
        out[arg.arg] = default
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        if default is not None:
            out[arg.arg] = default
    if call is not None:
        out |= {arg.arg: node for arg, node in zip(positional, call.args)}
        out |= {k.arg: k.value for k in call.keywords if k.arg is not None}
    values = {name: _literal(node, env) for name, node in out.items()}
    return {name: (v,) for name, v in values.items()
            if not (isinstance(v, str) and v.startswith("expr:"))}


def expand(fn: ast.FunctionDef, funcs: dict, cond: str = "", depth: int = 0,
           env: dict | None = None) -> list:
    """The ``cfg.<section>.<field> = value`` assignments a recipe function makes, in order,
    helpers of the same modules called with ``cfg`` expanded in place (3 deep, each with
    its parameters bound to the call's literal arguments: ``bound``), and so is
    another recipe function it starts from (``cfg = other_config()``, 0.6's DeepSeek-V4 Flash
    GB300 recipe running its GB200 one), and Megatron-Bridge's CUDA-graph helpers
    (``GRAPH_HELPERS``) as the fields they set, each followed by a ("graph helper", where)
    step: a list of (field, value, line, condition, function). Values are literals or
    "expr:<source>"."""
    out = []
    env = {} if env is None else env

    def walk(body, cond):
        for st in body:
            if isinstance(st, ast.If):
                test = ast.unparse(st.test)
                walk(st.body, f"{cond} and {test}" if cond else test)
                walk(st.orelse, f"{cond} and not ({test})" if cond else f"not ({test})")
            elif isinstance(st, (ast.For, ast.With, ast.Try)):
                walk(st.body, cond or "in a loop / block")
            elif isinstance(st, ast.Assign) and len(st.targets) == 1:
                t = ast.unparse(st.targets[0])
                start = st.value.func.id if isinstance(st.value, ast.Call) and \
                    isinstance(st.value.func, ast.Name) else None
                if t == "cfg" and start in funcs and depth < 3:
                    callee, scope = _callee(funcs, start)
                    out.extend(expand(callee, scope, cond, depth + 1,
                                      bound(callee, st.value, env)))
                elif t.startswith("cfg.") and t != "cfg.env_vars":
                    out.append((t[4:], _literal(st.value, env), st.lineno, cond, fn.name))
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                call = st.value
                name = call.func.id if isinstance(call.func, ast.Name) else None
                uses_cfg = any(isinstance(a, ast.Name) and a.id == "cfg" or
                               isinstance(a, ast.Attribute) and ast.unparse(a).startswith("cfg")
                               for a in call.args)
                if name in funcs and uses_cfg and depth < 3:
                    callee, scope = _callee(funcs, name)
                    out.extend(expand(callee, scope, cond, depth + 1, bound(callee, call, env)))
                elif name in GRAPH_HELPERS and call.args and \
                        ast.unparse(call.args[0]) == "cfg.model":
                    for field_, value in GRAPH_HELPERS[name](call):
                        out.append((field_, value, st.lineno, cond, fn.name))
                    out.append(("graph helper", {
                        "call": name, "path": getattr(fn, "source_path", None),
                        "function": fn.name, "line": st.lineno}, st.lineno, cond, fn.name))
                elif name and name.endswith("pipeline_model_parallel_layout") and \
                        len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
                    out.append(("model.pipeline_model_parallel_layout", call.args[1].value,
                                st.lineno, cond, fn.name))
                elif name and uses_cfg:
                    out.append((f"call {name}", "not expanded", st.lineno, cond, fn.name))
    walk(fn.body, cond)
    return out


def condense(steps: list) -> tuple[dict, dict]:
    """(unconditional field -> value, the last assignment winning; conditional field ->
    [value, condition]) of ``expand``'s list (its graph-helper calls left to
    ``graph_helpers``)."""
    plain, cond = {}, {}
    for field_, value, _line, c, _fn in steps:
        if field_ == "graph helper":
            continue
        if c:
            cond.setdefault(field_, []).append([value, c])
        else:
            plain[field_] = value
    return plain, cond


def graph_helpers(gitdir: str, ref: str, steps: list, cache: dict) -> list[dict]:
    """Each CUDA-graph helper call among ``expand``'s steps: where the recipe calls it
    (path, function, line, its condition if any) and the helper's def at the ref."""
    if not any(s[0] == "graph helper" for s in steps):
        return []
    text = cache.setdefault(("text", ref, GRAPH_HELPER_PATH), show(gitdir, ref, GRAPH_HELPER_PATH))
    defs = {n.name: n.lineno for n in ast.parse(text).body
            if isinstance(n, ast.FunctionDef)} if text else {}
    out = []
    for field_, where, _line, c, _fn in steps:
        if field_ == "graph helper":
            if where["call"] not in defs:
                raise SystemExit(f"{where['call']} is not defined in {GRAPH_HELPER_PATH} at {ref}")
            out.append({**where, **({"condition": c} if c else {}),
                        "helper": {"path": GRAPH_HELPER_PATH, "line": defs[where["call"]]}})
    return out


def recipe_function(gitdir: str, ref: str, row: dict, cache: dict):
    """The recipe function a row's run went through and what it sets: 0.2-0.5's
    scripts/performance/configs/*/<model>_..._pretrain.py function for the GPU (with its
    set_*_common_configs), 0.6's flat perf_recipes function for the GPU and precision."""
    prefix = MODELS[row["table_model"]][2]
    if ref.startswith("v0.6"):
        names = [f"{prefix}_pretrain_{row['gpus']}gpu_{row['gpu']}_"
                 f"{PREC_06[row['precision']]}_config"]
        root = "src/megatron/bridge/perf_recipes"
    else:
        names = [f"{prefix}_pretrain_config_{row['gpu']}", f"{prefix}_{row['gpu']}_config"]
        root = "scripts/performance/configs"
    files = cache.setdefault(("files", ref, root), [
        p for p in git(gitdir, "ls-tree", "-r", "--name-only", ref, root).split()
        if p.endswith(".py")])
    for path in files:
        text = cache.setdefault(("text", ref, path), show(gitdir, ref, path))
        hit = next((n for n in names if f"def {n}(" in text), None)
        if hit is None:
            continue
        funcs = _module_functions(gitdir, ref, path, files, cache) if ref.startswith("v0.6") \
            else _functions(text, path)
        steps = expand(funcs[hit], funcs)
        plain, cond = condense(steps)
        helpers = graph_helpers(gitdir, ref, steps, cache)
        return {"path": path, "function": hit, "line": funcs[hit].lineno,
                "settings": plain, "conditional": cond,
                **({"graph_helpers": helpers} if helpers else {})}
    return None


def _module_functions(gitdir: str, ref: str, path: str, files: list, cache: dict) -> dict:
    """What a 0.6 perf-recipe module calls by name: the helpers of its package's common.py
    and of perf_recipes/_common.py, the recipe functions it imports from other perf-recipe
    modules (each as (function, its own module's names)), and its own functions. The library
    recipes (megatron.bridge.recipes.*) are not among them: not read."""
    if ("names", ref, path) in cache:
        return cache[("names", ref, path)]
    funcs = cache[("names", ref, path)] = {}
    root, package = "src/megatron/bridge/perf_recipes", path.rsplit("/", 2)[0]
    shared = (f"{package}/common.py", f"{root}/_common.py")
    for extra in shared:
        if extra in files:
            funcs.update(_functions(cache.setdefault(("text", ref, extra),
                                                     show(gitdir, ref, extra)), extra))
    text = cache.setdefault(("text", ref, path), show(gitdir, ref, path))
    for node in ast.parse(text).body:
        other = "src/" + (node.module or "").replace(".", "/") + ".py" \
            if isinstance(node, ast.ImportFrom) else ""
        if other.startswith(root + "/") and other in files and other not in shared + (path,):
            names = _module_functions(gitdir, ref, other, files, cache)
            for alias in node.names:
                if alias.name in names:
                    found = names[alias.name]
                    funcs[alias.asname or alias.name] = found if isinstance(found, tuple) \
                        else (found, names)
    funcs.update(_functions(text, path))
    return funcs


# the row's precision -> Megatron-Bridge's MixedPrecisionConfig function the perf scripts
# take for it (scripts/performance/utils/precision.py get_precision_config)
PRECISION_FUNCTION = {"bf16": "bf16_mixed", "fp8_cs": "bf16_with_fp8_current_scaling_mixed",
                      "fp8_mx": "bf16_with_mxfp8_mixed",
                      "fp8_sc": "bf16_with_fp8_subchannel_scaling_mixed",
                      "nvfp4": "bf16_with_nvfp4_mixed"}


def precision_recipe(gitdir: str, ref: str, row: dict, cache: dict) -> dict | None:
    """What the row's precision sets (src/megatron/bridge/training/mixed_precision.py's
    function at ref: its ``cfg.<field> = literal`` lines), with the perf script's own
    overrides of it (``<name>.<field> = literal`` in the branch for that precision of
    get_precision_config: scripts/performance/utils/precision.py from v0.3.0, utils/
    helpers.py before it - v0.2.0 L35-40 branches on ``compute_dtype == "fp8_cs"``,
    v0.1.0rc3 L92-100 on ``fp8_recipe == "cs"`` inside ``compute_dtype == "fp8"``)."""
    path = "src/megatron/bridge/training/mixed_precision.py"
    text = cache.setdefault(("text", ref, path), show(gitdir, ref, path))
    name = PRECISION_FUNCTION[row["precision"]]
    fn = _functions(text).get(name) if text else None
    if fn is None:
        return None
    settings = {ast.unparse(st.targets[0])[4:]: _literal(st.value, {})
                for st in fn.body if isinstance(st, ast.Assign) and len(st.targets) == 1
                and ast.unparse(st.targets[0]).startswith("cfg.")}
    out = {"path": path, "function": name, "line": fn.lineno, "settings": settings}
    for perf in ("scripts/performance/utils/precision.py",
                 "scripts/performance/utils/helpers.py"):
        ptext = cache.setdefault(("text", ref, perf), show(gitdir, ref, perf))
        tree = ast.parse(ptext) if ptext else None
        fns = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
               and f.name == "get_precision_config"] if tree else []
        if not fns:
            continue
        for node in ast.walk(fns[0]):
            if isinstance(node, ast.If) and _names_precision(node.test, row["precision"]):
                over = {ast.unparse(st.targets[0]).split(".", 1)[1]: _literal(st.value, {})
                        for st in node.body if isinstance(st, ast.Assign)
                        and isinstance(st.targets[0], ast.Attribute)}
                if over:
                    out["perf_overrides"] = {"path": perf, "line": node.lineno, **over}
                    settings.update(over)
                break
        break
    return out


def _names_precision(test, precision: str) -> bool:
    """Whether an ``if`` of get_precision_config is the branch for ``precision``: its test
    names the table's label (``compute_dtype == "fp8_cs"``), or - v0.1.0rc3's nested form -
    compares ``fp8_recipe`` with the label's recipe part (``fp8_recipe == "cs"``)."""
    text = ast.unparse(test)
    if precision in text:
        return True
    part = precision.split("_", 1)[1] if precision.startswith("fp8_") else None
    return bool(part) and "fp8_recipe" in text and f"'{part}'" in text


FLAT_STATED = {"model.tensor_model_parallel_size": "tp",
               "model.pipeline_model_parallel_size": "pp",
               "model.context_parallel_size": "cp",
               "model.virtual_pipeline_model_parallel_size": "vp",
               "model.expert_model_parallel_size": "ep", "train.global_batch_size": "gbs",
               "train.micro_batch_size": "mbs"}
