"""Where a step's exposed communication comes from: per axis and call, the seconds it
adds to the step, the seconds it was issued for, and why the rest of the step did not
hide it - read from the time model's own terms (``ledger.step.timing.step_times``)."""
from __future__ import annotations

from dataclasses import dataclass

from ledger.frameworks import of as framework_of


@dataclass(frozen=True)
class Exposed:
    axis: str  # tp | cp | ep | dp | pp
    call: str  # the collective and its payload
    exposed_s: float  # seconds it adds to the step
    issued_s: float  # seconds it runs for, hidden or not
    why: str  # why the rest is not hidden


def _dp(cfg, key: str, exposed: float, issued: float) -> str:
    fw = framework_of(cfg).name
    grads, params = cfg.overlap_grad_reduce, cfg.overlap_param_gather
    if key in ("dp_gather_fwd", "dp_gather_bwd", "dp_params") and not params:
        return (f"not overlapped: {fw} runs it apart from compute at zero stage "
                f"{cfg.zero_stage} (--overlap-param-gather off)")
    if key in ("dp_reduce", "dp_grads") and not grads:
        return (f"not overlapped: {fw} reduces after the last backward at zero stage "
                f"{cfg.zero_stage} (--overlap-grad-reduce / overlap_comm off)")
    return {"dp_gather_fwd": "each micro-batch's first gather has nothing before it to hide "
                             "under; beyond it, more gathering than forward compute",
            "dp_gather_bwd": "more re-gathering than backward compute to hide it",
            "dp_reduce": "the last micro-batch's last call follows its backward; beyond it, "
                         "longer than the window from the first backward to the step's end",
            "dp_grads": "longer than the last backward it hides under",
            "dp_params": "longer than the first forward it hides under"}[key]


def _why(model, cfg, key: str, exposed: float, issued: float) -> str:
    if key.startswith("dp_"):
        return _dp(cfg, key, exposed, issued)
    fw = framework_of(cfg)
    if key == "tp":
        return ("TP collectives between the GEMMs: no comm-GEMM overlap (--tp-overlap)"
                if exposed >= issued * (1 - 1e-9) else
                "each call's first 1/tp chunk, or more than the GEMM it feeds")
    if key == "cp":
        return ("Ulysses all-to-alls before and after attention" if cfg.cp_kind == "ulysses"
                else "a ring step's K/V block takes longer than its share of attention")
    if key == "ep":
        if not cfg.ep_overlap:
            problem = fw.ep_overlap_problem(cfg.schedule, cfg.pp)
            shared = ("; the shared experts hide what they outlast (--moe-shared-expert-"
                      "overlap)" if exposed < issued * (1 - 1e-9) else "")
            return (f"dispatch and combine between the layer's GEMMs: "
                    f"{problem or 'EP overlap off (--overlap-moe-expert-parallel-comm)'}"
                    + shared)
        late = ("; without --delay-wgrad-compute the backward's dispatch waits for the "
                "experts' weight gradients" if not getattr(cfg, "delay_wgrad", False) else "")
        return ("only paired passes overlap: warm-up and drain chunks run alone, and a "
                "pair's all-to-alls take SMs from its compute" + late)
    if getattr(cfg, "overlap_p2p", False):
        return ("overlapped with the chunk beside it (Megatron's overlap_p2p_comm): what "
                "outlasts that chunk's compute")
    return "blocking send/recv of each micro-batch's boundary tensors (Megatron's p2p)"


CALLS = {"tp": ("tp", "all_gather + reduce_scatter (all_reduce without SP)"),
         "cp": ("cp", "K/V ring send_recv / Ulysses all_to_all"),
         "ep": ("ep", "dispatch + combine all_to_all"),
         "pp": ("pp", "send_recv boundary activations"),
         "dp_gather_fwd": ("dp", "all_gather params for the forwards (ZeRO-3)"),
         "dp_gather_bwd": ("dp", "all_gather params again for the backwards (ZeRO-3)"),
         "dp_reduce": ("dp", "reduce_scatter grads after every micro-batch"),
         "dp_grads": ("dp", "gradient reduction at the step's end"),
         "dp_params": ("dp", "all_gather params after the optimizer step")}


def exposures(model, cfg, terms: dict) -> tuple[Exposed, ...]:
    """The exposed rows of one placement, largest first (``terms``: the time model's
    (exposed, issued) seconds per key of ``CALLS``)."""
    rows = []
    for key, (exposed, issued) in terms.items():
        exposed, issued = float(exposed), float(issued)
        if exposed <= 1e-12:
            continue
        axis, call = CALLS[key]
        rows.append(Exposed(axis, call, exposed, max(issued, exposed),
                            _why(model, cfg, key, exposed, issued)))
    return tuple(sorted(rows, key=lambda r: -r.exposed_s))
