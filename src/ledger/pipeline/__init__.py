"""Pipeline schedules as data, the simulator that runs them, and their closed forms.

``schedules`` writes each schedule (GPipe, 1F1B, interleaved, ZB-H1, interleaved ZB, ZB-V,
DualPipe, DualPipeV; Megatron's combined 1F1B pairs) as one ordered action list per PP rank; ``simulator`` runs the lists on their
dependencies (makespan, bubble, activations in flight); ``makespan`` gives the same
makespans in closed form for a whole grid of placements at once, and the seed's bubble;
``held`` walks a rank's list for what it holds at each point (activations, the loss's
tensors, kept outputs), and says which point sets its peak in closed form.

Pure arithmetic over (schedule, pp, m, vp) and per-pass times: it knows no model and no
framework, so it sits directly on ``ledger.errors`` and imports nothing else of the ledger.
"""
from ledger.pipeline.held import (GRADS_KEPT, KEEP, Held, grad_sets, held_closed,
                                  input_grads_closed, walk)
from ledger.pipeline.makespan import (
                                      dual_s,
                                      first_backward_s,
                                      overlap_pairs,
                                      pipeline_s,
                                      pp_bubble_fraction,
                                      visits,
)
from ledger.pipeline.schedules import (
                                       DUAL,
                                       KINDS,
                                       SPLIT_BACKWARD,
                                       build,
                                       check,
                                       peak_inflight,
                                       schedule,
)
from ledger.pipeline.simulator import (
                                       Costs,
                                       check_cells,
                                       check_drawable,
                                       inflight_closed,
                                       placement_pipeline,
                                       simulate,
                                       simulated,
)

__all__ = ["Costs", "DUAL", "GRADS_KEPT", "Held", "KEEP", "KINDS", "SPLIT_BACKWARD", "build",
           "check", "check_cells", "check_drawable", "dual_s", "first_backward_s", "grad_sets",
           "held_closed", "inflight_closed", "input_grads_closed", "overlap_pairs",
           "peak_inflight", "pipeline_s", "placement_pipeline", "pp_bubble_fraction",
           "schedule", "simulate", "simulated", "visits", "walk"]
