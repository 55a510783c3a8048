"""docs/design.md's Layout lists the package as it is: every module, every folder."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layout() -> str:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    match = re.search(r"^## Layout\n(.*?)^## ", design, re.S | re.M)
    assert match is not None, "docs/design.md has no Layout section"
    return match.group(1)


def test_every_module_and_folder_of_the_package_is_in_the_layout() -> None:
    layout = _layout()
    package = ROOT / "nautilus_ranking"
    missing = []
    for path in sorted(package.rglob("*.py")):
        if "models" in path.relative_to(package).parts or path.name == "__init__.py":
            continue
        folder = path.parent.relative_to(package)
        # a module is named on its folder's line (or lines) or on a line of its own
        if path.name not in layout or (folder.parts and f"{folder.parts[-1]}/" not in layout):
            missing.append(str(path.relative_to(package)))
    assert missing == []
    folders = {p.name for p in package.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert sorted(f for f in folders if f"{f}/" not in layout) == []


def test_the_layout_names_no_module_that_is_gone() -> None:
    names = set(re.findall(r"(?<![/\w])([a-z_]+\.py)\b", _layout()))  # not tests/….py
    existing = {p.name for p in (ROOT / "nautilus_ranking").rglob("*.py")}
    assert sorted(names - existing) == []


#: A Sphinx cross-reference in a docstring: ``:class:`~nautilus_ranking.broker.Broker```.
_REFERENCE = re.compile(r":(?:class|func|meth|mod|data|attr|exc):`~?([A-Za-z_][\w.]*)`")


def _defined(module: Path, names: list[str]) -> bool:
    """Whether ``names`` (a name, then its members) are defined in ``module``, by reading
    it: a top-level def, class or assignment (either branch of a top-level ``if``, as
    ``if TYPE_CHECKING:``), or a name it imports (followed there)."""
    body = ast.parse(module.read_text(encoding="utf-8")).body
    for at, name in enumerate(names):
        found: list[ast.stmt] = []
        branches = [n for node in body if isinstance(node, ast.If) for n in node.body + node.orelse]
        for node in body + branches:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == name:
                    found = node.body if isinstance(node, ast.ClassDef) else []
                    break
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    break
            elif isinstance(node, ast.ImportFrom) and node.module:
                alias = next((a for a in node.names if (a.asname or a.name) == name), None)
                if alias is not None:
                    rest = [alias.name, *names[at + 1 :]]
                    return _resolves(f"{node.module}.{'.'.join(rest)}")
        else:
            return False
        body = found
    return True


def _resolves(dotted: str) -> bool:
    """Whether a dotted path names a module of the package, or a name defined in one."""
    parts = dotted.split(".")
    if parts[0] != "nautilus_ranking":
        return False
    for split in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:split])
        for module in (base.with_suffix(".py"), base / "__init__.py"):
            if module.is_file():
                return split == len(parts) or _defined(module, parts[split:])
    return False


def test_every_path_a_docstring_names_exists() -> None:
    """A cross-reference names the package by its name today, and a module and a
    name that exist: a rename or a move leaves none pointing nowhere."""
    stale = sorted(
        f"{path.relative_to(ROOT)}: {target}"
        for path in (ROOT / "nautilus_ranking").rglob("*.py")
        for target in _REFERENCE.findall(path.read_text(encoding="utf-8"))
        if target.startswith("nautilus") and not _resolves(target)
    )
    assert stale == []


#: The longest a package function may run, in lines (its ``def`` to its last line).
_MOST_LINES = 100
#: Functions allowed over the limit, by module and name (none).
_LONG_FUNCTIONS: set[tuple[str, str]] = set()


def test_no_package_function_runs_over_a_hundred_lines() -> None:
    """A long function is split into named steps, each of which a reader can take in
    at once (nested functions count on their own, and inside their parent)."""
    package = ROOT / "nautilus_ranking"
    long = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > _MOST_LINES and (module, node.name) not in _LONG_FUNCTIONS:
                long.append(f"{module}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_recipe_for_a_ranking_signal_names_every_stage_of_the_pass() -> None:
    """docs/design.md's "Adding a ranking signal" names each stage the ranking pass
    calls (every function it imports from a stage module), so the recipe follows the
    pass when a stage is added."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    match = re.search(r"^## Adding a ranking signal\n(.*?)^## ", design, re.S | re.M)
    assert match is not None, "docs/design.md has no 'Adding a ranking signal' section"
    tree = ast.parse((ROOT / "nautilus_ranking/synthesis/rank_pass.py").read_text("utf-8"))
    imported = {
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("nautilus_ranking.synthesis.")
        and node.module != "nautilus_ranking.synthesis.query"
        for alias in node.names
    }
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    stages = sorted(imported & called)
    assert len(stages) >= 7
    assert [name for name in stages if f"`{name}`" not in match.group(1)] == []
