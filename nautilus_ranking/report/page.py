"""One static HTML page, and a PNG beside it for each chart.

Everything the page shows is in the file: its CSS in a ``<style>`` element, each chart
as a ``data:image/png;base64`` image, no script, no link, no font or stylesheet to
fetch. So it renders the same offline, and opening it tells no server anything. Text is
escaped; a chart is drawn only when the ``report`` extra is installed, and otherwise
the section says which extra draws it.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nautilus_ranking.report.charts import REPORT_EXTRA, Chart, charts_available

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td + td { white-space: nowrap; }
th { background: #f3f3f3; }
caption { caption-side: top; text-align: left; color: #555; padding-bottom: 0.3em; }
figure { margin: 1em 0; } img { max-width: 100%; height: auto; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
.missing { color: #8a4b00; background: #fff6e5; padding: 0.5em; }
"""


@dataclass
class Table:
    """A table: its header, its rows (cells as shown) and a caption."""

    head: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Section:
    """A heading, paragraphs, preformatted blocks, tables, and charts to draw: each
    chart a function that draws it (called only when the charts can be drawn)."""

    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Callable[[], Chart]] = field(default_factory=list)
    preformatted: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Written:
    """What was written: the page, the PNG beside it for each chart, and whether the
    charts were left out (the ``report`` extra is not installed)."""

    page: Path
    pngs: list[Path]
    charts_missing: bool

    @property
    def described(self) -> str:
        """`` (3 charts, PNGs beside it)``, or what is missing."""
        if self.charts_missing:
            return f" (tables only: the charts need the report extra, {REPORT_EXTRA})"
        return f" ({len(self.pngs)} charts, PNGs beside it)" if self.pngs else ""


def write_report(path: Path, title: str, sections: Sequence[Section]) -> Written:
    """Write the page at ``path`` and each chart as ``<stem>-<chart>.png`` beside it."""
    drawing = charts_available()
    pngs: list[Path] = []
    body = [f"<h1>{html.escape(title)}</h1>"]
    wanted = any(section.charts for section in sections)
    if wanted and not drawing:
        body.append(
            f'<p class="missing">Charts are not drawn: they need the <code>report</code> '
            f"extra (<code>{html.escape(REPORT_EXTRA)}</code>). The tables are complete.</p>"
        )
    for section in sections:
        body.append(f"<h2>{html.escape(section.title)}</h2>")
        body += [f"<p>{html.escape(text)}</p>" for text in section.paragraphs]
        body += [f"<pre>{html.escape(text)}</pre>" for text in section.preformatted]
        body += [_table(table) for table in section.tables]
        for draw in section.charts if drawing else []:
            chart = draw()
            png = path.with_name(f"{path.stem}-{chart.name}.png")
            _write(png, chart.png)
            pngs.append(png)
            body.append(_figure(chart, png.name))
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
    _write(path, page.encode("utf-8"))
    return Written(path, pngs, wanted and not drawing)


def unwritable(path: Path) -> str | None:
    """Why the page cannot be written at ``path`` (None: it can): found before a long
    run rather than after it."""
    if path.is_dir():
        return f"{path} is a folder: give the page's file name (report.html)"
    if not path.parent.is_dir():
        return f"cannot write {path}: no folder {path.parent}"
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    if not existed:
        path.unlink()
    return None


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise OSError(f"--report: cannot write {path}: {exc.strerror}") from exc


def _table(table: Table) -> str:
    caption = f"<caption>{html.escape(table.caption)}</caption>" if table.caption else ""
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in table.head)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in table.rows
    )
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _figure(chart: Chart, file_name: str) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    alt = html.escape(chart.title)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{alt}" '
        f'data-chart="{html.escape(chart.name)}">'
        f"<figcaption>{alt} (also {html.escape(file_name)})</figcaption></figure>"
    )
