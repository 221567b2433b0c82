"""Megatron's partial distributed optimizer (--num-distributed-optimizer-instances): the
groups parallel_state.py asserts it divides, one check for the CLI's flag
(``ledger.cli.placement_config``) and the Megatron launch reader
(``ledger.io.megatron.model.refusals``)."""
from __future__ import annotations


def instances_problem(n: int, tp: int, cp: int, dp: int, ep: int, etp: int) -> str | None:
    """Why Megatron's initialize_model_parallel asserts against ``n`` optimizer instances
    here, or None: they must divide dp x cp (parallel_state.py L922-926 @d98e8a64) and the
    expert data-parallel size, tp x cp x dp / (etp x ep) of a stage (L874-880, L1447-1449).

    >>> instances_problem(2, tp=1, cp=1, dp=8, ep=8, etp=1)
    'expert dp(1) = tp(1) * cp(1) * dp(8) / (etp(1) * ep(8)) is not divisible by 2 optimizer instances (parallel_state.py L1447-1449 @d98e8a64)'
    >>> instances_problem(2, tp=1, cp=1, dp=8, ep=4, etp=1) is None
    True
    """
    if (dp * cp) % n:
        return (f"dp({dp}) * cp({cp}) is not divisible by {n} optimizer instances "
                f"(parallel_state.py L922-926 @d98e8a64)")
    expert_dp = tp * cp * dp // (etp * ep)
    if expert_dp % n:
        return (f"expert dp({expert_dp}) = tp({tp}) * cp({cp}) * dp({dp}) / (etp({etp}) * "
                f"ep({ep})) is not divisible by {n} optimizer instances "
                f"(parallel_state.py L1447-1449 @d98e8a64)")
    return None
