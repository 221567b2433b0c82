"""The rank layout as text and JSON: every axis's groups and links (``layout``), and where the
NVLink domain spans hosts, the hosts and domains a run fills and which axes stay inside one
(report, estimate and the planner's table).
"""
from __future__ import annotations

from itertools import islice


def domain_note(gpus: int, system) -> str:
    """Where the NVLink domain is more than one host: the hosts and the domains a job of
    ``gpus`` fills (``ledger.placement.layout.segment``)."""
    from ledger.placement.layout import segment

    if system.gpus_per_domain == system.gpus_per_node:
        return ""
    dom = segment(gpus, system.gpus_per_node, system.gpus_per_domain)
    return (f" ({-(-gpus // system.gpus_per_node)} hosts of {system.gpus_per_node} in "
            f"{-(-gpus // dom)} NVLink domain(s) of {dom})")


def links_note(c, system) -> str:
    """The axes whose groups stay inside one NVLink domain, and those that cross to the
    NICs, for a placement ``c`` on ``system``."""
    from ledger.placement import Layout

    lay = Layout(tp=c.tp, cp=c.cp, dp=c.dp, pp=c.pp, ep=c.ep, etp=c.etp,
                 hsdp_shard=c.hsdp_shard, gpus_per_node=system.gpus_per_node,
                 gpus_per_domain=system.gpus_per_domain)
    axes = [a for a in ("tp", "cp", "ep", "dp", "pp") if getattr(c, a) > 1]
    if getattr(c, "hsdp_shard", None):  # HSDP: FSDP's shard group and its replicas
        axes += [g for g in ("shard", "replicate") if lay.group_size(g) > 1]
    inside = [a for a in axes if lay.link(a) == "nvlink"]
    out = [a for a in axes if a not in inside]
    return (f"  [nvlink {' '.join(inside) or '-'}; nics {' '.join(out) or '-'}]"
            if axes else "")


def domain_line(cfg, system) -> list[str]:
    """Where the NVLink domain spans hosts (NVL72): one line saying the hosts and domains
    the run fills and which axes' groups stay inside a domain; else nothing."""
    if system.gpus_per_domain == system.gpus_per_node:
        return []
    return [f"  NVLink domains      {cfg.world} GPUs{domain_note(cfg.world, system)}"
            f"{links_note(cfg, system)}"]


def domains_json(cfg, system) -> dict:
    """The hosts and NVLink domains a run fills and each axis's link (JSON); empty where
    the domain is one host."""
    from ledger.placement import Layout
    from ledger.placement.layout import segment

    if system.gpus_per_domain == system.gpus_per_node:
        return {}
    lay = Layout(tp=cfg.tp, cp=cfg.cp, dp=cfg.dp, pp=cfg.pp, ep=cfg.ep, etp=cfg.etp,
                 hsdp_shard=cfg.hsdp_shard, gpus_per_node=system.gpus_per_node,
                 gpus_per_domain=system.gpus_per_domain)
    return {"nvlink_domains": {
        "gpus_per_node": system.gpus_per_node, "gpus_per_domain": system.gpus_per_domain,
        "domain": segment(cfg.world, system.gpus_per_node, system.gpus_per_domain),
        "links": {a: lay.link(a) for a in ("tp", "cp", "ep", "dp", "pp", "shard", "replicate")
                  if (getattr(cfg, a) > 1 if a in ("tp", "cp", "ep", "dp", "pp") else
                      cfg.hsdp_shard is not None and lay.group_size(a) > 1)}}}


def layout_text(lay) -> str:
    """The groups of every axis, the way the seed draws its 16-GPU example; where the
    scale-up domain is more than one host, which groups stay inside a domain (NVLink)."""
    gpn, dom = lay.gpus_per_node, lay.domain
    racks = (lay.gpus_per_domain or gpn) != gpn
    where = (f" in {-(-lay.world // dom)} NVLink domain(s) of {dom}"
             + (f" (of {lay.gpus_per_domain} each)" if dom != lay.gpus_per_domain else "")
             if racks else "")
    lines = [f"{lay.world} GPUs = {-(-lay.world // gpn)} node(s) x {gpn}{where}; order "
             f"{lay.order} (the first axis varies fastest)"]
    mark = "   <- crosses NVLink domains" if racks else "   <- crosses nodes"
    for axis in _layout_axes(lay):
        size = lay.group_size(axis)
        lines.append(f"  {axis} groups ({lay.link(axis)}):")
        for g in islice(lay.iter_groups(axis), 16):
            crosses = len({r // dom for r in g}) > 1
            shown = g if size <= 32 else g[:16] + ["..."] + g[-4:]  # a row stays a row
            lines.append(f"    [{', '.join(map(str, shown))}]" + (mark if crosses else ""))
        if lay.world // size > 16:
            lines.append(f"    ... {lay.world // size - 16:,} more")
    return "\n".join(lines)


def _layout_axes(lay) -> list[str]:
    """The axes with more than one rank, and the expert grid's etp / edp groups when the
    experts are laid out apart from the dense ranks (ep > 1 or etp != tp)."""
    axes = [a for a in ("tp", "cp", "ep", "dp", "pp") if getattr(lay, a) > 1]
    if lay.ep > 1 or (lay.etp is not None and lay.etp != lay.tp):
        axes += [g for g in ("etp", "edp") if lay.group_size(g) > 1]
    return axes


def layout_json(lay) -> dict:
    axes = _layout_axes(lay)
    return {"world": lay.world, "order": lay.order, "gpus_per_node": lay.gpus_per_node,
            "gpus_per_domain": lay.gpus_per_domain or lay.gpus_per_node, "domain": lay.domain,
            "groups": {a: lay.groups(a) for a in axes}, "links": {a: lay.link(a) for a in axes}}
