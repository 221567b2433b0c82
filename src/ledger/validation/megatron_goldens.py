"""Megatron-LM's functional tests as memory validation rows: every test case whose golden
values log ``mem-max-allocated-bytes``, its launch read as a user's launch file is read.

The cases live in ``data/megatron_goldens.json.gz`` (gzip of the JSON), written by
``tools/megatron_goldens.py`` from NVIDIA/Megatron-LM at the commit it names: each case's
``model_config.yaml`` as written (MODEL_ARGS, ENV_VARS, TEST_TYPE), each golden file's
last step logged with both memory figures, and the recipes (tests/test_utils/recipes/)
that run it, with their world and training script.

What is measured (memory.py's definitions): ``mem-max-allocated-bytes`` is the allocator's
``allocated_bytes.all.peak`` since the process started, ``mem-allocated-bytes`` what is
allocated after the step (megatron/training/training.py L3436-3447 @d98e8a64), both logged
by the last rank only (global_vars.py L234-241: the TensorBoard writer lives on rank
world - 1, the last pipeline stage) - the ledger's last pipeline rank's ``allocated_bytes``
and its state plus the buffers kept for the run.

One rule for every golden, never chosen per case nor with the measured figure in view
(the reason a golden is left out is kept with it, ``Golden.skip``):
- a training golden: per-step series (the inference tests log one peak and no step);
- environment ``dev`` (the current container; ``lts`` is the long-term-support one);
- a platform with a GPU preset (``PLATFORM_GPUS``: dgx_h100 and dgxh100_dgxc H100 SXM,
  dgx_a100 A100 80GB, dgx_gb200 GB200); ``_2nd`` files are a resumed run's second half,
  which loads the first half's checkpoint;
- a run that loads no checkpoint before it trains: TEST_TYPE regular, ckpt-resume and
  frozen-resume (their first run starts with an empty load path), not release, frozen-start
  or checkpoint-consistency (run_ci_test.sh L262-273 @d98e8a64); a ckpt-resume or
  frozen-resume golden is its first run's figures (L401-405: FIRST_RUN_TENSORBOARD_PATH
  is the repeat's run_1);
- the recipe that runs the case on that environment and platform gives the world
  (nodes x gpus) and the training script; else every recipe of the case in the platform's
  own recipe folder (h100/ for dgx_h100 and dgx_a100, gb200/ for dgx_gb200), if they
  agree; a case no recipe runs at this commit (its golden kept from an earlier one) takes
  its family's own recipe file there (h100/gpt.yaml, gb200/moe.yaml ...: ``world_assumed``).
  The script must be pretrain_gpt.py, the launch the reader reads;
- the launch: MODEL_ARGS made words as the harness makes them (``launch_words``), its
  environment the harness's exports (``HARNESS_ENV``) under the case's ENV_VARS;
- the vocabulary: a GPT2BPETokenizer (named, or pretrain_gpt.py's default) reading a GPT-2
  BPE vocab.json holds GPT-2's 50,257 tokens (``GPT2_BPE_TOKENS``), given beside the file as
  ``--vocab-size`` and padded as Megatron pads it; NullTokenizer / TikTokenizer read their
  --vocab-size; any other tokenizer's size is in files the case does not ship: unstated;
- the figures at the golden's last step logged (the tool keeps only that step).
The reader's refusals and what it names as not modelled (the row marked approximate) are
the reader's, as for a user's file (``ledger.cli.goldens`` runs each launch on report's path).
"""
from __future__ import annotations

import gzip
import json
import shlex
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ledger.frameworks.megatron_tokenizers import PRETRAIN_GPT_DEFAULTS, SIZED_TOKENIZERS
from ledger.validation.memory import PLATFORM_GPUS

DATA = "megatron_goldens.json.gz"  # gzip-compressed JSON (tools/megatron_goldens.py)
ENVIRONMENT = "dev"
# TEST_TYPEs whose measured (first) run starts from no checkpoint (run_ci_test.sh L262-273;
# the first run is the one measured, L401-405)
FRESH = ("regular", "ckpt-resume", "frozen-resume")
SCRIPT = "pretrain_gpt.py"
# the recipe folder of a platform's machines (tests/test_utils/recipes/)
RECIPES = "tests/test_utils/recipes"
RECIPE_FOLDER = {"dgx_h100": "h100", "dgx_a100": "h100", "dgxh100_dgxc": "h100",
                 "dgx_gb200": "gb200"}
# what _run_training.sh exports before the case's ENV_VARS (L58-66 @d98e8a64), which it
# exports after them (L75-83): a case's own value wins
HARNESS_ENV = {"NCCL_PROTO": "simple", "NCCL_ALGO": "Ring", "NCCL_COLLNET_ENABLE": "0",
               "NCCL_NVLS_ENABLE": "0", "NCCL_BUFFSIZE": "4194304",
               "TORCH_NCCL_AVOID_RECORD_STREAMS": "1"}
# not kept: NCCL_TUNER_PLUGIN (L63, exported empty so that no tuner plugin overrides the
# NCCL_ALGO / NCCL_PROTO above, which are named as not modelled already) - it changes no
# byte the ledger prices
# GPT-2's byte-level BPE: 50,257 tokens in its encoder / vocab.json (openai/gpt-2
# src/encoder.py; the n_vocab of its hparams.json), memory.py's megatron_moe() rule
GPT2_BPE_TOKENS = 50257


@dataclass(frozen=True)
class Golden:
    """One golden file's figures at its last step, and how the rule reads its case."""

    family: str  # the test_cases folder: gpt, moe, mixtral, bert, ...
    case: str
    path: str  # model_config.yaml in the source repository
    file: str  # the golden values file
    environment: str
    platform: str
    step: int | None  # None: an inference golden, one figure and no steps
    max_allocated_bytes: float
    allocated_bytes: float | None
    test_type: str | None
    world: int | None
    script: str | None
    words: tuple[str, ...]  # the launch's arguments, as the harness passes them
    env: tuple[tuple[str, str], ...]  # the environment pretrain_gpt.py gets
    vocab: int | None  # a tokenizer size given beside the launch (--vocab-size), or None
    skip: str = ""  # why the rule leaves it out ("" when it goes to the reader)
    world_assumed: bool = False  # the world and script of the family's recipe file

    @property
    def gpu(self) -> str | None:
        return PLATFORM_GPUS.get(self.platform)

    @property
    def label(self) -> str:
        return f"{self.family}/{self.case} {self.platform}"


@lru_cache(maxsize=None)
def document() -> dict:
    data = resources.files("ledger.validation").joinpath(f"data/{DATA}").read_bytes()
    return json.loads(gzip.decompress(data).decode("utf-8"))


def unread() -> list[tuple[str, str]]:
    """(golden file, why) of each golden file the tool could not read: not JSON, memory
    logged with no step holding both figures, or outside a <family>/<case>/ folder."""
    return [(u["file"], u["why"]) for u in document().get("unread", [])]


def source() -> str:
    s = document()["source"]
    return f"{s['repo']}@{s['commit'][:8]} {s['cases']}"


def launch_words(model_args: dict) -> tuple[str, ...]:
    """MODEL_ARGS as _run_training.sh L121-166 @d98e8a64 hands them to the trainer (yq's
    ``explode``: a ``<<`` merge's keys under the mapping's own): ``true`` -> the bare flag;
    an empty value -> left out; ``(...)`` -> one word; ``[a b]`` -> the brackets dropped
    and the words split, as its ``eval`` splits them; a value with a space, ``|``, ``(`` or
    ``)`` -> one word; any other value -> one word. A YAML list is yq's text of it,
    ``[a, b]``, read by the same rule."""
    merged = model_args.get("<<")
    args = ({**merged} if isinstance(merged, dict) else {}) | \
        {k: v for k, v in model_args.items() if k != "<<"}
    out: list[str] = []
    for flag, value in args.items():
        if isinstance(value, list):
            value = "[" + ", ".join(map(str, value)) + "]"
        value = "" if value is None else str(value).strip()
        if value == "true":
            out.append(flag)
        elif value.startswith("[") and value.endswith("]") and "]" not in value[1:-1]:
            out += [flag, *value[1:-1].split()]
        elif value:
            out += [flag, value]
    return tuple(out)


def tokenizer_vocab(args: dict) -> tuple[int | None, str]:
    """(the size to give beside the launch, or None; why it is unstated, or "")."""
    kind = args.get("--tokenizer-type") or PRETRAIN_GPT_DEFAULTS["tokenizer_type"]
    if kind in SIZED_TOKENIZERS:
        return None, "" if args.get("--vocab-size") else f"{kind} without --vocab-size"
    if args.get("--padded-vocab-size"):
        return None, ""
    files = str(args.get("--vocab-file") or args.get("--tokenizer-model") or "")
    if kind == "GPT2BPETokenizer" and files.endswith("bpe/vocab.json"):
        return GPT2_BPE_TOKENS, ""
    return None, f"vocab unstated: {kind} reads {files or 'no file'}"


def _recipe(case: dict, golden: dict) -> tuple[dict | None, str]:
    """The recipe that states the golden's world and script (the rule's fourth point)."""
    own = golden["recipes"]
    folder = RECIPE_FOLDER.get(golden["platform"])
    if not own:
        own = [r for r in case["recipes"] if r["recipe"].split("/")[-2] == folder]
    if not own:  # a golden no recipe runs at this commit: its family's own recipe file
        spec = document()["recipes"].get(f"{RECIPES}/{folder}/{case['family']}.yaml")
        own = [spec | {"recipe": f"{RECIPES}/{folder}/{case['family']}.yaml",
                       "assumed": True}] if spec else []
    runs = {(r["world"], r["script"]) for r in own}
    if len(runs) == 1:
        return own[0], ""
    return None, ("no recipe at this commit runs it: world unstated" if not runs else
                  f"recipes disagree on its world: {sorted(runs, key=str)}")


def _skip(case: dict, golden: dict, recipe: dict | None, why_world: str,
          why_vocab: str) -> str:
    platform, kind = golden["platform"], case["test_type"]
    if golden["step"] is None:
        return "one peak and no training step (an inference test)"
    if not case["model_args"]:
        return "no MODEL_ARGS (no model_config.yaml)"
    if golden["environment"] != ENVIRONMENT:
        return f"{golden['environment']} container (the rule takes {ENVIRONMENT})"
    if platform.endswith("_2nd"):
        return "a resumed run's second half: loads the first half's checkpoint"
    if platform.startswith("dgxa100_dracooci"):  # an A100 cluster; 40 or 80 GB not stated
        return f"platform {platform}: an A100 whose memory (40 or 80 GB) is not stated"
    if platform not in PLATFORM_GPUS:
        return f"platform {platform or 'unnamed'}: no GPU preset"
    if kind not in FRESH:
        return f"TEST_TYPE {kind}: loads a checkpoint before it trains"
    if recipe is None:
        return why_world
    if recipe["script"] != SCRIPT:
        return f"trained by {recipe['script']}, not {SCRIPT}"
    return why_vocab


def goldens() -> list[Golden]:
    """Every golden file of the data that logs the memory figures, each with the rule's
    reading (``skip`` says why one is left out)."""
    out = []
    for case in document()["cases"]:
        args = case["model_args"] or {}
        vocab, why_vocab = tokenizer_vocab(args)
        env = dict(HARNESS_ENV) | {k: str(v) for k, v in case["env_vars"].items()}
        for g in case["goldens"]:
            recipe, why_world = _recipe(case, g)
            out.append(Golden(
                family=case["family"], case=case["case"], path=case["path"], file=g["file"],
                environment=g["environment"], platform=g["platform"], step=g["step"],
                max_allocated_bytes=g["max_allocated_bytes"],
                allocated_bytes=g["allocated_bytes"], test_type=case["test_type"],
                world=recipe["world"] if recipe else None,
                script=recipe["script"] if recipe else None, words=launch_words(args),
                env=tuple(sorted(env.items())), vocab=vocab,
                skip=_skip(case, g, recipe, why_world, why_vocab),
                world_assumed=bool(recipe and recipe.get("assumed"))))
    return out


def command(g: Golden, path: str) -> str:
    """The launch as ``--from-megatron`` takes it: the environment, then the flags file."""
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in g.env), shlex.quote(path)])


def flags_text(g: Golden) -> str:
    """The launch's arguments as a file of bare flags."""
    return " ".join(shlex.quote(w) for w in g.words) + "\n"


@dataclass(frozen=True)
class Priced:
    """A golden the reader read, with the ledger's figures for the last rank."""

    golden: Golden
    metric: str  # "allocated" (mem-max-allocated-bytes) or "resident" (after the step)
    measured: float
    ledger: float
    unpriced: tuple[str, ...]  # what the launch sets that the ledger does not model
    groups: tuple[str, ...]  # the family and the features the summary groups it by

    @property
    def error(self) -> float:
        return (self.ledger - self.measured) / self.measured

    @property
    def approximate(self) -> bool:
        return bool(self.unpriced)


def summary(rows: list[Priced]) -> dict:
    """mean |error|, signed mean, max |error| and count: of all rows and of each group."""
    groups: dict[str, list[float]] = {"all": []}
    for r in rows:
        for key in ("all", *r.groups):
            groups.setdefault(key, []).append(r.error)
    return {k: (sum(map(abs, v)) / len(v), sum(v) / len(v), max(map(abs, v)), len(v))
            for k, v in groups.items()}


__all__ = ["ENVIRONMENT", "GPT2_BPE_TOKENS", "Golden", "HARNESS_ENV", "Priced", "command",
           "document", "flags_text", "goldens", "launch_words", "source", "summary",
           "tokenizer_vocab", "unread"]
