#!/usr/bin/env python3
"""The table of Megatron-LM's command-line flags that ledger.io reads, regenerated from a
Megatron-LM checkout with ast (megatron is never imported):

    git --git-dir=MEGATRON.git archive COMMIT megatron pretrain_gpt.py | tar x -C SRC
    python tools/megatron_arguments.py SRC COMMIT > src/ledger/io/data/megatron_arguments.json

Sources read:
  * megatron/training/arguments.py: every ``<group>.add_argument(...)`` inside the ``_add_*``
    functions that ``add_megatron_arguments`` calls, and every
    ``ArgumentGroupFactory(Config, exclude=[...]).build_group(...)``;
  * for each factory, the dataclass (and its dataclass bases) it names, with the rules of
    megatron/training/argument_utils.py ``ArgumentGroupFactory`` (flag = --field-name with
    dashes; Optional[X] -> X; list[X] -> nargs '+'; Literal -> choices; Enum -> choices by
    name; bool -> store_true when the default is False, else store_false under the names
    --no-<name> and --disable-<name>; field metadata "argparse_meta" overrides all);
  * megatron/post_training/arguments.py ``add_modelopt_args`` (pretrain_gpt.py passes it as
    extra_args_provider when nvidia-modelopt is installed), marked source "modelopt".

Each flag -> {takes_value, action, type, default, dest, nargs, choices, const, source, line,
group}: ``line`` is the add_argument call (or the factory's build_group call, with
``field`` the dataclass field's file:line); ``group`` the ``_add_*`` function. Non-literal
values are given as their source text, prefixed with "expr:".
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version",
                    "append_const"}


def lit(node):
    """A literal's value, or 'expr:<source>'."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return "expr:" + ast.unparse(node)


def src(node):
    return None if node is None else ast.unparse(node)


class Repo:
    def __init__(self, root: Path):
        self.root = root
        self._trees: dict[Path, ast.Module] = {}
        self._classes: dict[str, list[tuple[Path, ast.ClassDef]]] = {}
        for p in sorted((root / "megatron").rglob("*.py")):
            try:
                text = p.read_text()
            except UnicodeDecodeError:
                continue
            if "class " not in text:
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            self._trees[p] = tree
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self._classes.setdefault(node.name, []).append((p, node))

    def tree(self, rel: str) -> ast.Module:
        p = self.root / rel
        if p not in self._trees:
            self._trees[p] = ast.parse(p.read_text())
        return self._trees[p]

    def cls(self, name: str):
        hits = self._classes.get(name, [])
        # prefer a dataclass definition
        for p, c in hits:
            if any(src(d).split("(")[0].endswith("dataclass") for d in c.decorator_list):
                return p, c
        return hits[0] if hits else (None, None)

    def is_enum(self, name: str) -> bool:
        p, c = self.cls(name)
        if c is None:
            return False
        return any("Enum" in src(b) for b in c.bases)

    def enum_members(self, name: str):
        p, c = self.cls(name)
        return [t.id for n in c.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)]


def rel(repo: Repo, p: Path) -> str:
    return str(p.relative_to(repo.root))


# ---------------------------------------------------------------- dataclass fields
def dataclass_fields(repo: Repo, name: str, seen=None) -> list[dict]:
    """Fields in dataclasses.fields() order: bases first, a redefinition keeps its slot."""
    p, c = repo.cls(name)
    if c is None:
        raise KeyError(name)
    out: list[dict] = []
    for b in c.bases:
        bname = src(b).split(".")[-1]
        if bname in ("object", "Generic") or repo.cls(bname)[1] is None:
            continue
        out.extend(dataclass_fields(repo, bname))
    index = {f["name"]: i for i, f in enumerate(out)}
    for n in c.body:
        if not (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)):
            continue
        ann = src(n.annotation)
        if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar")):
            continue
        f = {"name": n.target.id, "annotation": n.annotation, "ann_src": ann,
             "file": rel(repo, p), "line": n.lineno, "cls": name, "init": True,
             "default": None, "default_src": None, "meta": None, "has_default": False}
        v = n.value
        if isinstance(v, ast.Call) and src(v.func) in ("field", "dataclasses.field"):
            kw = {k.arg: k.value for k in v.keywords}
            if "default" in kw:
                f["default"], f["default_src"], f["has_default"] = lit(kw["default"]), \
                    src(kw["default"]), True
            elif "default_factory" in kw:
                fac = kw["default_factory"]
                # default_factory() is called: list -> [], dict -> {}, lambda: X -> X
                if isinstance(fac, ast.Lambda):
                    f["default"] = lit(fac.body)
                elif src(fac) in ("list", "dict", "set", "tuple"):
                    f["default"] = {"list": [], "dict": {}, "set": [], "tuple": []}[src(fac)]
                else:
                    f["default"] = "expr:" + src(fac) + "()"
                f["default_src"], f["has_default"] = src(fac) + "()", True
            if "init" in kw:
                f["init"] = bool(lit(kw["init"]))
            if "metadata" in kw and isinstance(kw["metadata"], ast.Dict):
                for k, val in zip(kw["metadata"].keys, kw["metadata"].values):
                    if lit(k) == "argparse_meta" and isinstance(val, ast.Dict):
                        f["meta"] = {lit(mk): val2 for mk, val2 in zip(val.keys, val.values)}
        elif v is not None:
            f["default"], f["default_src"], f["has_default"] = lit(v), src(v), True
        if f["name"] in index:
            out[index[f["name"]]] = f
        else:
            index[f["name"]] = len(out)
            out.append(f)
    return out


def extract_type(repo: Repo, ann: ast.AST) -> dict:
    """argument_utils.ArgumentGroupFactory._extract_type on an annotation's AST."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        ann = ast.parse(ann.value, mode="eval").body
    if isinstance(ann, ast.Constant) and ann.value is None:
        return {"type": "NoneType"}
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):  # X | None
        right = ann.right
        if isinstance(right, ast.Constant) and right.value is None:
            return extract_type(repo, ann.left)
        raise TypeError(f"Unions not supported by argparse: {src(ann)}")
    if isinstance(ann, ast.Subscript):
        origin = src(ann.value).split(".")[-1]
        args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if origin == "Optional":
            return extract_type(repo, args[0])
        if origin == "Union":
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is None:
                return extract_type(repo, args[0])
            raise TypeError(f"Unions not supported by argparse: {src(ann)}")
        if origin in ("list", "List"):
            if len(args) != 1:
                raise TypeError(f"Multi-type lists not supported: {src(ann)}")
            k = extract_type(repo, args[0])
            k["nargs"] = "+"
            return k
        if origin == "Literal":
            vals = [lit(a) for a in args]
            return {"type": type(vals[0]).__name__, "choices": vals}
        raise TypeError(f"Unsupported type: {src(ann)}")
    name = src(ann)
    short = name.split(".")[-1]
    if repo.is_enum(short):
        return {"type": f"enum:{short}", "choices": repo.enum_members(short)}
    return {"type": name}


def factory_args(repo: Repo, cls_name: str, exclude: set[str], fn: str, line: int) -> list[dict]:
    out = []
    for f in dataclass_fields(repo, cls_name):
        if f["name"] in exclude or not f["init"]:
            continue
        names = ["--" + f["name"].replace("_", "-")]
        kw = {"dest": f["name"], "default": f["default"]}
        try:
            kw.update(extract_type(repo, f["annotation"]))
            if kw["type"] == "bool":
                kw["action"] = "store_true" if f["default"] is False else "store_false"
                # (the source compares default == False: None and True give store_false)
                kw.pop("type")
                if kw["action"] == "store_false":
                    names = ["--no-" + f["name"].replace("_", "-"),
                             "--disable-" + f["name"].replace("_", "-")]
        except TypeError as e:
            if f["meta"] is None:
                kw["type_error"] = str(e)
        if f["meta"]:
            for k, v in f["meta"].items():
                if k == "arg_names":
                    names = lit(v)
                elif k == "type":
                    kw["type"] = src(v)
                else:
                    kw[k] = lit(v)
        for n in names:
            out.append(entry(n, kw, source=f"factory:{cls_name}",
                             line=line, function=fn,
                             field=f"{f['file']}:{f['line']}",
                             all_names=names))
    return out


# ---------------------------------------------------------------- add_argument calls
def entry(flag, kw, source, line, function, field=None, all_names=None) -> dict:
    action = kw.get("action")
    if isinstance(action, str) and action.startswith("expr:"):
        action = action[5:]
    e = {"flag": flag}
    if action in NO_VALUE_ACTIONS:
        e["takes_value"] = False
    elif action in ("argparse.BooleanOptionalAction", "BooleanOptionalAction"):
        e["takes_value"] = False
    else:
        e["takes_value"] = True
    e["action"] = action or "store"
    for k in ("type", "default", "dest", "nargs", "choices", "const", "required",
              "type_error"):
        if k in kw:
            e[k] = kw[k]
    if "dest" not in e:
        e["dest"] = flag.lstrip("-").replace("-", "_")
    if e["action"] == "store_true" and "default" not in kw:
        e["default"] = False
    if e["action"] == "store_false" and "default" not in kw:
        e["default"] = True
    if e["takes_value"] and e.get("nargs") in ("?", "*"):
        e["value_optional"] = True
    e["source"], e["line"], e["function"] = source, line, function
    if field:
        e["field"] = field
    if all_names and len(all_names) > 1:
        e["aliases"] = [n for n in all_names if n != flag]
    return e


def call_args(call: ast.Call, source: str, fn: str, cond: str | None = None) -> list[dict]:
    names = [lit(a) for a in call.args if isinstance(a, ast.Constant)]
    names = [n for n in names if isinstance(n, str) and n.startswith("-")]
    action = next((src(k.value) for k in call.keywords if k.arg == "action"), "")
    if action.endswith("BooleanOptionalAction"):  # argparse adds --no-X for each --X
        names = names + ["--no-" + n[2:] for n in names if n.startswith("--")]
    kw = {}
    for k in call.keywords:
        if k.arg is None:
            continue
        if k.arg == "type":
            kw["type"] = src(k.value)
        elif k.arg == "action":
            v = lit(k.value)
            kw["action"] = v
        elif k.arg in ("default", "dest", "nargs", "choices", "const", "required"):
            kw[k.arg] = lit(k.value)
    if "dest" not in kw and names:
        long = next((n for n in names if n.startswith("--")), names[0])
        kw["dest"] = long.lstrip("-").replace("-", "_")
    out = [entry(n, kw, source, call.lineno, fn, all_names=names) for n in names]
    if cond:
        for e in out:
            e["only_if"] = cond
    return out


def walk_function(repo, fn_node: ast.FunctionDef, funcs: dict, source: str, out: list,
                  depth=0):
    # local list literals (e.g. exclude = [...]) for the factory's exclude=
    local_lists = {}
    cond_of = {}  # add_argument calls under an `if` of the function: the test's source
    for node in ast.walk(fn_node):
        if isinstance(node, ast.If):
            for sub in node.body:
                for c in ast.walk(sub):
                    cond_of.setdefault(c, src(node.test))
    calls = sorted((n for n in ast.walk(fn_node) if isinstance(n, (ast.Call, ast.Assign))),
                   key=lambda n: (n.lineno, n.col_offset))
    for n in calls:
        if isinstance(n, ast.Assign):
            if isinstance(n.value, (ast.List, ast.Tuple)) and len(n.targets) == 1 and \
                    isinstance(n.targets[0], ast.Name):
                local_lists[n.targets[0].id] = lit(n.value)
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr == "add_argument":
            out.extend(call_args(n, source, fn_node.name, cond_of.get(n)))
        elif src(f) == "ArgumentGroupFactory":  # the constructor; build_group adds them
            fac = n
            cls_name = src(fac.args[0])
            excl = set()
            for k in fac.keywords:
                if k.arg == "exclude":
                    v = lit(k.value)
                    if isinstance(v, str) and v.startswith("expr:"):
                        v = local_lists.get(v[5:], [])
                    excl = set(v or [])
            if len(fac.args) > 1:
                v = lit(fac.args[1])
                if isinstance(v, str) and v.startswith("expr:"):
                    v = local_lists.get(v[5:], [])
                excl = set(v or [])
            out.extend(factory_args(repo, cls_name, excl, fn_node.name, n.lineno))
        elif isinstance(f, ast.Name) and f.id in funcs and f.id.startswith("_add") and depth < 3:
            walk_function(repo, funcs[f.id], funcs, source, out, depth + 1)


def module_funcs(tree):
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def main(root: str, commit: str):
    repo = Repo(Path(root))
    args_tree = repo.tree("megatron/training/arguments.py")
    funcs = module_funcs(args_tree)
    out: list[dict] = []
    # add_megatron_arguments calls the _add_* functions in order
    top = funcs["add_megatron_arguments"]
    for n in sorted((c for c in ast.walk(top) if isinstance(c, ast.Call)),
                    key=lambda c: c.lineno):
        if isinstance(n.func, ast.Name) and n.func.id in funcs:
            walk_function(repo, funcs[n.func.id], funcs, "arguments.py", out)
    # a factory-built field and a hand-written flag of the same name: keep both, mark
    mo = module_funcs(repo.tree("megatron/post_training/arguments.py"))
    if "add_modelopt_args" in mo:
        walk_function(repo, mo["add_modelopt_args"], mo, "modelopt", out)
    flags: dict[str, dict] = {}
    dupes = []
    for e in out:
        f = e.pop("flag")
        if f in flags:
            dupes.append({"flag": f, "first": flags[f]["line"], "again": e["line"]})
            continue
        flags[f] = e
    keep = ("takes_value", "action", "type", "default", "dest", "nargs", "choices", "const",
            "source", "line", "field", "only_if")
    rows = []
    for f, e in sorted(flags.items()):
        row = {k: e[k] for k in keep if k in e}
        row["group"] = e["function"]
        rows.append(f" {json.dumps(f)}: {json.dumps(row, default=str, sort_keys=True)}")
    head = {"repo": "NVIDIA/Megatron-LM", "commit": commit,
            "files": {"arguments.py": "megatron/training/arguments.py",
                      "modelopt": "megatron/post_training/arguments.py",
                      "factory": "megatron/training/argument_utils.py (ArgumentGroupFactory)"},
            "parser": "argparse.ArgumentParser(allow_abbrev=False) (arguments.py:119-120)",
            "count": len(flags)}
    print("{" + json.dumps(head)[1:-1] + ', "duplicates": ' + json.dumps(dupes)
          + ', "flags": {\n' + ",\n".join(rows) + "\n}}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
