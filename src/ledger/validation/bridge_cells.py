"""When a Megatron-Bridge table's placement cell yields to its recipe's (``BridgeRow.as_run``,
``ledger.validation.bridge``): one rule each for every row - a cell copied from a sibling
line of the table (``copied_cells``), a placement Megatron would refuse
(``unrunnable_cells``), a cell no recipe of the line ships (``unshipped_cells``). ``row``: a
``BridgeRow`` (not imported: it imports these).
"""
from __future__ import annotations

import re
from dataclasses import replace


# the placement cells a table row states (BridgeRow fields)
PLACEMENT = ("mbs", "tp", "pp", "cp", "vp", "ep", "fsdp")


def copied_cells(row, table) -> dict:
    """{cell: the recipe's value} for each placement cell the row's table most likely copied
    from a sibling line - one rule for every row: a cell is read as copied when it
    disagrees with the row's own recipe at the release's tag, every disagreeing cell
    repeats a sibling row of the same table (same release, GPU, model and GPU count,
    another precision) that agrees with its own recipe on them, and another release's
    table states the recipe's values for the same GPU, model, precision and GPU count (so
    two witnesses, the recipe and another table, say what ran). Written after seeing the
    two 26.02.01 GB300 Llama 3 70B rows (NVFP4 at TP 1 PP 1 MBS 2 and MXFP8 at PP 4 MBS 2
    without VP, the FP8 Megatron-FSDP line's MBS 2 and 'n/a'; 26.02, 26.04 and 26.04.01
    state PP 4 VP 5 MBS 1, as the v0.3.1 recipe does); it also moves 26.02.01 GB200 Llama
    3.1 405B NVFP4 (VP 4 -> 8) and 26.02.01 GB300 Llama 3.1 405B FP8 (TP 2 CP 2 -> TP 4
    CP 1); 25.09 GB200 Llama 3 70B MXFP8 (MBS 2 -> 1) already yields to ``micro_batch``.
    The line copied from may also be the previous release's table line for the same GPU,
    model, precision and GPU count (a table carried over while the release's recipe moved
    on): it moves 25.11 H100 Qwen3-30B (MBS 2 VP 24 -> MBS 1 VP 12: the 25.09 line's cells;
    v0.2.0 qwen3/workload_base_configs.py L233-240), 26.02.01 H100 Qwen3-30B (PP 2 VP 12
    EP 8 -> PP 1 EP 16: the 26.02 line's; Megatron-Bridge f29a269f, "Update Qwen3 30B H100
    Base Configs with HybridEP", in v0.3.1) and 26.02.01 B300 Qwen3-235B (VP 4 -> none:
    the 26.02 line's; 6f5e31aa, "Update Qwen3 235B B300 Configs to match Qwen3 B200
    Configs", in v0.3.1).
    ``table``: every row (``ledger.validation.bridge.rows``)."""
    said = {k: v.get("recipe") for k, v in row.disagree.items() if k in PLACEMENT}
    if not said or any(isinstance(v, str) for v in said.values()):
        return {}
    same = [o for o in table if (o.gpu, o.model, o.gpus, o.seq_len) ==
            (row.gpu, row.model, row.gpus, row.seq_len) and o.id != row.id]
    # release names sort in release order ("26.02" < "26.02.01" < "26.04")
    earlier = max((o.release for o in table if o.release < row.release), default=None)

    def source_line(o) -> bool:  # a line the cells could be copied from
        return ((o.release == row.release
                 or (o.release == earlier and o.precision == row.precision))
                and not set(o.disagree) & set(said)
                and all(getattr(o, k) == getattr(row, k) for k in said))

    sibling = any(source_line(o) for o in same)
    witness = any(o.release != row.release and o.precision == row.precision
                  and all(getattr(o, k) == v for k, v in said.items()) for o in same)
    return dict(said) if sibling and witness else {}


def unrunnable_cells(row) -> dict:
    """{cell: the recipe's value} for every placement cell of a row whose table sizes cannot
    run at all (Megatron would refuse the placement, so the table misprints at least one
    cell of a run that ran), where the recipe's cells make a placement Megatron accepts -
    one rule for every row. Refused: what ``table_inconsistent`` says cannot run (an EP
    group its ranks cannot hold), and a VP that conflicts with the recipe's pipeline layout
    (``_layout_refuses``). The recipe's cells are its placement as Megatron runs it: a VP
    the recipe leaves unset is the one Megatron derives from the layout it passes
    (``_layout_vp``). It moves 25.09 GB200 DeepSeek-V3 MXFP8 (table PP 8 VP 2 leaves DP
    32 for EP 64; its recipe, v0.1.0rc3 deepseek_v3_llm_pretrain.yaml L98-108, runs PP 4 VP
    8, DP 64) and FP8-CS (table VP 4 at PP 4 against the 32-stage layout; the recipe's VP
    8), and 25.09 B200 DeepSeek-V3 FP8-CS and MXFP8 (table TP 1 PP 16 without interleaving
    - the 25.09 tables write VP 1 for none - against the same 32-stage layout, which the
    launch passes with VP unset: Megatron runs it at VP 2, and the recipe at TP 2, the
    same YAML's b200 lines L78-91: tp 2 L85, vp null L88)."""
    refused = _layout_refuses(row)
    if not (any(t.endswith("cannot run as published") for t in row.table_inconsistent)
            or refused):
        return {}
    said = {k: v.get("recipe") for k, v in row.disagree.items() if k in PLACEMENT}
    if refused and "vp" not in said:  # the recipe leaves VP unset, as the table does
        vp = _layout_vp(replace(row, **{k: v for k, v in said.items()
                                        if isinstance(v, int)}))
        said = said | ({"vp": vp} if vp else {})
    if not said or not all(isinstance(v, (int, bool)) for v in said.values()):
        return {}
    run = replace(row, **said)
    return said if _runs(run) and not _layout_refuses(run) else {}


def _layout_refuses(row) -> bool:
    """Whether the row's PP / VP cannot be the run of its recipe's pipeline layout: the
    layout's stages must split evenly over PP, and the VP must be the stages over PP
    (pipeline_parallel_layer_layout.py L37-42, transformer_config.py L985-997 at
    core_v0.14.0, the Megatron-Core Megatron-Bridge 0.1.0rc3 pins: pyproject.toml L88) -
    a VP that is set is held to it (L989-994), one left unset is set to it (L996-997), so
    a row without interleaving (VP None: the 25.09 / 25.11 tables write VP 1) cannot be
    the run of a layout of more stages than PP. 25.09's DeepSeek-V3 launch passes the
    32-stage "Et|(tt|)*30mL" to every GPU's recipe (scripts/performance/run_script.py
    L64-72 @ v0.1.0rc3, and the YAML's pipeline_model_parallel_layout)."""
    stages = _layout_stages(row)
    if stages is None:
        return False
    return bool(stages % row.pp or (row.vp or 1) != stages // row.pp)


def _layout_stages(row) -> int | None:
    """The stages of the recipe's own pipeline layout, None where it passes none."""
    own = row.setting("pp_layout") or row.setting("pipeline_model_parallel_layout")
    return _stages(own) if isinstance(own, str) else None


def _layout_vp(row) -> int | None:
    """The VP Megatron-Core runs the recipe's layout at on the row's PP, where the layout
    splits evenly over it and gives more than one stage a rank (transformer_config.py
    L996-997 at core_v0.14.0); None otherwise."""
    stages = _layout_stages(row)
    if stages is None or stages % row.pp or stages // row.pp <= 1:
        return None
    return stages // row.pp


# the placement cells the table's own GA (GBS / (MBS x DP), DP = GPUs / (TP x PP x CP))
# cannot witness: the table states nothing else about them
UNWITNESSED = ("vp", "ep", "etp", "fsdp")


def unshipped_cells(row, table) -> dict:
    """{cell: the recipe's value} for each placement cell the table's GA cannot witness
    (``UNWITNESSED``) whose table value no recipe of the line ships - one rule for every
    row: the cell disagrees with the row's recipe at the release's tag, the same line (GPU,
    model, precision, GPU count) of the next release that has it runs a recipe that states
    the same value as this one (two successive recipes agree, neither states the table's),
    and the recipe's cells make a placement Megatron accepts. A table value a later recipe
    does ship is read as the run of a recipe newer than the tag, and kept: 26.02.01 B200 /
    B300 GPT-OSS 120B state EP 8 where v0.3.1 runs EP 64, and v0.4.0 ships EP 8 for both
    (Megatron-Bridge 7260d621, "perf optimizations- GPT-OSS 120B", 2026-03-23, two days
    after the 26.02.01 table, cfeddcd9). It moves 25.11 B200 GPT-OSS 120B (table EP 8, the
    base preset's and the H100 line's, archive L581 / L592 @ 067f987d; v0.2.0
    scripts/performance/configs/gpt_oss/workload_base_configs.py L50-55 runs EP 64, and so
    does v0.3.0's B200 V2 preset, gpt_oss_workload_base_configs.py L71-76 / L108-111, the
    26.02 table's).
    Rows ``copied_cells`` or ``unrunnable_cells`` move are priced by those rules first
    (``BridgeRow.as_run``). ``table``: every row (``ledger.validation.bridge.rows``)."""
    said = {k: v.get("recipe") for k, v in row.disagree.items() if k in UNWITNESSED}
    if not said or any(isinstance(v, str) for v in said.values()):
        return {}
    line = (row.gpu, row.model, row.precision, row.gpus)
    later = sorted((o for o in table if (o.gpu, o.model, o.precision, o.gpus) == line
                    and o.release > row.release), key=lambda o: o.release)
    if not later:
        return {}
    nxt = [o for o in later if o.release == later[0].release]

    def recipe_value(o, k):  # the cell as the other row's own recipe states it
        return o.disagree[k].get("recipe") if k in o.disagree else getattr(o, k)

    if not all(recipe_value(o, k) == v for o in nxt for k, v in said.items()):
        return {}
    return said if _runs(replace(row, **said)) else {}


def _runs(run) -> bool:
    """Whether Megatron accepts the placement: TP x PP x CP divides the GPUs, and EP x ETP
    the ranks it folds into (DP x CP x TP)."""
    ranks = run.tp * run.pp * run.cp
    return not (run.gpus % ranks
                or (run.gpus // ranks * run.cp * run.tp) % (run.ep * (run.etp or 1)))


def _stages(layout: str) -> int:
    """Stages of a layout string (``(...)*n`` repeats counted)."""
    flat = layout
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        flat = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), flat)
    return len(flat.split("|"))
