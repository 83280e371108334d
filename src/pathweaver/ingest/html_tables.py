"""HTML ``<table>`` blocks of a Markdown text rewritten as pipe tables, so that each row keeps its column headers.

Notes (Obsidian, GitHub docs) often hold HTML tables, one tag a line; stripping the tags line by line would leave
loose cells without their row. A table the rewrite cannot read with confidence (no closing tag, a nested table, a
code fence inside) is left as it is.
"""

from __future__ import annotations

import itertools
import re
from html.parser import HTMLParser

from pathweaver.ingest.parsed import FENCE_RE

_OPEN_RE = re.compile(r"<table\b", re.IGNORECASE)
# an HTML block starts its line (CommonMark; any indent, as in a list): "use a `<table>` tag" in prose is no table
_START_RE = re.compile(r"^[ \t]*<table\b", re.IGNORECASE)
_CLOSE_RE = re.compile(r"</table\s*>", re.IGNORECASE)
# tags that end a word: "</a><br>caption" reads "... caption", while "<code>12</code>.5" stays "12.5"
_BREAKS = frozenset({"br", "p", "div", "li", "ul", "ol", "hr", "img", "pre", "blockquote",
                     "h1", "h2", "h3", "h4", "h5", "h6"})
_MAX_SPAN = 1000  # a colspan or rowspan beyond this is a typo, not a layout
# encloses a cell's text repeated by colspan or rowspan: the parser drops the marks and records the copy's range,
# which citation spans pass over, since the file spells the text out only once (``ingest.spans``)
COPY_MARK = "\ue001"


def _span(value: str | None) -> int:
    try:
        return min(max(int(value or "1"), 1), _MAX_SPAN)
    except ValueError:
        return 1


class _Cell:
    """One ``<td>``/``<th>``: its text so far and how many columns and rows it covers."""

    def __init__(self, header: bool, cols: int, rows: int) -> None:
        self.header, self.cols, self.rows = header, cols, rows
        self.parts: list[str] = []

    def text(self) -> str:
        return " ".join("".join(self.parts).split())


class _TableReader(HTMLParser):
    """The rows of one ``<table>`` (cells in order) and whether each stood in ``<thead>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)  # entities stay as written, as in the rest of the note
        self.rows: list[tuple[bool, list[_Cell]]] = []
        self.in_head = False
        self.row: list[_Cell] | None = None
        self.cell: _Cell | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "thead":
            self.in_head = True
        elif tag in ("tbody", "tfoot"):
            self.in_head = False
        elif tag == "tr":
            self._end_row()
            self.row = []
            self.rows.append((self.in_head, self.row))
        elif tag in ("td", "th"):
            if self.row is None:  # a cell without its <tr>: HTML opens the row
                self.handle_starttag("tr", [])
            a = dict(attrs)
            self.cell = _Cell(tag == "th", _span(a.get("colspan")), _span(a.get("rowspan")))
            assert self.row is not None
            self.row.append(self.cell)
        elif tag in _BREAKS:
            self.handle_data(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BREAKS:
            self.handle_data(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self.cell = None
        elif tag == "tr":
            self._end_row()
        elif tag == "thead":
            self.in_head = False
        elif tag in _BREAKS:
            self.handle_data(" ")

    def _end_row(self) -> None:
        self.row, self.cell = None, None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.parts.append(data)

    def handle_entityref(self, name: str) -> None:
        self.handle_data(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.handle_data(f"&#{name};")


def _grid(rows: list[list[_Cell]]) -> list[list[str]]:
    """The rows with each ``colspan`` cell repeated across its columns and each ``rowspan`` cell filled down; a
    repeated text stands between ``COPY_MARK``s."""
    grid: list[list[str]] = []
    below: dict[int, tuple[str, int]] = {}  # column -> (text, rows still to fill) of a rowspan from above
    for cells in rows:
        line: list[str] = []
        queue = list(cells)
        while queue or any(c >= len(line) for c in below):
            col = len(line)
            if col in below:
                text, left = below[col]
                line.append(_copy(text))
                if left > 1:
                    below[col] = (text, left - 1)
                else:
                    del below[col]
                continue
            if not queue:
                line.append("")  # a gap left of a rowspan still running further right
                continue
            cell = queue.pop(0)
            for i in range(cell.cols):
                if cell.rows > 1:
                    below[col + i] = (cell.text(), cell.rows - 1)
                line.append(_copy(cell.text()) if i else cell.text())
        grid.append(line)
    return grid


def _copy(text: str) -> str:
    return f"{COPY_MARK}{text}{COPY_MARK}" if text else ""


def _joined(texts: list[str]) -> str:
    """The header of a column under several ``<thead>`` rows: its distinct texts (a copy keeps its marks)."""
    first: dict[str, str] = {}
    for t in texts:
        if t:
            first.setdefault(t.strip(COPY_MARK), t)
    return " ".join(first.values())


def _pipe_row(cells: list[str], width: int) -> str:
    cells = cells + [""] * (width - len(cells))
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def table_lines(html: str) -> list[str]:
    """One ``<table>...</table>`` as pipe-table lines: the header row (the ``<thead>`` rows, joined column by
    column, or a first row of ``<th>`` cells), a rule and one line per row; rows without text are dropped, so a
    table of images gives none. A table without a header gives its rows apart (a blank line between), so that no
    row is read as a header."""
    reader = _TableReader()
    reader.feed(html)
    reader.close()
    rows = [(head, cells) for head, cells in reader.rows if cells]
    if not rows:
        return []
    grid = _grid([cells for _, cells in rows])
    heads = sum(1 for _ in itertools.takewhile(lambda r: r[0], rows)) or int(all(c.header for c in rows[0][1]))
    header = [_joined([r[col] for r in grid[:heads] if col < len(r)])
              for col in range(max(len(r) for r in grid[:heads]))] if heads else []
    body = [r for r in grid[heads:] if any(r)]
    width = max((len(r) for r in [header, *body]), default=0)
    if any(header) and body:
        lines = [_pipe_row(header, width), _pipe_row(["---"] * width, width)]
        return lines + [_pipe_row(r, width) for r in body]
    out: list[str] = []
    for r in [header, *body] if any(header) else body:
        out += [_pipe_row(r, width), ""]
    return out[:-1]


def _table_end(lines: list[str], start: int) -> int | None:
    """The index of the line that closes the table opened on ``lines[start]``; None where it is not closed before
    the end, another ``<table>`` or a code fence."""
    tail = _OPEN_RE.split(lines[start], maxsplit=1)[1]
    for i in range(start, len(lines)):
        line = tail if i == start else lines[i]
        close = _CLOSE_RE.search(line)
        opened = _OPEN_RE.search(line)
        if opened and (close is None or opened.start() < close.start()):
            return None  # a nested table: left to the line-by-line reading
        if close:
            return i
        if i > start and FENCE_RE.match(line):
            return None
    return None


def pipe_tables(text: str) -> str:
    """``text`` (Markdown) with each HTML table that starts a line outside fenced code rewritten by
    ``table_lines``, with a blank line either side; text after ``</table>`` on its line stays on a line of its
    own."""
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        if fence is not None:
            fence = None if raw.strip().startswith(fence) else fence
        elif (m := FENCE_RE.match(raw)) is not None:
            fence = m.group(1)[0] * len(m.group(1))
        elif _START_RE.match(raw) and (end := _table_end(lines, i)) is not None:
            block = "\n".join(lines[i:end + 1])
            closed = next(_CLOSE_RE.finditer(block))
            out += ["", *table_lines(block[:closed.end()]), "", block[closed.end():]]
            i = end + 1
            continue
        out.append(raw)
        i += 1
    return "\n".join(out)
