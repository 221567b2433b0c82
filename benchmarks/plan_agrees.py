"""Issue 31's must-hold 3, plan and report agree: every Megatron-Bridge row (each priced as
``ledger.render.bridge`` prices it) run through ``plan`` pinned to its own placement, with
the run's facts held (``ledger.plan.search`` RUN_FACTS, HOST_FACTS, EXPERT_FACTS and the
buffers) - the planner's best candidate of that shape against ``estimate``'s step time and
``report``'s required memory. Rows whose settings the planner does not search (a stage
split, fine-grained activation offload modules, optimizer offload, capacity padding,
recompute of some layers, HSDP) are counted apart. About 20 s."""
from ledger.render.plan_agrees import summary

if __name__ == "__main__":
    print("\n".join(summary()))
