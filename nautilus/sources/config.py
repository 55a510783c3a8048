"""``nautilus.yaml``: which sources a broker fans out to (format: ``docs/sources.md``).

```yaml
limit: 30                      # rows asked of each source (optional, 1..10000)
sources:
  - id: tickets                # unique; what NAUTILUS_SOURCE_BOOSTS names
    type: sqlite_table         # sqlite_table | sqlite_fts | sqlite_graph | sqlite_vector
                               # | postgres_fts | pgvector | postgres_table (docs/sources.md)
    path: demo/tickets.db      # inside NAUTILUS_DATA_DIR
    seed: tickets.jsonl        # relative: beside this file
    table: tickets
    search_columns: [title, description]
    timeout_s: 2               # optional, default 5
```

The models live in ``schema.py`` (shared options) and beside each source type
(``sqlite_table.py``…); importing this module registers the built-in types.
"""

from __future__ import annotations

from pathlib import Path

from nautilus.sources import (
    postgres_fts,
    postgres_table,
    postgres_vector,
    sqlite_fts,
    sqlite_graph,
    sqlite_table,
    sqlite_vector,
)
from nautilus.sources.base import Source
from nautilus.sources.schema import (
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

__all__ = [
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
    "sources_json_schema",
]
_BUILT_IN = (sqlite_fts, sqlite_graph, sqlite_table, sqlite_vector,  # registered on import
             postgres_fts, postgres_table, postgres_vector)


def bundled_demo_config() -> Path:
    """The demo ``nautilus.yaml`` shipped inside the package."""
    return Path(__file__).resolve().parents[1] / "demo" / "nautilus.yaml"


def load_source_specs(path: Path) -> SourcesFile:
    """The validated sources file (kept under its old name for callers)."""
    return load_sources(path)


def build_sources(path: Path, data_dir: Path, embedder_name: str,
                  cache_size: int = 10_000) -> tuple[list[Source], int]:
    """Validate a sources file and build its sources (seeds checked, paths resolved;
    databases are built on first use). A :class:`SourceConfigError` names the problem."""
    document = load_sources(path)
    ctx = BuildContext(base_dir=path.parent, data_dir=data_dir.expanduser(),
                       embedder_name=embedder_name, cache_size=cache_size)
    sources: list[Source] = []
    try:
        for i, spec in enumerate(document.specs):
            try:
                source = spec.build(ctx)
            except (ValueError, OSError) as exc:
                raise SourceConfigError(f"{path}: sources[{i}] ({spec.id}, {spec.type}): "
                                        f"{exc}") from None
            if spec.ranked is not None:
                source.ranked = spec.ranked  # type: ignore[attr-defined]
            sources.append(source)
    except BaseException:
        for source in sources:
            source.close()
        raise
    return sources, document.limit
