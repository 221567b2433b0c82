"""The expert grid and token dispatcher a run holds in every candidate the planner
prices (``ledger.plan.search.EXPERT_FACTS``, the flex backend and SMs with HOST_FACTS):
what they are (``Held``), the candidates they pair with, their refusals, and the flex
dispatcher's buffers on the grid's rows.

A run's expert grid and dispatcher held fixed (``Held``: ``search.EXPERT_FACTS``) keep
only the candidates Megatron builds and the ledger prices with them: ETP x EP tiling one
PP stage (Megatron-Core parallel_state.py L874-884 @d98e8a64: world divisible by
etp x ep x pp), EP then ranging over the stage's ranks / etp; an expert TP other than
tp only under sequence parallelism, where the dispatcher starts from the SP shard
(``config.check_config``); the flex dispatcher at expert TP 1, the one it is modelled
at (``config.check_config``), and DeepEP over more than one rank ("DeepEP dispatcher
requires TPxEP > 1", token_dispatcher.py L1836 @d98e8a64).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ledger.config import DISPATCHERS
from ledger.errors import LedgerError, require_divides, require_positive
from ledger.model import ModelSpec
from ledger.placement import Layout
from ledger.placement.context import context_buffers
from ledger.plan.rows import present


@dataclass(frozen=True)
class Held:
    """The expert grid and dispatcher a run holds in every candidate: expert TP (None:
    each candidate's tp, Megatron's default), the token dispatcher (None: the
    framework's) and the flex dispatcher's backend (None: DeepEP)."""

    etp: int | None = None
    dispatcher: str | None = None
    backend: str | None = None

    def expert_tp(self, tp: int) -> int:
        return tp if self.etp is None else self.etp

    def sps(self, tp: int, fw=None) -> tuple:
        """The SP choices of a candidate of ``tp``: an expert TP other than tp needs the
        dispatcher to start from the SP shard (Megatron's, under SP)."""
        sps = (True, False) if tp > 1 else (True,)
        if self.expert_tp(tp) != tp:
            sps = (True,) if fw is None or fw.moe_tokens_sp_shard else ()
        return sps


def held_experts(model: ModelSpec, facts: dict | None) -> Held:
    """The expert grid and dispatcher the run's ``facts`` hold (``EXPERT_FACTS``, the flex
    backend), refused in one line where no candidate could price them: an expert TP that
    does not divide the experts' width, or above 1 under the flex dispatcher (modelled at
    etp 1 only, as ``config.check_config`` refuses it)."""
    facts = facts or {}
    held = Held(facts.get("etp"), facts.get("moe_dispatcher"), facts.get("ep_backend"))
    if held.dispatcher is not None and held.dispatcher not in DISPATCHERS:
        raise LedgerError("moe_dispatcher", f"must be one of {', '.join(DISPATCHERS)}, got "
                                            f"{held.dispatcher!r}")
    if held.etp is not None:
        require_positive("etp", held.etp)
        if model.is_moe:
            require_divides("moe_ffn_hidden", model.moe_ffn_hidden, "etp", held.etp)
        if held.dispatcher == "flex" and held.etp > 1:
            raise LedgerError("etp", f"the flex (DeepEP) dispatcher is modelled at etp 1 "
                                     f"only, got etp({held.etp})")
    return held


def held_words(held: Held) -> str:
    """What of the run's expert grid narrowed the candidates, for the empty grid's line."""
    words = [f"etp {held.etp}"] if held.etp is not None else []
    if held.dispatcher == "flex":
        words.append("the flex dispatcher (at expert TP 1)")
    return f", {' and '.join(words)} held" if words else ""


def grid_context(model, cfg, g, sel, tp, ep, pp, etp, hosts, flex: bool) -> dict:
    """``ledger.placement.context_buffers`` of the rows ``sel`` of one stage layout (the
    flex dispatcher's DeepEP / HybridEP buffers), the EP ranks sharing one NVLink domain
    counted as ``place`` counts them: those of an EP group in one domain of the rows'
    rank layout on ``hosts`` (GPUs per host, per domain), min(ep, 8) without EP; ``flex``:
    the run's dispatcher is flex (``config.dispatcher``)."""
    if not flex:
        return context_buffers(model, cfg)  # none: the buffers are the flex dispatcher's
    local = min(ep, 8)
    if ep > 1:
        lay = Layout(tp=np.full(len(sel), tp), cp=g["cp"][sel], dp=g["dp"][sel], pp=pp,
                     ep=ep, etp=tp if etp is None else etp, gpus_per_node=hosts[0],
                     gpus_per_domain=hosts[1])
        local = np.broadcast_to(lay.per_node("ep"), (len(sel),))[:, None]
    sp = np.asarray(cfg.sequence_parallel).reshape(-1)  # the tokens read SP: one at a time
    out: dict = {}
    for on in [bool(x) for x in present(sp)]:
        each = context_buffers(model, SimpleNamespace(**(vars(cfg) | {
            "sequence_parallel": on})), local)
        for name, v in each.items():
            out[name] = np.where(sp[:, None] == on, v, out.get(name, 0.0))
    return out
