"""A sources file with a real long row, for the tests of a row handed over in part: one
SQLite source whose ``long`` row holds the answer between two runs of filler (far past
any budget the tests set) and whose ``short`` row matches the query in a few words;
and a server's keys and ranking profiles over it."""

from __future__ import annotations

import json
from pathlib import Path

FILLER = " ".join(
    f"The committee reviewed quarterly figures number {i} and staffing plans again."
    for i in range(80)
)
ANSWER = "To restart the payments service drain the queue then run the failover script."
LONG = FILLER + " " + ANSWER + " " + FILLER
QUERY = "restart payments service failover"
#: The short row: the query's words densely, so by words it ranks above the long row.
SHORT = "payments service restart failover notes"


def write_sources(tmp: Path) -> Path:
    """``tmp/nautilus.yaml``: the ``docs`` source (``long`` and ``short``)."""
    seed = tmp / "docs.jsonl"
    rows = [
        {"id": "long", "title": "Quarterly notes", "body": LONG},
        {"id": "short", "title": "Payments", "body": SHORT},
    ]
    seed.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = tmp / "nautilus.yaml"
    path.write_text(
        "sources:\n  - id: docs\n    type: sqlite_fts\n"
        f"    path: docs/docs.db\n    seed: {seed}\n    columns: [title, body]\n"
    )
    return path


#: ``wide`` hands over both rows under 400 tokens (the long one in part); ``narrow``
#: keeps the best row only (the short one). Neither lets its callers override a knob.
PROFILES = """\
wide:
  ranking_top_k: 5
  ranking_max_tokens: 400
narrow:
  ranking_top_k: 1
  ranking_max_tokens: 400
"""
KEYS = "k-wide profile=wide\nk-narrow profile=narrow\n"


def service_environment(tmp: Path) -> dict[str, str]:
    """The long-rows source, the keys file and the profiles file (owner-only keys)."""
    (tmp / "keys").write_text(KEYS)
    (tmp / "keys").chmod(0o600)
    (tmp / "profiles.yaml").write_text(PROFILES)
    return {
        "NAUTILUS_CONFIG": str(write_sources(tmp)),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(tmp / "keys"),
        "NAUTILUS_PROFILES_FILE": str(tmp / "profiles.yaml"),
    }
