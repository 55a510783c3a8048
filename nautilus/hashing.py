"""The upstream broker's canonical response hash."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def compute_response_hash(data: Any) -> str:
    """``"sha256:" + sha256(canonical JSON)``: key order is not significant, row order is."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
