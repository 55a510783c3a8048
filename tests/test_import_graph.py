"""No import cycle in the package, the benchmarks or the tools, not even through a
deferred import; and none between their rooms (the package's folders and top-level
modules, the benchmarks, the tools), so every import runs downward.

The graph has an edge ``a -> b`` for every import of ``b`` written in ``a``: at the
top, under ``if TYPE_CHECKING:``, or inside a function. The package defers an
import into a function for one of two reasons only: an optional extra (psycopg,
onnxruntime, uvicorn, mcp, langchain, llama-index) that a plain install lacks, or a
command's machinery that ``nautilus`` loads only when that command runs, so
``nautilus-ranking query`` starts fast. Never to break a cycle: a deferred import that did
would hide a dependency going both ways, so those count too. The benchmarks and the
tools defer imports for the same reasons (and to keep a child process light); the
graph spans them and the package together, so a cycle through any of them shows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nautilus_ranking

ROOT = Path(nautilus_ranking.__file__).parent
#: Every folder of modules that imports by package name: the package, the benchmarks, the tools.
ROOTS = (ROOT, ROOT.parent / "benchmarks", ROOT.parent / "tools")


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(roots: tuple[Path, ...] = (ROOT,)) -> dict[str, set[str]]:
    """Each module under ``roots`` to the modules under them it imports, wherever the
    import is (each root a package beside the others, named by its folder)."""
    modules = {_module_name(p, root): p for root in roots for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                # `from pkg import mod` imports the module pkg.mod; `from mod import x`, mod
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for child in sorted(graph[node]):
            found = visit(child)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return None


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert "nautilus_ranking.log" in graph["nautilus_ranking.settings.model"]
    assert "nautilus_ranking.settings.model" in graph["nautilus_ranking.cli.query"]


def test_no_module_imports_itself_back() -> None:
    assert _cycle(import_graph()) is None


def test_the_graph_sees_the_benchmarks_and_the_tools() -> None:
    graph = import_graph(ROOTS)
    assert "benchmarks.speed.demo_timing" in graph["benchmarks.speed.request_overhead"]
    assert "benchmarks.speed.demo_timing" in graph["benchmarks.speed.trace_overhead"]
    # `from benchmarks.quality import partitioned`, deferred into a function or not
    assert "benchmarks.quality.partitioned" in graph["benchmarks.quality.boost_safety"]
    assert "benchmarks.quality.boost_safety" in graph["benchmarks.quality.quality"]
    assert "tools.revisions" in graph["benchmarks.speed.speed"]
    assert "nautilus_ranking" in graph["benchmarks.speed.demo_timing"]
    assert {"benchmarks.broker.inside", "tools.hostile_http"} <= set(graph)


def test_no_benchmark_or_tool_imports_itself_back() -> None:
    assert _cycle(import_graph(ROOTS)) is None


def test_a_deferred_cycle_between_two_benchmarks_would_be_found(tmp_path: Path) -> None:
    """The circle the benchmarks once had: each side's import inside a function."""
    room = tmp_path / "benchmarks" / "speed"
    room.mkdir(parents=True)
    for folder in (room.parent, room):
        (folder / "__init__.py").write_text("")
    (room / "request_overhead.py").write_text(
        "def main():\n    from benchmarks.speed.trace_overhead import report\n"
    )
    (room / "trace_overhead.py").write_text(
        "def report():\n    from benchmarks.speed import request_overhead\n"
    )
    assert _cycle(import_graph((tmp_path / "benchmarks",))) == [
        "benchmarks.speed.request_overhead",
        "benchmarks.speed.trace_overhead",
        "benchmarks.speed.request_overhead",
    ]


def room_of(module: str) -> str:
    """The room a module stands in: a folder or top-level module of the package, the
    benchmarks, or the tools."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "nautilus_ranking" else parts[0]


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each room to the rooms its modules import."""
    rooms: dict[str, set[str]] = {room_of(name): set() for name in graph}
    for name, targets in graph.items():
        rooms[room_of(name)].update(room_of(t) for t in targets if room_of(t) != room_of(name))
    return rooms


def test_every_import_runs_downward() -> None:
    """No two rooms import each other, even through others: the rooms stand on floors,
    each importing only the ones below it (service and cli, request and profiles,
    settings and profiles, tracing and sources, the tools and the benchmarks once did)."""
    assert _cycle(room_graph(import_graph(ROOTS))) is None


def test_two_rooms_importing_each_other_would_be_found(tmp_path: Path) -> None:
    """Modules apart in their rooms, no cycle between modules, yet the rooms do."""
    package = tmp_path / "nautilus_ranking"
    for room in ("cli", "service"):
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "cli" / "config.py").write_text("def check():\n    pass\n")
    (package / "cli" / "serve.py").write_text("from nautilus_ranking.service import server\n")
    (package / "service" / "server.py").write_text(
        "def start():\n    from nautilus_ranking.cli.config import check\n"
    )
    graph = import_graph((package,))
    assert _cycle(graph) is None
    assert _cycle(room_graph(graph)) == [
        "nautilus_ranking.cli",
        "nautilus_ranking.service",
        "nautilus_ranking.cli",
    ]


def test_a_cycle_would_be_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_module_imports_a_private_name_of_another() -> None:
    """What one module takes from another is public: named without ``_`` and documented
    (the settings' parsers live in ``nautilus_ranking.settings.parsing`` for that reason)."""
    private = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "nautilus_ranking"
            ):
                private += [
                    f"{_module_name(path)}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert private == []


def test_the_settings_parsers_are_public_and_say_what_they_accept() -> None:
    from nautilus_ranking.settings import parsing as settings_parsing

    parsers = [
        getattr(settings_parsing, n) for n in dir(settings_parsing) if n.startswith("parse_")
    ]
    assert len(parsers) == 14
    assert all(p.__doc__ and p.__module__ == "nautilus_ranking.settings.parsing" for p in parsers)
    assert settings_parsing.parse_int("top_k", "0")[1] is not None
