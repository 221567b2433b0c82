"""Which TOML-era torchtitan commit a job file belongs to: its sections and keys
(``_keys``), each commit's JobConfig with its defaults and the extensions the job names
(``_known``), and the commit that knows the most of them (``commit_of``; on a tie, the first
of ``flavours.COMMITS``). ``reader`` reads the file at that commit.
"""
from __future__ import annotations

from ledger.io.torchtitan.flavours import COMMITS, tables


def _keys(raw: dict, prefix: str = "") -> dict:
    """{"section": {key: value}} of a TOML, nested tables as dotted sections."""
    out: dict = {}
    for k, v in raw.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out |= _keys(v, name) or {name: {}}
        else:
            out.setdefault(prefix, {})[k] = v
    return out


def _known(short: str, sec: dict) -> dict:
    """{section: {key: default}} of a commit's JobConfig, with the extensions named."""
    t = tables(short)
    known = {s: {k: f["default"] for k, f in keys.items()} for s, keys in t["sections"].items()}
    for module in (sec.get("job", {}).get("custom_config_module"),
                   sec.get("experimental", {}).get("custom_args_module")):
        for rel, sections in t["extensions"].items() if module else ():
            stem = rel[:-len(".py")].replace("/", ".")
            if module in (stem, stem.rsplit(".", 1)[0]):
                for s, keys in sections.items():
                    known[s] = known.get(s, {}) | {k: f["default"] for k, f in keys.items()}
    return known


def _unknown(sec: dict, known: dict) -> list[str]:
    out = []
    for s, keys in sec.items():
        if s not in known and s.split(".")[0] in ("quantize",) and not keys:
            continue
        out += [f"[{s}]"] if s not in known else [f"{s}.{k}" for k in keys if k not in known[s]]
    return out


def commit_of(sec: dict) -> tuple[str, dict, list[str]]:
    """The commit the file belongs to, its JobConfig with defaults, and unknown keys."""
    best = None
    for short in COMMITS:
        known = _known(short, sec)
        unknown = _unknown(sec, known)
        if best is None or len(unknown) < len(best[2]):
            best = (short, known, unknown)
    return best
