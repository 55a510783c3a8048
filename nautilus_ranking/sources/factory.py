"""``nautilus.yaml``: which sources a broker fans out to (format: ``docs/sources.md``).

```yaml
limit: 30                      # rows asked of each source (optional, 1..10000)
sources:
  - id: tickets                # unique; what NAUTILUS_SOURCE_BOOSTS names
    type: sqlite_table         # sqlite_table | sqlite_fts | sqlite_graph | sqlite_vector
                               # | postgres_fts | pgvector | postgres_table (docs/sources.md)
    path: demo/tickets.db      # inside NAUTILUS_DATA_DIR (see project_dir)
    seed: tickets.jsonl        # relative: beside this file
    table: tickets
    search_columns: [title, description]
    timeout_s: 2               # optional, default 5
```

The models live in ``schema.py`` (shared options) and beside each source type
(``sqlite_table.py``…); importing this module declares the built-in types, each one
imported when a sources file first names it (:class:`~nautilus_ranking.sources.schema.SourceTypes`).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from nautilus_ranking.sources.schema import (
    DEFAULT_LIMIT,
    DEFAULT_TIMEOUT_S,
    SOURCE_TYPES,
    BuildContext,
    SourceConfigError,
    SourcesFile,
    expand_variables,
    load_sources,
    sources_json_schema,
)

if TYPE_CHECKING:
    from nautilus_ranking.sources.base import Source

__all__ = [
    "BUILT_IN_TYPES",
    "DEFAULT_DATA_DIR",
    "DEFAULT_LIMIT",
    "DEFAULT_TIMEOUT_S",
    "SOURCE_TYPES",
    "BuildContext",
    "SourceConfigError",
    "SourcesFile",
    "build_sources",
    "bundled_demo_config",
    "expand_variables",
    "load_source_specs",
    "load_sources",
    "project_dir",
    "sources_json_schema",
]
#: NAUTILUS_DATA_DIR's default, shared by every project of the user (see project_dir).
DEFAULT_DATA_DIR = Path("~/.cache/nautilus")
#: The built-in source types and the module that registers each (imported on first use).
BUILT_IN_TYPES = {
    "elasticsearch": "nautilus_ranking.sources.http.presets",
    "http": "nautilus_ranking.sources.http.spec",
    "postgres_fts": "nautilus_ranking.sources.postgres.fts",
    "postgres_table": "nautilus_ranking.sources.postgres.table",
    "pgvector": "nautilus_ranking.sources.postgres.vector",
    "sqlite_fts": "nautilus_ranking.sources.sqlite.fts",
    "sqlite_graph": "nautilus_ranking.sources.sqlite.graph",
    "sqlite_table": "nautilus_ranking.sources.sqlite.table",
    "sqlite_vector": "nautilus_ranking.sources.sqlite.vector",
    "typesense": "nautilus_ranking.sources.http.presets",
}
for _name, _module in BUILT_IN_TYPES.items():
    SOURCE_TYPES.declare(_name, _module)


def bundled_demo_config() -> Path:
    """The demo ``nautilus.yaml`` shipped inside the package."""
    return Path(__file__).resolve().parents[1] / "demo" / "nautilus.yaml"


def load_source_specs(path: Path) -> SourcesFile:
    """The validated sources file (kept under its old name for callers)."""
    return load_sources(path)


def project_dir(path: Path, data_dir: Path) -> Path | None:
    """Where a sources file's relative ``path:`` values live inside the data dir.

    The default NAUTILUS_DATA_DIR is one folder for every project of a user, so two
    sources files both saying ``path: shop/faqs.db`` would build (and rebuild, each on
    the other's seed) the same file: under the default, each sources file gets a folder
    of its own, ``projects/<file name>-<12 hex of its absolute path>``. A data dir that
    is set is the project's own (the deploy files set one), and paths are used as written.
    """
    if data_dir.expanduser() != DEFAULT_DATA_DIR.expanduser():
        return None
    where = path.expanduser().resolve()
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", where.stem)[:40] or "sources"
    key = hashlib.sha256(str(where).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return data_dir.expanduser() / "projects" / f"{stem}-{key}"


def build_sources(
    path: Path,
    data_dir: Path,
    embedder_name: str,
    cache_size: int = 10_000,
    disk_cache_mb: int = 0,
) -> tuple[list[Source], int]:
    """Validate a sources file and build its sources (seeds checked, paths resolved —
    see :func:`project_dir`; databases are built on first use). A
    :class:`SourceConfigError` names the problem."""
    document = load_sources(path)
    ctx = BuildContext(
        base_dir=path.parent,
        data_dir=data_dir.expanduser(),
        embedder_name=embedder_name,
        cache_size=cache_size,
        relative_dir=project_dir(path, data_dir),
        disk_cache_mb=disk_cache_mb,
    )
    sources: list[Source] = []
    try:
        for i, spec in enumerate(document.specs):
            try:
                source = spec.build(ctx)
            except (ValueError, OSError) as exc:
                raise SourceConfigError(
                    f"{path}: sources[{i}] ({spec.id}, {spec.type}): {exc}"
                ) from None
            if spec.ranked is not None:
                source.ranked = spec.ranked
            for option in ("time_field", "document_key"):  # where time and revisions are
                if getattr(spec, option) is not None:
                    setattr(source, option, getattr(spec, option))
            with contextlib.suppress(AttributeError):  # what a trace calls its type
                source.source_type = spec.type  # type: ignore[attr-defined]
            sources.append(source)
    except BaseException:
        for source in sources:
            source.close()
        raise
    return sources, document.limit
