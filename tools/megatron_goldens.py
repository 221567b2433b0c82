#!/usr/bin/env python3
"""Megatron-LM's functional-test cases and their measured memory, regenerated from a
Megatron-LM git directory (read with git; nothing of it is imported or run):

    python tools/megatron_goldens.py GIT_DIR src/ledger/validation/data/megatron_goldens.json.gz

written gzip-compressed (stdlib gzip, level 9, no time stamp or name in the header, so the
bytes are the same on every run; ``gunzip -c`` shows the JSON).

GIT_DIR is the ``fetch`` tool's mirror of github:NVIDIA/Megatron-LM
(/work/.mirror/NVIDIA+Megatron-LM/repo); the output names the commit it read (HEAD).

Kept for every case directory ``tests/functional_tests/test_cases/<family>/<case>/``:
- its ``model_config.yaml`` as written: ``MODEL_ARGS`` (each value the YAML's own text,
  PyYAML's BaseLoader: ``true`` is the string "true", a list a list of strings), ``ENV_VARS``,
  ``TEST_TYPE``, whether it has ``MODEL_ARGS_2`` (a resume run's second arguments) and which
  other top-level keys it has (``BEFORE_SCRIPT`` ...);
- of each ``golden_values_<environment>_<platform>.json`` that logs
  ``mem-max-allocated-bytes``: the last step logged with a number in both memory series,
  and the two figures there (``mem-max-allocated-bytes``, ``mem-allocated-bytes``); a
  golden that logs one ``mem-max-allocated-bytes`` figure and no steps (the inference
  tests) is kept with its figure, step and after-step bytes null;
- the world each (environment, platform) ran on: the recipe under
  ``tests/test_utils/recipes/`` that lists the case for that environment and platform (a
  product's ``platforms`` default to the spec's), ``spec.nodes x spec.gpus``; every recipe
  found is kept (``recipes``: its path, nodes, GPUs per node, world and the training script
  its ``TRAINING_SCRIPT_PATH`` names), none when no recipe lists it; and every recipe that
  lists the case at all, for any environment or platform (the case's ``recipes``); and
  every recipe file's own spec (the top-level ``recipes``: its model folder, nodes, GPUs,
  world and script).
The launch the harness makes of these (tests/functional_tests/shell_test_utils/
_run_training.sh) is the reader's rule (``ledger.validation.megatron_goldens``): the file
keeps the case as written.
"""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys

import yaml

CASES = "tests/functional_tests/test_cases"
RECIPES = "tests/test_utils/recipes"
MEM = ("mem-max-allocated-bytes", "mem-allocated-bytes")


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


def show(repo: str, path: str) -> str:
    return git(repo, "show", f"HEAD:{path}")


def _text(value):
    """A YAML value as the harness's yq hands it on: scalars as written, lists item by item."""
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {k: _text(v) for k, v in value.items()}
    return value


def worlds(repo: str, specs: dict | None = None
           ) -> dict[tuple[str, str, str, str], list[dict]]:
    """(family, case, environment, platform) -> the recipes that run it, with their world;
    ``specs`` gets every recipe's own (path -> model folder, nodes, GPUs, world, script)."""
    out: dict = {}
    specs = {} if specs is None else specs
    for path in git(repo, "ls-tree", "-r", "--name-only", "HEAD", RECIPES).split():
        if not path.endswith(".yaml"):
            continue
        doc = yaml.safe_load(show(repo, path))
        spec = (doc or {}).get("spec") or {}
        if not isinstance(spec, dict) or "model" not in spec or not doc.get("products"):
            continue
        world = int(spec.get("nodes", 1)) * int(spec.get("gpus", 0))
        script = re.search(r"TRAINING_SCRIPT_PATH=([^\"\s]+)", spec.get("script") or "")
        default = spec.get("platforms")
        specs[path] = dict(model=spec["model"], nodes=int(spec.get("nodes", 1)),
                           gpus_per_node=int(spec.get("gpus", 0)), world=world,
                           script=script.group(1) if script else None)
        for item in doc["products"]:
            for product in item.get("products") or []:
                platforms = product.get("platforms") or [default]
                for case in item.get("test_case") or []:
                    for env in product.get("environment") or []:
                        for plat in platforms:
                            out.setdefault((spec["model"], case, env, plat), []).append(
                                dict(recipe=path, nodes=int(spec.get("nodes", 1)),
                                     gpus_per_node=int(spec.get("gpus", 0)), world=world,
                                     script=script.group(1) if script else None))
    return out


def last_step(golden: dict) -> tuple[int, float, float] | None:
    """The last step with a number in both memory series, and the two figures there."""
    series = [golden.get(k) for k in MEM]
    if any(not isinstance(s, dict) or not isinstance(s.get("values"), dict) for s in series):
        return None
    steps = []
    for step, peak in series[0]["values"].items():
        after = series[1]["values"].get(step)
        if all(isinstance(v, (int, float)) and v == v for v in (peak, after)):
            steps.append((int(step), float(peak), float(after)))
    return max(steps) if steps else None


def main(repo: str, out_path: str) -> None:
    commit = git(repo, "rev-parse", "HEAD").strip()
    files = git(repo, "ls-tree", "-r", "--name-only", "HEAD", CASES).split()
    dirs: dict[str, list[str]] = {}
    unread = []  # golden files the rule cannot read, each with why (nothing dropped silently)
    for f in files:
        parts = f.split("/")
        if len(parts) == 6:
            dirs.setdefault("/".join(parts[3:5]), []).append(parts[5])
        elif parts[-1].startswith("golden_values"):
            unread.append(dict(file=f, why="not in a <family>/<case>/ folder"))
    specs: dict = {}
    runs = worlds(repo, specs)
    cases = []
    for name, names in sorted(dirs.items()):
        family, case = name.split("/")
        config = yaml.load(show(repo, f"{CASES}/{name}/model_config.yaml"),
                           Loader=yaml.BaseLoader) or {} if "model_config.yaml" in names else {}
        goldens = []
        for g in sorted(n for n in names if n.startswith("golden_values")):
            try:
                golden = json.loads(show(repo, f"{CASES}/{name}/{g}"))
            except json.JSONDecodeError:
                unread.append(dict(file=f"{CASES}/{name}/{g}", why="not JSON"))
                continue
            found = last_step(golden) if isinstance(golden, dict) else None
            peak = golden.get(MEM[0]) if isinstance(golden, dict) else None
            if found is None and isinstance(peak, (int, float)):  # one figure, no steps:
                found = (None, float(peak), None)  # the inference goldens
            if found is None:  # no memory series: not a memory golden, unless it has one
                if isinstance(golden, dict) and any(k in golden for k in MEM):
                    unread.append(dict(file=f"{CASES}/{name}/{g}",
                                       why="memory logged, no step with both figures"))
                continue
            stem = g.removeprefix("golden_values_").removesuffix(".json")
            env, _, platform = stem.partition("_")
            step, peak, after = found
            goldens.append(dict(file=g, environment=env, platform=platform, step=step,
                                max_allocated_bytes=peak, allocated_bytes=after,
                                recipes=runs.get((family, case, env,
                                                  platform.removesuffix("_2nd")), [])))
        if not goldens:
            continue
        args = config.get("MODEL_ARGS")
        anywhere = {(r["recipe"], r["world"], r["script"]): r for (fam, c, _, _), found
                    in runs.items() if (fam, c) == (family, case) for r in found}
        cases.append(dict(family=family, case=case,
                          path=f"{CASES}/{name}/model_config.yaml",
                          test_type=config.get("TEST_TYPE"),
                          model_args=_text(args) if isinstance(args, dict) else None,
                          env_vars=_text(config.get("ENV_VARS") or {}),
                          other_keys=sorted(k for k in config if k not in
                                            ("MODEL_ARGS", "ENV_VARS", "TEST_TYPE")),
                          recipes=[anywhere[k] for k in sorted(anywhere, key=str)],
                          goldens=goldens))
    doc = dict(source=dict(repo="NVIDIA/Megatron-LM", commit=commit, cases=CASES,
                           recipes=RECIPES,
                           harness="tests/functional_tests/shell_test_utils/_run_training.sh"),
               written_by="tools/megatron_goldens.py", recipes=specs, cases=cases,
               unread=unread)
    text = json.dumps(doc, indent=0, sort_keys=False) + "\n"
    with open(out_path, "wb") as fh:
        fh.write(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))


if __name__ == "__main__":
    main(*sys.argv[1:3])
