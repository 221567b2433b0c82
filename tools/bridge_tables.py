#!/usr/bin/env python3
"""NVIDIA Megatron-Bridge's published pre-training tables as validation rows, regenerated
from a Megatron-Bridge git directory (read with git; nothing of it is imported or run):

    python tools/bridge_tables.py GIT_DIR src/ledger/validation/data/megatron_bridge.json

GIT_DIR is the ``fetch`` tool's mirror of github:NVIDIA-NeMo/Megatron-Bridge
(/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo). The output names the commit it read.

Tables: ``docs/performance-summary.md`` (26.08) and ``docs/performance-summary-archive.md``
(26.06.01 back to 25.09) at DOCS_REF, the newest text (it carries NVIDIA's later typo fixes),
each row with its file and line. Only "Pre-Training Performance" sections; SFT and LoRA skipped.
A cell "a (b)" is two published figures: the row is split in two, the second taking the
parenthesised values (and every unparenthesised setting of the row; a measured figure
without parentheses is not published for the second row: null). What the second row's
precision is, is said by the table: 25.11's header "FP8-CS (FP8-MX)"; 25.09's footnote (the
parenthesised figures are MXFP8, 32x32 blocks, on GB200 / B200 and DeepSeek-V3's 128x128 /
1x128 blockwise FP8 on H100). 25.09 states no precision: its main figures are taken as FP8
current scaling (FP8-CS), the precision 25.11 names for the same layouts. "FP8" in 26.x
tables is FP8-CS (the recipes' ``fp8_cs``; 25.11 names the same Llama rows FP8-CS).

Recipes: each release's recipe is read at the Megatron-Bridge version its container ships
(docs/releases/software-versions.md: 25.09 -> 0.1.0rc3, 25.11 -> 0.2.0, 26.02 -> 0.3.0,
26.04 -> 0.4.0, 26.06 -> 0.5.0; the patch containers XX.YY.01 -> 0.N.1, as
docs/releases/known-issues.md says of 26.02.01 = r0.3.1; 26.08 -> v0.6.0, the first tag after
the 26.08 summary). Three formats: 0.1.0rc3's YAML ``perf_matrix``, 0.2-0.5's
``WorkloadBaseConfig`` presets (``replace(BASE, k=v)`` chains, evaluated here with ast, the
dataclass defaults read from utils/utils.py), 0.6's flat recipe functions. For 0.2-0.6 the GPU's recipe function is read too (``recipe.pretrain``
for 0.2-0.5, the row's ``settings`` for 0.6): its ``cfg.<section>.<field> = value``
assignments in order, helpers of the same modules expanded, the last unconditional one
winning, those under an ``if`` kept with their condition (``conditional``).

THE RULE where table and recipe disagree: the table's published figures (GPU count, GBS, MBS,
sequence length, TP, PP, CP, VP, EP, FSDP) are what ran and are used; the recipe supplies only
what the table does not state; every disagreement is kept in the row (``disagree``). Among a
recipe's variants (V1 / V2 ...) for the row's model, GPU and precision, the one agreeing with
the table on most of those figures is taken; a tie goes to the launcher's default variant
(scripts/performance/argument_parser.py: "v2", else "v1").
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import yaml

REPO = "NVIDIA-NeMo/Megatron-Bridge"
DOCS_REF = "067f987df03b8355b03192d88d70f1709fedf51a"
DOCS = ("docs/performance-summary.md", "docs/performance-summary-archive.md")

RELEASE_REF = {"25.09": "v0.1.0rc3", "25.11": "v0.2.0", "26.02": "v0.3.0", "26.02.01": "v0.3.1",
               "26.04": "v0.4.0", "26.04.01": "v0.4.1", "26.06": "v0.5.0", "26.06.01": "v0.5.1",
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

# table column -> row field
COLUMNS = {"System": "system", "Model": "model", "#-GPUs": "gpus", "Precision": "precision",
           "GBS": "gbs", "MBS": "mbs", "Sequence Length": "seq_len", "FSDP": "fsdp", "TP": "tp",
           "PP": "pp", "CP": "cp", "VP": "vp", "EP": "ep", "GA": "ga",
           "Tokens / sec / GPU": "tokens_per_s_per_gpu",
           "Model TFLOP / sec / GPU": "model_tflops_per_gpu"}
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


# ---------------------------------------------------------------- tables

def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _split(cell: str) -> tuple[str, str | None]:
    m = re.fullmatch(r"(.*?)\s*\(([^)]*)\)\s*", cell)
    if m:
        return m.group(1).strip(), m.group(2).strip()
    return cell, None


def _number(text: str):
    text = re.sub(r"\[\^[^\]]*\]", "", text).strip()
    if text.lower() in ("n/a", "", "-"):
        return None
    return int(text) if re.fullmatch(r"\d+", text) else float(text)


def parse_tables(text: str, path: str) -> list[dict]:
    rows, release, section, group, header = [], None, None, None, None
    notes = dict(re.findall(r"^\[\^([^\]]+)\]:\s*(.*)$", text, flags=re.M))
    for n, line in enumerate(text.splitlines(), 1):
        if m := re.match(r"^## (\S+) NeMo Container", line):
            release, section, header = m.group(1), None, None
        elif line.startswith("### "):
            section, header = line[4:].strip(), None
        elif m := re.match(r"^#### (Model|System): (.+)$", line):
            group, header = (m.group(1).lower(), m.group(2).strip()), None
        elif line.startswith("|") and release and section == "Pre-Training Performance":
            cells = _cells(line)
            if header is None:
                header = [COLUMNS[c] for c in cells]
                continue
            if set(line) <= set("|-: "):
                continue
            rows += _row(dict(zip(header, cells)), release, group, path, n, notes)
    return rows


def _row(raw: dict, release: str, group, path: str, line: int, notes: dict) -> list[dict]:
    raw = dict(raw)
    raw[group[0]] = group[1]
    name = raw["model"]
    m = re.fullmatch(r"(.+?)\s*\((.+)\)", name)
    table_name, variant = (m.group(1), m.group(2)) if m else (name, None)
    foot = [notes[k] for cell in raw.values() for k in re.findall(r"\[\^([^\]]+)\]", cell)]
    main, alt, has_alt = {}, {}, False
    for key, cell in raw.items():
        if key == "model":
            main[key] = alt[key] = cell
            continue
        a, b = _split(cell)
        main[key] = a
        # a measured figure without its parenthesised twin was not published for the twin
        measured = key in ("tokens_per_s_per_gpu", "model_tflops_per_gpu")
        alt[key] = b if b is not None else ("n/a" if measured else a)
        has_alt |= b is not None
    out = []
    for k, vals in enumerate([main, alt] if has_alt else [main]):
        gpu = GPUS[vals["system"]]
        label = vals.get("precision")
        if label is None:  # 25.09: no precision column (see the module docstring)
            label = "FP8-CS" if k == 0 else ("FP8 blockwise 128x128" if gpu == "h100"
                                            else "FP8-MX")
        prec = PRECISIONS.get(label, "fp8_sc" if "blockwise" in label else None)
        fsdp = _number(vals["fsdp"]) if "fsdp" in vals else None
        row = {
            "release": release, "table_model": table_name, "model": MODELS[table_name][0],
            "model_variant": variant, "system": vals["system"], "gpu": gpu,
            "gpus": _number(vals["gpus"]), "precision_published": label, "precision": prec,
            "gbs": _number(vals["gbs"]), "mbs": _number(vals["mbs"]),
            "seq_len": _number(vals["seq_len"]), "tp": _number(vals["tp"]),
            "pp": _number(vals["pp"]), "cp": _number(vals["cp"]),
            "vp": _number(vals["vp"]), "ep": _number(vals["ep"]) or 1,
            "etp": None, "fsdp": bool(fsdp), "ga": _number(vals["ga"]) if "ga" in vals else None,
            "tokens_per_s_per_gpu": _number(vals["tokens_per_s_per_gpu"]),
            "model_tflops_per_gpu": _number(vals["model_tflops_per_gpu"]),
            "published_as": "parenthesised figure" if k else "figure",
            "notes": foot,
            "source": {"repo": REPO, "path": path, "commit": DOCS_REF, "line": line},
        }
        if row["vp"] is not None and row["vp"] <= 1:
            row["vp"] = None  # 25.09 / 25.11 write VP 1 for no interleaving
        out.append(row)
    return out


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


def _functions(text: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}


def expand(fn: ast.FunctionDef, funcs: dict, cond: str = "", depth: int = 0) -> list:
    """The ``cfg.<section>.<field> = value`` assignments a recipe function makes, in order,
    helpers of the same modules called with ``cfg`` expanded in place (3 deep): a list of
    (field, value, line, condition, function). Values are literals or "expr:<source>"."""
    out = []

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
                if t.startswith("cfg.") and t != "cfg.env_vars":
                    out.append((t[4:], _literal(st.value, {}), st.lineno, cond, fn.name))
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                call = st.value
                name = call.func.id if isinstance(call.func, ast.Name) else None
                uses_cfg = any(isinstance(a, ast.Name) and a.id == "cfg" or
                               isinstance(a, ast.Attribute) and ast.unparse(a).startswith("cfg")
                               for a in call.args)
                if name in funcs and uses_cfg and depth < 3:
                    out.extend(expand(funcs[name], funcs, cond, depth + 1))
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
    [value, condition]) of ``expand``'s list."""
    plain, cond = {}, {}
    for field_, value, _line, c, _fn in steps:
        if c:
            cond.setdefault(field_, []).append([value, c])
        else:
            plain[field_] = value
    return plain, cond


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
        funcs = {}
        package = path.rsplit("/", 2)[0] if ref.startswith("v0.6") else None
        for extra in ([f"{package}/common.py", f"{root}/_common.py"] if package else []):
            if extra in files:
                funcs.update(_functions(cache.setdefault(("text", ref, extra),
                                                         show(gitdir, ref, extra))))
        funcs.update(_functions(text))
        steps = expand(funcs[hit], funcs)
        plain, cond = condense(steps)
        return {"path": path, "function": hit, "line": funcs[hit].lineno,
                "settings": plain, "conditional": cond}
    return None


# the row's precision -> Megatron-Bridge's MixedPrecisionConfig function the perf scripts
# take for it (scripts/performance/utils/precision.py get_precision_config)
PRECISION_FUNCTION = {"bf16": "bf16_mixed", "fp8_cs": "bf16_with_fp8_current_scaling_mixed",
                      "fp8_mx": "bf16_with_mxfp8_mixed",
                      "fp8_sc": "bf16_with_fp8_subchannel_scaling_mixed",
                      "nvfp4": "bf16_with_nvfp4_mixed"}


def precision_recipe(gitdir: str, ref: str, row: dict, cache: dict) -> dict | None:
    """What the row's precision sets (src/megatron/bridge/training/mixed_precision.py's
    function at ref: its ``cfg.<field> = literal`` lines), with the perf script's own
    overrides of it (scripts/performance/utils/precision.py: ``<name>.<field> = literal``
    in the branch for that precision)."""
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
    perf = "scripts/performance/utils/precision.py"
    ptext = cache.setdefault(("text", ref, perf), show(gitdir, ref, perf))
    if ptext:
        for node in ast.walk(ast.parse(ptext)):
            if isinstance(node, ast.If) and row["precision"] in ast.unparse(node.test):
                over = {ast.unparse(st.targets[0]).split(".", 1)[1]: _literal(st.value, {})
                        for st in node.body if isinstance(st, ast.Assign)
                        and isinstance(st.targets[0], ast.Attribute)}
                if over:
                    out["perf_overrides"] = {"path": perf, "line": node.lineno, **over}
                    settings.update(over)
                break
    return out


FLAT_STATED = {"model.tensor_model_parallel_size": "tp",
               "model.pipeline_model_parallel_size": "pp",
               "model.context_parallel_size": "cp",
               "model.virtual_pipeline_model_parallel_size": "vp",
               "model.expert_model_parallel_size": "ep", "train.global_batch_size": "gbs",
               "train.micro_batch_size": "mbs"}


# ---------------------------------------------------------------- join

def attach_recipe(gitdir: str, row: dict, cache: dict) -> None:
    ref = RELEASE_REF[row["release"]]
    commit = cache.setdefault(("commit", ref), git(gitdir, "rev-list", "-n", "1", ref).strip())
    recipe = {"repo": REPO, "ref": ref, "commit": commit}
    disagree = {}
    if ref.startswith("v0.1"):
        got = yaml_recipe(gitdir, ref, row)
        if got:
            name, fields, path, line, extra = got
            recipe.update(config=name, path=path, line=line, settings=fields, **extra)
            for rk, key in STATED.items():
                if rk in fields and rk != "num_gpus" and \
                        _norm(key, fields[rk]) != _norm(key, row[key]):
                    disagree[key] = {"table": row[key], "recipe": fields[rk]}
            if "use_megatron_fsdp" in fields and bool(fields["use_megatron_fsdp"]) != row["fsdp"]:
                disagree["fsdp"] = {"table": row["fsdp"], "recipe": fields["use_megatron_fsdp"]}
    elif ref.startswith("v0.6"):
        got = recipe_function(gitdir, ref, row, cache)
        if got:
            fields = got["settings"]
            recipe.update(config=got["function"], path=got["path"], line=got["line"],
                          settings=fields, conditional=got["conditional"])
            for rk, key in FLAT_STATED.items():
                if rk in fields and _norm(key, fields[rk]) != _norm(key, row[key]):
                    disagree[key] = {"table": row[key], "recipe": fields[rk]}
    else:
        presets = cache.setdefault(("presets", ref), None) or workload_presets(gitdir, ref)
        cache[("presets", ref)] = presets
        fn = recipe_function(gitdir, ref, row, cache)
        if fn:  # kept once in the document's "recipe_functions", named here
            key = f"{ref}:{fn['path']}:{fn['function']}"
            cache.setdefault("functions", {})[key] = {"commit": commit, **fn}
            recipe["pretrain"] = key
        got = match_preset(presets, row)
        if got:
            name, (fields, path, line) = got
            recipe.update(config=name, path=path, line=line, settings=fields)
            for rk, key in STATED.items():
                if rk in fields and _norm(key, fields[rk]) != _norm(key, row[key]):
                    disagree[key] = {"table": row[key], "recipe": fields[rk]}
            if fields.get("use_megatron_fsdp") is not None and \
                    bool(fields["use_megatron_fsdp"]) != row["fsdp"]:
                disagree["fsdp"] = {"table": row["fsdp"], "recipe": fields["use_megatron_fsdp"]}
    etp = (recipe.get("settings") or {})
    etp = etp.get("expert_tensor_parallel_size", etp.get("model.expert_tensor_parallel_size"))
    row["etp"] = etp if isinstance(etp, int) else None
    recipe["precision"] = precision_recipe(gitdir, ref, row, cache)
    row["table_inconsistent"] = _inconsistent(row)
    if "config" not in recipe:
        recipe["config"] = None
        recipe["missing"] = "no recipe entry for this model / GPU / precision / GPU count at ref"
    row["recipe"] = recipe
    row["disagree"] = disagree


def _inconsistent(row: dict) -> list[str]:
    """Where the table's own figures contradict each other (kept; the row's GBS, MBS and
    parallel sizes are still the ones used, GA is derived from them)."""
    out = []
    model_ranks = row["tp"] * row["pp"] * row["cp"]
    if row["gpus"] % model_ranks:
        return [f"TP x PP x CP = {model_ranks} does not divide {row['gpus']} GPUs"]
    dp = row["gpus"] // model_ranks
    if row["gbs"] % (row["mbs"] * dp):
        out.append(f"GBS {row['gbs']} is not a multiple of MBS {row['mbs']} x DP {dp}")
    elif row["ga"] is not None and row["ga"] != row["gbs"] // (row["mbs"] * dp):
        out.append(f"GA {row['ga']} published; GBS / (MBS x DP) = {row['gbs']} / "
                   f"({row['mbs']} x {dp}) = {row['gbs'] // (row['mbs'] * dp)}")
    folded = dp * row["cp"] * row["tp"]
    if row["ep"] > 1 and folded % (row["ep"] * (row["etp"] or 1)):
        out.append(f"EP {row['ep']} x ETP {row['etp'] or 1} does not divide DP x CP x TP = "
                   f"{folded} (Megatron folds the expert group into those ranks): the row "
                   f"cannot run as published")
    return out


def main(gitdir: str, out: str) -> None:
    rows = []
    for path in DOCS:
        rows += parse_tables(show(gitdir, DOCS_REF, path), path)
    cache: dict = {}
    seen: dict[str, int] = {}
    for row in rows:
        attach_recipe(gitdir, row, cache)
        base = (f"{row['release']}/{row['gpu']}/{row['model']}/{row['precision']}/"
                f"{row['gpus']}g/gbs{row['gbs']}/mbs{row['mbs']}")
        seen[base] = seen.get(base, 0) + 1
        row["id"] = base if seen[base] == 1 else f"{base}#{seen[base]}"
    doc = {
        "source": {"repo": REPO, "docs_commit": DOCS_REF, "docs": list(DOCS),
                   "release_refs": RELEASE_REF, "generator": "tools/bridge_tables.py"},
        "rule": ("table over recipe: the table's GPU count, GBS, MBS, sequence length, TP, PP, "
                 "CP, VP, EP and FSDP are used; the recipe (at the release's Megatron-Bridge "
                 "version) supplies only what the table does not state; disagreements are kept "
                 "per row in 'disagree'"),
        "rows": [{"id": r.pop("id"), **r} for r in rows],
        "recipe_functions": dict(sorted(cache.get("functions", {}).items())),
    }
    with open(out, "w") as f:  # one row / one recipe function a line: diffs stay readable
        f.write("{\n")
        for key in ("source", "rule"):
            f.write(f"{json.dumps(key)}: {json.dumps(doc[key])},\n")
        f.write('"rows": [\n' + ",\n".join(json.dumps(r) for r in doc["rows"]) + "\n],\n")
        f.write('"recipe_functions": {\n' + ",\n".join(
            f"{json.dumps(k)}: {json.dumps(v)}" for k, v in doc["recipe_functions"].items())
            + "\n}\n}\n")
    print(f"{len(rows)} rows -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
