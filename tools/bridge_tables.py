#!/usr/bin/env python3
"""NVIDIA Megatron-Bridge's published pre-training tables as validation rows, regenerated
from a Megatron-Bridge git directory (read with git; nothing of it is imported or run):

    python tools/bridge_tables.py GIT_DIR src/ledger/validation/data/megatron_bridge.json

(the recipe readers are tools/bridge_recipes.py's).

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
26.04 -> 0.4.0, 26.06 -> 0.5.0; the patch containers as the docs' version switcher pairs
them, docs/versions1.json @ DOCS_REF: 26.02.01 -> 0.3.1 (L33; known-issues.md: r0.3.1),
26.04.01 -> 0.4.2 (L23, not 0.4.1: its B200 / B300 DeepSeek-V3 rows are v0.4.2's PP 8
configs, scripts/performance/configs/deepseek/deepseek_workload_base_configs.py, commit
a8b6cb3d "b200 DSv3 better cfg"), 26.06.01 -> 0.5.1 (L13); 26.08 -> v0.6.0 (L7), the first
tag after the 26.08 summary). Three formats: 0.1.0rc3's YAML ``perf_matrix``, 0.2-0.5's
``WorkloadBaseConfig`` presets (``replace(BASE, k=v)`` chains, evaluated here with ast, the
dataclass defaults read from utils/utils.py), 0.6's flat recipe functions. For 0.2-0.6 the
GPU's recipe function is read too (``recipe.pretrain``, a key of the document's
``recipe_functions``, for 0.2-0.5; the row's ``settings`` for 0.6): its
``cfg.<section>.<field> = value`` assignments in order, helpers of the same modules expanded,
Megatron-Bridge's CUDA-graph helpers (utils/cuda_graph.py ``set_cuda_graph_modules``,
``clear_cuda_graph_modules``, ``set_full_iteration_cuda_graph``) as the fields they set under
the Megatron-Core the release pins, each call kept with its file and line and the helper's
(``graph_helpers``), and so is another perf recipe a function starts from
(``cfg = other_config()``: DeepSeek-V4 Flash's GB300 recipe runs its GB200 one, Nemotron 3.5
Lightning's Nano's, Nemotron 3 Ultra's GB300 one a shared builder), the last unconditional
one winning, those under an ``if`` kept with their condition (``conditional``). The precision a row ran (``recipe.precision``): Megatron-Bridge's
mixed_precision.py function for it at the release, with the perf script's overrides
(get_precision_config: scripts/performance/utils/precision.py from v0.3.0, utils/helpers.py
before it). The library recipes those functions start from
(megatron.bridge.recipes.*) are not read.

THE RULE where table and recipe disagree: the table's published figures (GPU count, GBS, MBS,
sequence length, TP, PP, CP, VP, EP, FSDP) are what ran and are used; the recipe supplies only
what the table does not state; every disagreement is kept in the row (``disagree``). Among a
recipe's variants (V1 / V2 ...) for the row's model, GPU and precision, the one agreeing with
the table on most of those figures is taken; a tie goes to the launcher's default variant
(scripts/performance/argument_parser.py: "v2", else "v1").
"""
from __future__ import annotations

import json
import re
import sys

from bridge_recipes import (FLAT_STATED, GPUS, MODELS, PRECISIONS, RELEASE_REF, REPO, STATED,
                            _norm, git, match_preset, precision_recipe, recipe_function, show,
                            workload_presets, yaml_recipe)

DOCS_REF = "067f987df03b8355b03192d88d70f1709fedf51a"
DOCS = ("docs/performance-summary.md", "docs/performance-summary-archive.md")

COLUMNS = {"System": "system", "Model": "model", "#-GPUs": "gpus", "Precision": "precision",
           "GBS": "gbs", "MBS": "mbs", "Sequence Length": "seq_len", "FSDP": "fsdp", "TP": "tp",
           "PP": "pp", "CP": "cp", "VP": "vp", "EP": "ep", "GA": "ga",
           "Tokens / sec / GPU": "tokens_per_s_per_gpu",
           "Model TFLOP / sec / GPU": "model_tflops_per_gpu"}


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
            if got.get("graph_helpers"):
                recipe["graph_helpers"] = got["graph_helpers"]
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
