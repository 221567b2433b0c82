"""Views of the ledger: text, JSON, HTML pages, the planner's table and pipeline time lines.
The only place units are formatted (IEC: GiB = 2^30 B).

``text`` (text and JSON of a report or an estimate), ``layout`` (rank groups, links and NVLink
domains), ``plan`` (the planner's table),
``serve`` (a served model's weights, KV cache, concurrency and time),
``html`` (one self-contained page with inline SVG), ``timeline`` (a simulated pipeline as
text or SVG), ``run`` (a whole run: days, GPU-hours, cost, energy, checkpoints, failures),
``peaks`` (the memory validation table and its fit), ``bridge`` (Megatron-Bridge's published
rows through report's memory verdict and estimate's step time), ``bridge_pairs`` (their
rack / HGX ratios and micro-batch pairs), ``bridge_fit`` (the host's
constants, the Blackwell parts' GEMM share and a Grace host's scale fitted on its declared
calibration rows, benchmarks/fit.py stages 3 to 5), ``fit_rounds`` (those three stages
iterated to their fixed point), ``mcore_moe`` (the Megatron Core MoE report's Table 11
on the Bridge rows' path, with its pairs and FLOPs-per-token check), ``mcore_memory``
(its sec. 4.1 memory per GPU - Table 3's activations, Table 4's recompute savings,
permutation and FP8 - against the ledger at Table 3's configuration), ``plan_agrees`` (plan
pinned to each Bridge row's placement against estimate's step and report's memory).

May import: everything below it; nothing but ``ledger.parallel`` and the CLI imports it.
"""
from ledger.render.html import COLOURS, LINKS, RUN_COLOURS, TIME, page, placement_page, plan_page
from ledger.render.layout import domain_line, domains_json, layout_json, layout_text
from ledger.render.peaks import fit_table, memory_table
from ledger.render.plan import plan_json, plan_text
from ledger.render.run import held_json, held_table, run_json, run_lines
from ledger.render.serve import serve_json, serve_text
from ledger.render.text import (
                                estimate_json,
                                estimate_text,
                                fmt_bytes,
                                gpus_json,
                                gpus_table,
                                models_json,
                                models_table,
                                placement_json,
                                placement_text,
                                report,
                                report_text,
)
from ledger.render.timeline import summary, svg_timeline, text_timeline, timeline_json

__all__ = ["COLOURS", "LINKS", "RUN_COLOURS", "TIME", "domain_line", "domains_json",
           "estimate_json", "estimate_text",
           "fit_table", "fmt_bytes", "gpus_json", "gpus_table", "held_json", "held_table",
           "layout_json", "layout_text", "memory_table", "models_json", "models_table", "page",
           "placement_json", "placement_page", "placement_text", "plan_json", "plan_page",
           "plan_text", "report", "report_text", "run_json", "run_lines", "serve_json",
           "serve_text", "summary",
           "svg_timeline", "text_timeline", "timeline_json"]
