"""``nautilus.yaml``: which sources a broker fans out to.

```yaml
limit: 30                      # rows asked of each source (optional)
sources:
  - id: tickets                # unique; what NAUTILUS_SOURCE_BOOSTS names
    type: sqlite_table         # sqlite_table | sqlite_fts | sqlite_graph | sqlite_vector
    path: demo/tickets.db      # relative: under NAUTILUS_DATA_DIR
    seed: tickets.jsonl        # relative: beside this file
    table: tickets
    search_columns: [title, description]
    timeout_s: 2               # optional, default 5
    # sqlite_vector also takes dim (default 1024): the stored vectors' size
```

String values may use ``${VAR}`` or ``${VAR:-default}``; they are expanded after
the YAML is parsed (``yaml.safe_load``), so a variable's value can never change
the file's structure. A missing variable is an error naming it — never its
neighbours' values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from nautilus.embedders import embedder_from_name
from nautilus.sources.base import Source
from nautilus.sources.sqlite_fts import SqliteFtsSource
from nautilus.sources.sqlite_graph import SqliteGraphSource
from nautilus.sources.sqlite_table import SqliteTableSource
from nautilus.sources.sqlite_vector import SqliteVectorSource

DEFAULT_LIMIT = 30
DEFAULT_TIMEOUT_S = 5.0
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class SourceConfigError(Exception):
    """The sources file is missing, malformed, or names something that does not exist."""


def bundled_demo_config() -> Path:
    """The demo ``nautilus.yaml`` shipped inside the package."""
    return Path(__file__).resolve().parents[1] / "demo" / "nautilus.yaml"


def expand_variables(value: Any, where: str = "") -> Any:
    """``${VAR}`` / ``${VAR:-default}`` in every string of a parsed YAML document."""
    if isinstance(value, dict):
        return {k: expand_variables(v, f"{where}.{k}" if where else str(k))
                for k, v in value.items()}
    if isinstance(value, list):
        return [expand_variables(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise SourceConfigError(f"{where}: environment variable {name} is not set "
                                f"(use ${{{name}:-default}} for a fallback)")

    return _VARIABLE.sub(substitute, value)


def load_source_specs(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The source entries of a config file and the per-source row limit."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SourceConfigError(f"cannot read sources config {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise SourceConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("sources"), list):
        raise SourceConfigError(f"{path}: expected a mapping with a 'sources' list")
    document = expand_variables(document)
    limit = document.get("limit", DEFAULT_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise SourceConfigError(f"{path}: limit must be an integer >= 1, got {limit!r}")
    specs = document["sources"]
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict) or not isinstance(spec.get("id"), str) or not spec["id"]:
            raise SourceConfigError(f"{path}: sources[{i}] needs a string 'id'")
        if spec["id"].lower() in seen:
            raise SourceConfigError(f"{path}: duplicate source id {spec['id']!r}")
        seen.add(spec["id"].lower())
    return specs, limit


def build_sources(path: Path, data_dir: Path, embedder_name: str,
                  cache_size: int = 10_000) -> tuple[list[Source], int]:
    """Instantiate the sources a config file lists (databases are built on first use)."""
    specs, limit = load_source_specs(path)
    base = path.parent
    data = data_dir.expanduser()
    sources = []
    for spec in specs:
        kind = spec.get("type")
        factory = _FACTORIES.get(str(kind))
        if factory is None:
            raise SourceConfigError(f"{path}: source {spec['id']!r} has unknown type {kind!r} "
                                    f"(valid: {', '.join(_FACTORIES)})")
        try:
            sources.append(factory(spec, base, data, embedder_name, cache_size))
        except KeyError as exc:
            raise SourceConfigError(f"{path}: source {spec['id']!r} ({kind}) "
                                    f"is missing option {exc}") from exc
        except (TypeError, ValueError, AttributeError) as exc:  # e.g. `table: null`
            raise SourceConfigError(f"{path}: source {spec['id']!r} ({kind}): {exc}") from exc
    return sources, limit


def _timeout(spec: dict[str, Any]) -> float:
    value = spec.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"timeout_s must be a number > 0, got {value!r}")
    return float(value)


def _vector_dim(spec: dict[str, Any], key: str, default: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 16:
        raise ValueError(f"{key} must be an integer >= 16, got {value!r}")
    return value


def _under(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _string_list(spec: dict[str, Any], key: str) -> list[str]:
    value = spec[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of column names")
    return value


_Factory = Callable[[dict[str, Any], Path, Path, str, int], Source]

_FACTORIES: dict[str, _Factory] = {
    "sqlite_table": lambda s, base, data, _e, _c: SqliteTableSource(
        s["id"], _under(data, s["path"]), _under(base, s["seed"]), s["table"],
        _string_list(s, "search_columns"), _timeout(s)),
    "sqlite_fts": lambda s, base, data, _e, _c: SqliteFtsSource(
        s["id"], _under(data, s["path"]), _under(base, s["seed"]), _string_list(s, "columns"),
        s.get("id_field", "id"), _timeout(s)),
    "sqlite_graph": lambda s, base, data, _e, _c: SqliteGraphSource(
        s["id"], _under(data, s["path"]), _under(base, s["entities"]),
        _under(base, s["edges"]), _timeout(s)),
    "sqlite_vector": lambda s, base, data, embedder, cache: SqliteVectorSource(
        s["id"], _under(data, s["path"]), _under(base, s["seed"]),
        _string_list(s, "text_fields"), embedder_from_name(
            "hashing" if embedder == "noop" else embedder, _vector_dim(s, "dim", 1024),
            cache),
        _timeout(s)),
}
