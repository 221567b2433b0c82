"""NVIDIA Megatron-Bridge's published pre-training tables as rows: every pre-training row of
``docs/performance-summary.md`` and ``docs/performance-summary-archive.md`` (releases 25.09 to
26.08; H100, B200, B300, GB200, GB300), each with its table line and the recipe it ran.

The rows live in ``data/megatron_bridge.json``, written by ``tools/bridge_tables.py`` from
NVIDIA-NeMo/Megatron-Bridge at the commit the file names (its docstring states how cells are
read and the one rule where table and recipe disagree: the table's stated figures win, the
recipe supplies what the table leaves out, and each disagreement is kept in the row; a
table MBS that both the table's own GA and the recipe contradict yields to the recipe's,
``BridgeRow.micro_batch``; a placement cell copied from a sibling row, one of a placement
Megatron would refuse, or one no recipe of the line ships, yields to the recipe's,
``bridge_cells`` and ``BridgeRow.as_run``). Nothing here is fitted: these rows are
predictions unless a fitting script declares some of them calibration, or their table's
footnote declares the figure a performance regression (``REGRESSION``: shown, summed
apart).

Model facts: each table model maps to a preset of ``ledger.model`` (``PRESET``), to a real
Hugging Face config.json kept beside the rows (``CONFIG``, read by ``ledger.io.hf`` - a layer
above this one - so the runner resolves it), or to what the ledger lacks to express it
(``LACKS``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources

# the rules under which a table's placement cell yields to the recipe's (BridgeRow.as_run)
from ledger.validation.bridge_cells import (PLACEMENT, _stages, copied_cells,  # noqa: F401
                                           unrunnable_cells, unshipped_cells)
from ledger.validation.bridge_scripts import script_settings

DATA = "megatron_bridge.json"

# table model -> ledger.model preset (same shapes; Llama 3.1 405B is Llama 3 405B's shape)
PRESET = {"llama3-8b": "llama3-8b", "llama3-70b": "llama3-70b", "llama3.1-405b": "llama3-405b",
          "deepseek-v3": "deepseek-v3", "qwen3-30b-a3b": "qwen3-30b-a3b"}
# table model -> config.json under data/hf/ (its source in data/hf/SOURCES.md)
CONFIG = {"gpt-oss-120b": "gpt-oss-120b.json", "qwen3-235b-a22b": "qwen3-235b-a22b.json",
          "kimi-k2": "kimi-k2.json", "nemotron-3-nano": "nemotron-3-nano.json",
          "nemotron-3-super": "nemotron-3-super.json",
          # the released file (data/hf/SOURCES.md): compressed attention, mHC and the
          # hash-routed first layers as ledger.anatomy.compressed counts them; the recipes
          # build the model from it (recipes/deepseek/gb200/deepseek_v4.py L28, L52 @ v0.6.0)
          "deepseek-v4-flash": "deepseek-v4-flash.json",
          # "the same architecture as Nemotron 3 Nano, but ... trained natively with
          # multi-token prediction" (examples/models/nemotron/nemotron_3/lightning/
          # README.md L3-4 @ 067f987df03b): Nano's file with one "*E" MTP block (WITH), which
          # counts the 32,913,266,240 elements its verification card states
          "nemotron-3.5-lightning": "nemotron-3-nano.json",
          # no released file found: Megatron-LM's own launch of the checkpoint written as
          # one, its vocabulary and MTP block assumed (data/hf/SOURCES.md)
          "nemotron-3-ultra": "nemotron-3-ultra.json"}
# a config.json whose model_type the reader does not know, read as the family it runs as
READ_AS = {"kimi-k2": "deepseek_v3"}  # Megatron-Bridge kimi_bridge.py:35-39 @ v0.5.1
# keys set over a CONFIG file for a model released without its own (see CONFIG)
WITH = {"nemotron-3.5-lightning": {"num_nextn_predict_layers": 1,
                                   "mtp_hybrid_override_pattern": "*E"}}
# the MTP depths a family's library recipe runs where the perf recipe names none: Nemotron
# 3 Super's one "*E" block run twice (recipes/nemotronh/nemotron_3_super.py L94, L98 at
# v0.4.0 to v0.5.1; recipes/nemotronh/h100/nemotron_3_super.py L98, L102 @ v0.6.0:
# mtp_num_layers 2, mtp_use_repeated_layer True)
RECIPE_MTP = {"nemotron-3-super": (2, True),
              # recipes/nemotronh/h100/nemotron_3_ultra.py L61, L64 @ v0.6.0 (BF16: L62)
              "nemotron-3-ultra": (2, True)}
# ... which also keeps the MTP block in BF16 under a low-precision recipe (L95 there,
# keep_mtp_spec_in_bf16; Lightning's row sets it), priced at the run's precision: named
MTP_BF16 = ("nemotron-3-super", "nemotron-3.5-lightning", "nemotron-3-ultra")
# what a family's perf scripts set on a precision beyond the Megatron-Bridge function the
# row names: Nemotron 3 Super's NVFP4 keeps its last 14 layers in BF16 (scripts/performance/
# configs/nemotronh/nemotron_3_llm_pretrain.py L47-50 at v0.4.0 to v0.5.1; v0.6.0's
# nemotron_3_super_bf16_with_nvfp4_mixed, training/mixed_precision.py L421-429, the first
# ones at MixedPrecisionConfig's 0, L71) without NVFP4 param gather (v0.6.0 perf_recipes/
# nemotronh/common.py L65-69, "Disabled until MCore PR 4358 lands")
FAMILY_PRECISION = {("nemotron-3-super", "nvfp4"): {
    "mixed_precision.first_last_layers_bf16": True,
    "mixed_precision.num_layers_at_start_in_bf16": 0,
    "mixed_precision.num_layers_at_end_in_bf16": 14,
    "mixed_precision.fp4_param_gather": False}}
# a per-module precision file the family's perf scripts load beside the recipe, by its
# name in ledger.frameworks.module_formats.QUANT_FILES: Nemotron 3 Super's NVFP4 te_quant.cfg
# (scripts/performance/configs/nemotronh/te_quant.cfg, the same file at v0.4.0 to v0.5.1;
# src/megatron/bridge/perf_recipes/nemotronh/te_quant.cfg @ v0.6.0, common.py L33)
QUANT_FILES = {("nemotron-3-super", "nvfp4"): "nemotronh"}
# releases whose tables have no FSDP column (docs/performance-summary.md @ DOCS commit, the
# 26.08 table L39-104, and the archive's 26.06.01 / 26.06 ones; 26.04.01's and older have
# one, archive L199): there the recipe says whether Megatron-FSDP ran (BridgeRow.megatron_fsdp)
# the cells that say which run a recipe configures: a recipe that disagrees with the table on
# any of them is another placement's (BridgeRow.micro_batch)
LAYOUT_CELLS = ("gpus", "tp", "pp", "cp", "vp", "ep", "etp")
NO_FSDP_COLUMN = ("26.06", "26.06.01", "26.08")
# what a recipe sets that the tables' generator leaves unevaluated, read at the row's ref:
# Nemotron 3 Ultra's optimizer instances, one per 64-GPU NVLink domain, max(1, 256 // 64)
# (perf_recipes/nemotronh/common.py L168-169 @ v0.6.0; the generator keeps the expression)
HELPER_SETTINGS = {f"nemotron_3_ultra_pretrain_256gpu_{gpu}_fp8mx_config": {
    "ddp.num_distributed_optimizer_instances": 4} for gpu in ("gb200", "gb300")}
# table model -> what the ledger lacks to express it (the row is listed, not run)
LACKS: dict[str, str] = {}  # none at present: DeepSeek-V4 Flash reads its released file
# Megatron-Bridge's own pipeline layouts for the 61-layer DeepSeek-V3 stack (DeepSeek-V3,
# Kimi-K2), applied when a recipe gives none, by the number of model stages PP x VP
# ({m}: the MTP layers, none for Kimi-K2). Its maps key by (pp, vp) but give one layout per
# stage count - recipes/deepseek/deepseek_v3.py:68-76 @ v0.5.1 (the same map at :235-243
# @ v0.2.0): (4,1) 4 stages; (8,1), (4,2) 8; (16,1), (8,2), (4,4) 16; recipes/kimi/
# kimi_k2.py:30-39 @ v0.5.0 adds (2,8) - and the 32-stage layout is the one its 25.09 perf
# YAML runs at PP 8 x VP 4 (scripts/performance/configs/deepseek/deepseek_v3_llm_pretrain.yaml
# @ v0.1.0rc3, model.pipeline_model_parallel_layout).
BRIDGE_LAYOUTS = {4: "Et*16|t*16|t*16|t*13{m}L", 8: "Et*8|(t*8|)*6t*5{m}L",
                  16: "Et*4|(t*4|)*14t{m}L", 32: "Et|(tt|)*30{m}L"}
BRIDGE_LAYOUT_MODELS = ("deepseek-v3", "kimi-k2")
# The declared calibration set: every row of one release, 26.02.01 (36 of the 283 rows, on
# every GPU the table covers); benchmarks/fit.py fits the host's constants (stage 3) and the
# Blackwell parts' GEMM share (stage 4) on the ones that run. Every other row is a
# prediction.
CALIBRATION_RELEASE = "26.02.01"
# A row whose table footnote declares its figure a performance regression ran under a named
# defect: one rule for every row - such a row is shown with its note and summed apart
# ("regressed"), neither calibration nor prediction (where the defect is a kernel with a
# published measurement, it is priced too: ledger.step.eager.dglu_regression_s). It names
# 26.06.01's GB200 / GB300 GPT-OSS 120B (archive L90 @ DOCS commit, "[^gpt-oss-note]:
# Performance regression in GPT-OSS 120B pre-training is a known issue",
# NVIDIA/cudnn-frontend issue 256: grouped_gemm_dglu_wrapper_sm100, the MoE
# grouped GEMM's dGLU + dbias kernel, 10x slower from cudnn-frontend 1.23.0 to 1.24.0; the
# fix, cudnn-frontend PR 322 merged 2026-06-23, 1362.8 -> 155.6 us with dbias, before
# v1.26.0's release, PR 353, 2026-07-07. Megatron-Bridge pins nvidia-cudnn-frontend 1.23.0
# at v0.5.0 (26.06), 1.24.0 at v0.5.1 (26.06.01), 1.26.0 at v0.6.0 (26.08): pyproject.toml
# L140 / L142 / L144; of the tables' MoEs only GPT-OSS has linear biases, the dbias path:
# models/gpt_oss/gpt_oss_bridge.py L62 add_bias_linear True, deepseek_v3_bridge.py L62,
# qwen3_moe_bridge.py L57, kimi_bridge.py L52 False @ v0.5.1).
# docs/releases/known-issues.md's
# performance entries name no table row (26.06 Nemotron 3 Nano at TP > 1: every Nano row
# runs TP 1; 26.02 DeepSeek-V3 on H100 without DeepEP: no 26.02 H100 DeepSeek-V3 row).
REGRESSION = "performance regression"
MOE = {"deepseek-v3", "deepseek-v4-flash", "gpt-oss-120b", "qwen3-30b-a3b", "qwen3-235b-a22b",
       "kimi-k2", "nemotron-3-nano", "nemotron-3-super", "nemotron-3-ultra",
       "nemotron-3.5-lightning"}

# a recipe setting's names in the three recipe formats (0.2-0.5 presets, 0.6 flat recipes,
# 0.1 YAML perf_matrix and its ConfigContainer)
_ALIASES = {"cuda_graph_impl": ("cuda_graph_impl", "model.cuda_graph_impl"),
            "cuda_graph_scope": ("cuda_graph_scope", "model.cuda_graph_scope"),
            "recompute_modules": ("recompute_modules", "model.recompute_modules"),
            "recompute_granularity": ("recompute_granularity", "model.recompute_granularity"),
            "recompute_num_layers": ("recompute_num_layers", "model.recompute_num_layers"),
            "cpu_offloading_num_layers": ("cpu_offloading_num_layers",
                                          "model.cpu_offloading_num_layers"),
            "moe_flex_dispatcher_backend": ("moe_flex_dispatcher_backend",
                                            "model.moe_flex_dispatcher_backend"),
            "moe_a2a_overlap": ("moe_a2a_overlap", "comm_overlap.overlap_moe_expert_parallel_comm",
                                "model.overlap_moe_expert_parallel_comm"),
            "use_megatron_fsdp": ("use_megatron_fsdp", "ddp.use_megatron_fsdp"),
            "num_distributed_optimizer_instances": ("ddp.num_distributed_optimizer_instances",)}


@dataclass(frozen=True)
class BridgeRow:
    """One published pre-training run: the table's figures, its source line, the recipe."""
    id: str
    release: str
    table_model: str
    model: str
    model_variant: str | None
    system: str
    gpu: str
    gpus: int
    precision_published: str
    precision: str  # bf16 | fp8_cs | fp8_mx | fp8_sc (blockwise) | nvfp4
    gbs: int
    mbs: int
    seq_len: int
    tp: int
    pp: int
    cp: int
    vp: int | None
    ep: int
    etp: int | None
    fsdp: bool
    ga: int | None
    tokens_per_s_per_gpu: float | None
    model_tflops_per_gpu: float | None
    published_as: str
    notes: list = field(default_factory=list)
    source: dict = field(default_factory=dict)  # repo, path, commit, line of the table row
    recipe: dict = field(default_factory=dict)  # repo, ref, commit, config, path, line, settings
    disagree: dict = field(default_factory=dict)  # field -> {"table": x, "recipe": y}
    table_inconsistent: list = field(default_factory=list)  # the table against itself

    @property
    def megatron_fsdp(self) -> bool:
        """Megatron-FSDP as the run had it: the table's FSDP column, or where the release's
        table has none (``NO_FSDP_COLUMN``) the recipe's ``use_megatron_fsdp``."""
        if self.release not in NO_FSDP_COLUMN:
            return self.fsdp
        return self.fsdp or self.setting("use_megatron_fsdp") is True

    @property
    def dp(self) -> int:
        """Data-parallel size: the GPUs over TP x PP x CP (the FSDP group too when FSDP)."""
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def micro_batch(self) -> int:
        """The MBS the row is priced at: the table's, except a table MBS that both the
        table's own GA (``table_inconsistent``) and the recipe contradict, which yields to
        the recipe's - where the recipe is the table's run: it agrees with the table on
        the GPU count and the layout (``LAYOUT_CELLS``); a recipe for another layout says
        nothing about this one's MBS (one rule for every row; it moves 25.09 GB200 Llama 3
        70B, whose GA the recipe's MBS reproduces, and 25.11 H100 GPT-OSS 120B, whose GA 2
        neither reproduces; 25.11 GB300 Qwen3-235B keeps the table's MBS 2: its v0.2.0
        recipe is TP 2 PP 1 EP 64 on 64 GPUs at MBS 4, the table's TP 1 PP 4 VP 12 EP 16
        on 256 is the V2 config of v0.3.0, scripts/performance/configs/qwen/
        qwen3_workload_base_configs.py L187-194 over V1 L54-64, MBS 2). ``mbs`` stays the
        table's cell."""
        said = self.disagree.get("mbs") or {}
        ga_off = any(t.startswith("GA ") for t in self.table_inconsistent)
        same_run = not any(c in self.disagree for c in LAYOUT_CELLS)
        if ga_off and same_run and isinstance(said.get("recipe"), int):
            return said["recipe"]
        return self.mbs

    def as_run(self) -> "BridgeRow":
        """The row as it is priced: its table cells, except those ``copied_cells`` reads as
        copied from a sibling row, ``unrunnable_cells`` finds impossible or
        ``unshipped_cells`` finds no recipe of the line ships, which take the recipe's
        values (the table's stay in ``disagree`` and in ``id``)."""
        cells = (copied_cells(self, rows()) or unrunnable_cells(self)
                 or unshipped_cells(self, rows()))
        return replace(self, **cells) if cells else self

    @property
    def num_microbatches(self) -> int:
        return self.gbs // (self.micro_batch * self.dp)

    @property
    def moe(self) -> bool:
        return self.model in MOE

    @property
    def regression(self) -> str | None:
        """The table's own footnote on the row when it declares the published figure a
        performance regression (``REGRESSION``), else None."""
        return next((n for n in self.notes if REGRESSION in n.lower()), None)

    @property
    def role(self) -> str:
        """regressed (its table's footnote declares the figure a known performance
        regression: ``regression``; never fitted) | calibration (``CALIBRATION_RELEASE``) |
        prediction."""
        if self.regression:
            return "regressed"
        return "calibration" if self.release == CALIBRATION_RELEASE else "prediction"

    @property
    def tokens_per_step(self) -> int:
        return self.gbs * self.seq_len

    def layout(self, mtp_layers: int = 0) -> tuple[str, str] | None:
        """(Megatron layout string, where it comes from) for this row's PP x VP: the
        recipe's own (``pp_layout``, or the YAML's pipeline_model_parallel_layout), else
        Megatron-Bridge's layout for that many stages (``BRIDGE_LAYOUTS``); None when
        neither has one.
        The recipe's is taken only when it has PP x VP stages (the table's sizes win)."""
        own = self.setting("pp_layout") or self.setting("pipeline_model_parallel_layout")
        if isinstance(own, str) and _stages(own) == self.pp * (self.vp or 1):
            return own, f"recipe {self.recipe.get('path')}:{self.recipe.get('line')}"
        mapped = BRIDGE_LAYOUTS.get(self.pp * (self.vp or 1)) \
            if self.model in BRIDGE_LAYOUT_MODELS else None
        if mapped:
            return mapped.format(m="m" * mtp_layers), "Megatron-Bridge's layout map"
        return None

    def fuses_mlp(self, precision: str | None) -> bool:
        """TE's fused grouped MLP as the run had it (``validation.bridge_stack``)."""
        from ledger.validation.bridge_stack import fused_mlp_of

        return fused_mlp_of(self, precision)

    def torch_ws(self) -> int | None:
        """PyTorch's cuBLAS workspace its container defaults to (``validation.bridge_stack``)."""
        from ledger.validation.bridge_stack import torch_workspace_of

        return torch_workspace_of(self)

    def setting(self, name: str, default=None):
        """The recipe's value of a setting the table does not state: the preset's (0.2-0.5)
        or the recipe function's (0.6) own, else what the GPU's recipe function sets
        unconditionally (``pretrain``), else the 0.1 YAML's ConfigContainer; ``default``
        when none names it. None (a preset's "not set") and unevaluated expressions
        ("expr:...") are passed over. The library recipes those functions start from
        (megatron.bridge.recipes.*) are not read; what the tables' generator leaves
        unevaluated is read from ``HELPER_SETTINGS``, what the release's launcher sets beyond
        the recipe from ``bridge_scripts``."""
        own, pretrain = self.recipe.get("settings") or {}, self.pretrain.get("settings") or {}
        places = [own, pretrain, ((self.recipe.get("ConfigContainer") or {}).get("model") or {}),
                  HELPER_SETTINGS.get(self.recipe.get("config"), {}),
                  script_settings(self.release, self.model, self.gpu)]
        for s in places:
            s = s | _constructed(s)
            for key in _ALIASES.get(name, (name, "model." + name)) + (name,):
                if key in s and s[key] is not None and not str(s[key]).startswith("expr:"):
                    return s[key]
        return default

    def precision_setting(self, name: str, default=None):
        """A MixedPrecisionConfig field as the run had it: the recipe function's
        ``mixed_precision.<name>``, else its family's perf-script overrides
        (``FAMILY_PRECISION``), else the precision's Megatron-Bridge function with the
        release's perf-script overrides (``recipe["precision"]``: tools/bridge_recipes.py
        reads them, v0.1.0rc3's and v0.2.0's helpers.py among them)."""
        for s in (self.recipe.get("settings") or {}, self.pretrain.get("settings") or {},
                  FAMILY_PRECISION.get((self.model, self.precision), {})):
            v = s.get(f"mixed_precision.{name}")
            if v is not None and not str(v).startswith("expr:"):
                return v
        v = ((self.recipe.get("precision") or {}).get("settings") or {}).get(name)
        return default if v is None else v

    @property
    def pretrain(self) -> dict:
        """The 0.2-0.5 recipe function the run went through (path, function, line, its
        unconditional settings and the conditional ones); {} when none."""
        key = self.recipe.get("pretrain")
        return dict(_document()["recipe_functions"][key]) if key else {}


def _constructed(settings: dict) -> dict:
    """The literal keyword arguments of a config object a recipe builds in one expression,
    as its dotted settings: ``comm_overlap = CommOverlapConfig(tp_comm_overlap=True,
    overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True)`` (the 0.6 flat
    recipes' helper, e.g. perf_recipes/qwen/common.py L36-61 @ 51885cf1) ->
    ``comm_overlap.overlap_moe_expert_parallel_comm`` True and so on; an argument that is
    not a literal is passed over (unevaluated, as ``setting`` passes over "expr:" values)."""
    import ast

    out = {}
    for key, value in settings.items():
        if not (isinstance(value, str) and value.startswith("expr:")):
            continue
        try:
            call = ast.parse(value[len("expr:"):], mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(call, ast.Call):
            continue
        for kw in call.keywords:
            try:
                out.setdefault(f"{key}.{kw.arg}", ast.literal_eval(kw.value))
            except ValueError:
                continue
    return {k: v for k, v in out.items() if k not in settings}


@lru_cache(maxsize=1)
def _document() -> dict:
    text = resources.files("ledger.validation").joinpath("data", DATA).read_text()
    return json.loads(text)


def source() -> dict:
    """Where the rows were read: repo, docs commit, the release -> recipe ref table."""
    return dict(_document()["source"])


def rule() -> str:
    """The one rule applied to every row where table and recipe disagree."""
    return _document()["rule"]


def config_text(model: str) -> str:
    """The config.json text of a table model in ``CONFIG``."""
    return resources.files("ledger.validation").joinpath("data", "hf", CONFIG[model]).read_text()


@lru_cache(maxsize=1)
def rows() -> tuple[BridgeRow, ...]:
    return tuple(BridgeRow(**r) for r in _document()["rows"])


def did_not_fit() -> tuple[BridgeRow, ...]:
    """The placements the tables say did not fit (out-of-memory outcomes), as rows without
    a measured figure. docs/performance-summary-archive.md:292 @ DOCS commit (26.04.01):
    "Mapping used for MXFP8 precision could not fit for NVFP4 precision for this model. We
    expect to achieve better performance for NVFP4 precision in future when NVFP4 param
    gather is supported." - Nemotron 3 Super on 64 B200 in NVFP4 at the MXFP8 row's mapping
    (archive:288: TP 1, EP 64, MBS 1, GBS 512, 8192 tokens; without NVFP4 param gather)."""
    from dataclasses import replace

    def one(**kw):
        return next(r for r in rows() if all(getattr(r, k) == v for k, v in kw.items()))

    at = dict(release="26.04.01", gpu="b200", model="nemotron-3-super")
    mx, fp4 = one(precision="fp8_mx", **at), one(precision="nvfp4", **at)
    note = next(n for n in fp4.notes if "could not fit" in n)
    return (replace(fp4, id=fp4.id + "/mxfp8-mapping", tp=mx.tp, pp=mx.pp, cp=mx.cp, vp=mx.vp,
                    ep=mx.ep, mbs=mx.mbs, gbs=mx.gbs, tokens_per_s_per_gpu=None,
                    model_tflops_per_gpu=None, published_as="did not fit",
                    notes=[note], source={**fp4.source, "line": 292},
                    disagree={}, table_inconsistent=[]),)
