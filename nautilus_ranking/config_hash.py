"""The config hash: one short digest naming what a ranking was made under.

A fit of the confidence (``calibrate``) and a log of what agents used (feedback) are
both true only of the sources and the ranking knobs they were made with. Each records
this hash, and whatever reads them back compares it with the hash of what is
configured now, so a fit or a log made for other sources, another embedder or other
knobs is told apart instead of silently applied.

It hashes the sources file's bytes (not its path: a moved file is the same sources)
and every ranking knob in force (``settings/knobs.py``: the ranking knobs and the
embedder, the embedder as resolved, IDF as resolved). Process settings (ports,
logging, keys) are not in it: they change nothing a fit or a log measures.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from nautilus_ranking.selection.local_fit import sources_digest
from nautilus_ranking.settings.knobs import KNOBS
from nautilus_ranking.settings.model import NautilusSettings

#: Bumped when what the hash covers changes, so an old hash never matches a new one.
CONFIG_HASH_VERSION = 1


def config_inputs(settings: NautilusSettings, sources_file: Path) -> dict[str, Any]:
    """What the hash covers, as JSON-able values (shown beside a refused fit)."""
    values = settings.model_dump(mode="json")
    values["embedder"] = settings.resolved_embedder
    values["ranking_idf"] = settings.resolved_idf
    return {
        "version": CONFIG_HASH_VERSION,
        "sources_file": sources_digest(sources_file),
        "knobs": {k.field: values[k.field] for k in KNOBS},
    }


def config_hash(settings: NautilusSettings, sources_file: Path) -> str:
    """The 16-hex-digit digest of :func:`config_inputs`."""
    raw = json.dumps(config_inputs(settings, sources_file), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]
