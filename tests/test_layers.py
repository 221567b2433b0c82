"""The packages import one way: down the order written in ``ledger/__init__``'s docstring.

The graph is read from the code (every ``import`` and ``from ... import`` in every module,
at any depth - a function-level import is an import too), so a layer that reaches up, or
two modules that import each other, fail here instead of drifting in silently.
"""
import ast
import re
from pathlib import Path

import ledger

SRC = Path(ledger.__file__).parent


def layer_order() -> list[str]:
    """The units named at the start of each indented line of the docstring's order."""
    order = []
    for line in ledger.__doc__.splitlines():
        m = re.match(r"^    (\w+(?: \w+)*?)\s{2,}\S", line)
        if m:
            order.extend(m.group(1).split())
    return order


def unit(module: str) -> str:
    """The layer a dotted module belongs to: its first name below ``ledger``
    (``python -m ledger`` runs the CLI, so ``ledger.__main__`` is the CLI's)."""
    name = module.split(".")[1] if "." in module else module
    return "cli" if name == "__main__" else name


def imports(path: Path, name: str) -> set[str]:
    """Every ``ledger.*`` module this file imports (relative imports resolved)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("ledger.")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = name.split(".")[:-node.level] if not path.name == "__init__.py" \
                    else name.split(".")[:len(name.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if base == "ledger":  # from ledger import x: x is a module or a root name
                out |= {f"ledger.{a.name}" for a in node.names
                        if (SRC / a.name).exists() or (SRC / f"{a.name}.py").exists()}
            elif base.startswith("ledger."):  # a submodule by name, or names of a module
                folder = SRC.joinpath(*base.split(".")[1:])
                subs = {f"{base}.{a.name}" for a in node.names
                        if (folder / f"{a.name}.py").exists() or (folder / a.name).is_dir()}
                out |= subs | ({base} if len(subs) < len(node.names) else set())
    return out


def modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__")
        out[name] = p
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: {i for i in imports(p, m) if i != m} for m, p in mods.items() if m != "ledger"}


def violations(g: dict[str, set[str]], order: list[str]) -> list[str]:
    rank = {u: i for i, u in enumerate(order)}
    bad = []
    for m, deps in sorted(g.items()):
        for d in sorted(deps):
            if rank[unit(d)] > rank[unit(m)]:
                bad.append(f"{m} imports {d}: {unit(d)} sits above {unit(m)}")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            w = w if w in g else next((k for k in g if w.startswith(k + ".")), w)
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_order_names_every_unit_once():
    order = layer_order()
    assert len(order) == len(set(order))
    assert order[0] == "errors" and {"model", "config", "system", "cli"} <= set(order)
    units = {unit(m) for m in graph()}
    assert units == set(order), (units ^ set(order))


def test_imports_point_down_the_order():
    assert violations(graph(), layer_order()) == []


def test_no_module_imports_in_a_circle():
    assert cycles(graph()) == []


def test_an_upward_import_is_caught():
    """The check itself can fail: one import from the specs up to the planner is named."""
    g = graph()
    g["ledger.config"] = g["ledger.config"] | {"ledger.plan.search"}
    assert violations(g, layer_order()) == [
        "ledger.config imports ledger.plan.search: plan sits above config"]


def test_a_cycle_is_caught():
    g = {"ledger.a": {"ledger.b"}, "ledger.b": {"ledger.a"}, "ledger.c": set()}
    assert cycles(g) == [["ledger.a", "ledger.b"]]


def test_each_package_says_what_it_is():
    for init in SRC.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 20, init


def test_no_module_is_named_after_its_folder():
    for p in SRC.rglob("*.py"):
        assert not p.stem.startswith(p.parent.name + "_"), p


def test_modules_stay_short():
    """The standard's bound: a module of the core is at most 400 lines (one concept each;
    the hook warns past it), so an overgrown module is split, not let drift."""
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
