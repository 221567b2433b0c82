#!/usr/bin/env python3
"""The torchtitan tables ledger.io reads, regenerated from a torchtitan checkout with ast
(torchtitan is never imported):

    git --git-dir=TORCHTITAN.git archive COMMIT torchtitan | tar x -C SRC
    python tools/torchtitan_tables.py SRC COMMIT src/ledger/io/data/torchtitan_<COMMIT[:10]>.json

for the two TOML-era commits, f7084fc785 (v0.1.0) and 238fa9953e (v0.2.2 + 2, the parent of
9810191 which replaced the TOML files with Python registries).

JobConfig: every dataclass field reachable from ``class JobConfig`` (nested dataclasses become
dotted sections, e.g. quantize.linear.float8), with its default (literal, or "expr:<source>")
and file:line; plus the JobConfig extensions a job may name (``job.custom_config_module`` /
``experimental.custom_args_module``), section by section.

Flavours: each model's flavour dict (module-level ``{name: XModelArgs(...)}``) with the
args dataclass defaults filled in (nested MoEArgs / RoPEScalingArgs too) and the line of the
flavour. The sizes derived from them (FFN widths, MoE layers) are ledger.io.torchtitan.flavours',
written once there with the model code's lines.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

COMMITS = {
    "f7084fc785": {
        "jobconfig": "torchtitan/config_manager.py",
        "extensions": ["torchtitan/experiments/deepseek_v3/train_configs/custom_args.py",
                       "torchtitan/experiments/flux/job_config.py"],
        "models": {
            "llama3": ("torchtitan/models/llama3/__init__.py", "llama3_configs",
                       "torchtitan/models/llama3/model/args.py", "llama3"),
            "llama4": ("torchtitan/experiments/llama4/__init__.py", "llama4_configs",
                       "torchtitan/experiments/llama4/model/args.py", "llama4_v010"),
            "deepseek_v2 (experiments/deepseek_v3, own trainer train_ds_dev.py)": (
                "torchtitan/experiments/deepseek_v3/model_config.py",
                "deepseek_config_registry",
                "torchtitan/experiments/deepseek_v3/model_config.py", None),
        },
    },
    "238fa9953e": {
        "jobconfig": "torchtitan/config/job_config.py",
        "extensions": ["torchtitan/models/flux/job_config.py",
                       "torchtitan/experiments/vlm/job_config.py",
                       "torchtitan/experiments/transformers_modeling_backend/job_config.py",
                       "torchtitan/components/ft/config/job_config.py",
                       "torchtitan/experiments/simple_fsdp/job_config.py",
                       "torchtitan/experiments/autoparallel/job_config.py",
                       "torchtitan/experiments/compiler_toolkit/job_config.py",
                       "torchtitan/experiments/forge/job_config.py"],
        "models": {
            "llama3": ("torchtitan/models/llama3/__init__.py", "llama3_args",
                       "torchtitan/models/llama3/model/args.py", "llama3"),
            "llama3_ft": ("torchtitan/models/llama3_ft/__init__.py", None, None, "llama3"),
            "llama4": ("torchtitan/models/llama4/__init__.py", "llama4_args",
                       "torchtitan/models/llama4/model/args.py", "llama4"),
            "deepseek_v3": ("torchtitan/models/deepseek_v3/__init__.py", "deepseekv3_args",
                            "torchtitan/models/deepseek_v3/model/args.py", "deepseek_v3"),
            "qwen3": ("torchtitan/models/qwen3/__init__.py", "qwen3_args",
                      "torchtitan/models/qwen3/model/args.py", "qwen3"),
            "gpt_oss": ("torchtitan/models/gpt_oss/__init__.py", "gptoss_configs",
                        "torchtitan/models/gpt_oss/model/args.py", "gpt_oss"),
            "transformers_modeling_backend": (
                "torchtitan/experiments/transformers_modeling_backend/__init__.py", "flavors",
                "torchtitan/experiments/transformers_modeling_backend/model/args.py", None),
        },
        "moe_args": "torchtitan/models/moe/moe.py",
    },
}


def lit(node):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    # constant arithmetic such as 4096 * 4
    if all(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop))
           for n in ast.walk(node)):
        return eval(compile(ast.Expression(node), "<expr>", "eval"), {"__builtins__": {}})
    return "expr:" + ast.unparse(node)


def classes(tree):
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def field_default(v):
    """(default, source) of a dataclass field's right-hand side."""
    if v is None:
        return "MISSING", None
    if isinstance(v, ast.Call) and ast.unparse(v.func) in ("field", "dataclasses.field"):
        kw = {k.arg: k.value for k in v.keywords}
        if "default" in kw:
            return lit(kw["default"]), ast.unparse(kw["default"])
        if "default_factory" in kw:
            fac = kw["default_factory"]
            if isinstance(fac, ast.Lambda):
                return lit(fac.body), ast.unparse(fac)
            name = ast.unparse(fac)
            if name in ("list", "dict"):
                return ([] if name == "list" else {}), name + "()"
            return {"__factory__": name}, name + "()"
    return lit(v), ast.unparse(v)


def dataclass_fields(tree, cls: ast.ClassDef, path: str):
    out = {}
    body = cls.body
    for i, n in enumerate(body):
        if not (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)):
            continue
        d, dsrc = field_default(n.value)
        doc = None
        if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and \
                isinstance(body[i + 1].value, ast.Constant) and \
                isinstance(body[i + 1].value.value, str):
            doc = " ".join(body[i + 1].value.value.split())
        comment = None
        out[n.target.id] = {"type": ast.unparse(n.annotation), "default": d,
                            "line": f"{path}:{n.lineno}", "doc": doc}
        if dsrc is not None and isinstance(d, str) and d.startswith("expr:"):
            out[n.target.id]["default_src"] = dsrc
    return out


def jobconfig(root: Path, rel: str) -> dict:
    tree = ast.parse((root / rel).read_text())
    cls = classes(tree)
    sections = {}

    def walk(prefix: str, c: ast.ClassDef):
        fields = dataclass_fields(tree, c, rel)
        plain = {}
        for name, f in fields.items():
            t = f["type"]
            if isinstance(f["default"], dict) and "__factory__" in f["default"] and \
                    f["default"]["__factory__"] in cls:
                walk(f"{prefix}.{name}" if prefix else name, cls[f["default"]["__factory__"]])
            else:
                plain[name] = f
        if prefix:
            sections[prefix] = {"class": c.name, "line": f"{rel}:{c.lineno}", "fields": plain}

    walk("", cls["JobConfig"])
    return sections


def extension(root: Path, rel: str) -> dict:
    p = root / rel
    if not p.exists():
        return {"missing": True}
    tree = ast.parse(p.read_text())
    out = {}
    for name, c in classes(tree).items():
        out[name] = {"line": f"{rel}:{c.lineno}", "fields": dataclass_fields(tree, c, rel)}
    return out


# ---------------------------------------------------------------- flavours
def call_to_dict(node):
    if isinstance(node, ast.Call):
        d = {"__class__": ast.unparse(node.func)}
        for k in node.keywords:
            d[k.arg] = call_to_dict(k.value)
        return d
    return lit(node)


def arg_class_defaults(root: Path, files: list[str]) -> dict:
    """{ClassName: {field: default}} of the dataclasses in the given files."""
    out = {}
    for rel in files:
        p = root / rel
        if not p.exists():
            continue
        tree = ast.parse(p.read_text())
        for name, c in classes(tree).items():
            fs = dataclass_fields(tree, c, rel)
            if fs:
                out[name] = {"line": f"{rel}:{c.lineno}", "fields": fs}
    return out


def resolve(given: dict, defaults: dict) -> dict:
    cname = given.get("__class__")
    spec = defaults.get(cname, {}).get("fields", {})
    out = {}
    for k, f in spec.items():
        d = f["default"]
        if isinstance(d, dict) and "__factory__" in d:
            d = resolve({"__class__": d["__factory__"]}, defaults) \
                if d["__factory__"] in defaults else d
        out[k] = d
    for k, v in given.items():
        if k == "__class__":
            continue
        out[k] = resolve(v, defaults) if isinstance(v, dict) and "__class__" in v else v
    return out


def flavours(root: Path, spec: dict, moe_file: str | None) -> dict:
    out = {}
    for model, (init_rel, var, args_rel, kind) in spec.items():
        p = root / init_rel
        entry = {"init_file": init_rel}
        if var is None:
            entry["note"] = ("no flavour dict of its own: the train spec imports llama3_args (`from ..llama3 import llama3_args`) so flavours are llama3's")
            out[model] = entry
            continue
        tree = ast.parse(p.read_text())
        node = next((n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                     and var in [ast.unparse(t) for t in
                                 (n.targets if isinstance(n, ast.Assign) else [n.target])]),
                    None)
        files = [f for f in (args_rel, moe_file) if f]
        defaults = arg_class_defaults(root, files)
        # module-level ModelArgs(...) assigned to a name (model_config.py style)
        named = {}
        for n in tree.body:
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and \
                    len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                named[n.targets[0].id] = (n.value, n.lineno)
        entry.update({"dict": var, "dict_line": f"{init_rel}:{node.lineno}",
                      "args_classes": {k: v["line"] for k, v in defaults.items()},
                      "class_defaults": {k: {f: x["default"] for f, x in v["fields"].items()}
                                         for k, v in defaults.items()},
                      "flavours": {}})
        for k, v in zip(node.value.keys, node.value.values):
            name = lit(k)
            line = v.lineno
            if isinstance(v, ast.Name) and v.id in named:
                v, line = named[v.id]
                via = v
            given = call_to_dict(v)
            resolved = resolve(given, defaults)
            fl = {"line": f"{init_rel}:{line}", "given": given, "resolved": resolved}
            entry["flavours"][name] = fl
        out[model] = entry
    return out


def compact(jc: dict, fv: dict) -> dict:
    """What ledger.io reads: each section's keys with their defaults and lines, the
    extensions' sections, and each flavour's resolved arguments with its line."""
    def keys(fields):
        return {k: {"default": f["default"], "line": f["line"]} for k, f in fields.items()}

    ext = {}
    for rel, sections in jc["extensions"].items():
        ext[rel] = {name: keys(s["fields"]) for name, s in sections.items()}
    models = {}
    for name, m in fv["models"].items():
        if "flavours" not in m:
            models[name] = {"same_as": "llama3", "note": m.get("note", "")}
            continue
        models[name] = {"file": m["dict_line"], "classes": m["args_classes"],
                        "flavours": {f: dict(v["resolved"], line=v["line"])
                                     for f, v in m["flavours"].items()}}
    return {"repo": jc["repo"], "commit": jc["commit"], "file": jc["file"],
            "sections": {n: keys(s["fields"]) for n, s in jc["sections"].items()},
            "extensions": ext, "models": models}


def main(root: str, commit: str, out: str):
    short = commit[:10]
    cfg = COMMITS[short]
    r = Path(root)
    exts = {}
    for e in cfg["extensions"]:
        if (r / e).exists() and "class JobConfig" in (r / e).read_text():
            exts[e] = jobconfig(r, e)
    jc = {"repo": "pytorch/torchtitan", "commit": commit, "file": cfg["jobconfig"],
          "sections": jobconfig(r, cfg["jobconfig"]), "extensions": exts}
    fv = {"repo": "pytorch/torchtitan", "commit": commit,
          "models": flavours(r, cfg["models"], cfg.get("moe_args"))}
    Path(out).write_text(json.dumps(compact(jc, fv), indent=1, sort_keys=True, default=str)
                         + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
