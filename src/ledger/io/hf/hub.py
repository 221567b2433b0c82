"""A hub id (``Qwen/Qwen3-235B-A22B``) resolved to the config.json the local Hugging Face
cache holds, offline, in huggingface_hub's layout (``file_download.py``,
``constants.py``): ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``; a model lives in ``models--{org}--{name}``, ``refs/main``
names the snapshot the hub's main branch was at, ``snapshots/{rev}/config.json`` is the file.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ledger.errors import LedgerError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache",
                                                     "huggingface")
    return Path(home).expanduser() / "hub"


def is_hub_id(text: str) -> bool:
    """``org/name`` that is not a local path."""
    return bool(HUB_ID.match(text)) and not Path(text).exists()


def hub_config(repo_id: str) -> Path:
    """The cached config.json of ``repo_id`` at the revision refs/main names (or the one
    snapshot holding a config.json); one line saying where it looked when it is not there."""
    folder = cache_dir() / f"models--{repo_id.replace('/', '--')}"
    snapshots = folder / "snapshots"
    ref = folder / "refs" / "main"
    if ref.is_file():
        rev = ref.read_text().strip()
        path = snapshots / rev / "config.json"
        if path.is_file():
            return path
    found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise LedgerError("model", f"{repo_id!r}: {len(found)} cached snapshots in {snapshots} "
                                   f"and no refs/main; give the config.json path")
    raise LedgerError("model", f"{repo_id!r} is not in the local Hugging Face cache (no "
                               f"config.json under {folder}); fetch it with `hf download "
                               f"{repo_id} config.json` or give a config.json path")
