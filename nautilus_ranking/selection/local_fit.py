"""A local fit of the confidence: the file ``nautilus-ranking calibrate`` writes, read back.

The file holds the fit in the shipped file's shape (``setups``: one scoring setup's
logistic and isotonic map, ``selection/confidence.py``), what it was **made for** (the
sources file's digest, the embedder and the scoring setup; the config hash of
``config_hash.py`` beside them), its **provenance** (version, date, the queries counted)
and the **threshold** it recommends with what that promises.

A fit is true only of the sources and the scorer it was made on. So a configured fit
(``NAUTILUS_RANKING_CONFIDENCE_FIT``) is checked at start
(``confidence_fit_check.py``): a file that is missing or is not a fit, or one made for
another sources file, embedder or scoring setup, is a problem no start skips. Never a
silent fallback to the shipped fit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.selection import confidence

#: What the file says it is (bumped when its shape changes).
FIT_FORMAT = "nautilus-ranking confidence fit 1"


class FitFileError(NautilusError):
    """A fit file that cannot be read as one."""


@dataclass(frozen=True)
class LocalFit:
    """A fit file as read: its ``fits`` by setup, what it was ``made_for``, its
    ``provenance`` and ``threshold`` (as written)."""

    path: Path
    fits: dict[str, confidence.Fit]
    made_for: dict[str, Any]
    provenance: dict[str, Any]
    threshold: dict[str, Any]


def sources_digest(sources_file: Path) -> str:
    """The sha256 of the sources file's bytes (a moved file is the same sources)."""
    return hashlib.sha256(Path(sources_file).read_bytes()).hexdigest()


def read_fit(path: str | Path) -> LocalFit:
    """The fit file at ``path`` (a :class:`FitFileError` naming it and what is wrong),
    read once per process: each profile's ranker asks for it, and a server keeps the
    fit it was started with (a new fit takes a restart, as any setting does)."""
    return _read(str(Path(path).expanduser()))


@lru_cache(maxsize=32)
def _read(path: str) -> LocalFit:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise FitFileError(f"{path}: cannot read the fit file ({exc.strerror})") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise FitFileError(f"{path}: not a fit file ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != FIT_FORMAT:
        raise FitFileError(f'{path}: not a fit file (no "format": {FIT_FORMAT!r})')
    try:
        fits = confidence.parse_fits(document)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise FitFileError(f"{path}: its setups do not parse ({exc!r})") from exc
    if not fits:
        raise FitFileError(f"{path}: it holds no fit")
    return LocalFit(
        Path(path),
        fits,
        dict(document.get("made_for", {})),
        dict(document.get("provenance", {})),
        dict(document.get("threshold", {})),
    )


def local_fits(path: str | None) -> dict[str, confidence.Fit] | None:
    """The fits the ranking reads: the file's at ``path``, or None (the shipped ones).
    A file that cannot be read raises: the start has checked it."""
    return None if path is None else read_fit(path).fits
