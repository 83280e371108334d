"""HTML tables in Markdown notes are read as pipe tables: each row keeps its column headers (colspan repeated,
rowspan filled down), image-only rows go, and what cannot be read with confidence is left as before."""

from __future__ import annotations

from pathlib import Path

from pathweaver.extractive.sentences import units
from pathweaver.ingest.parsed import ParsedDocument
from pathweaver.ingest.parsers import parse_file
from pathweaver.ingest.spans import file_spans
from pathweaver.service import Pathweaver

URGENCY = """# Urgency

The scores are as follows:

<table>
<thead>
  <tr>
    <th colspan="2">Property</th>
    <th>Score</th>
  </tr>
</thead>
<tbody>
  <tr>
    <td rowspan="2">Due</td>
    <td>due more than 7 days ago</td>
    <td><code>12.00000</code></td>
  </tr>
  <tr>
    <td>due 7 days ago</td>
    <td><code>12.00000</code></td>
  </tr>
  <tr>
    <td rowspan="3">Priority</td>
    <td>Highest</td>
    <td><code>9.0</code></td>
  </tr>
  <tr>
    <td>High</td>
    <td><code>6.0</code></td>
  </tr>
  <tr>
    <td>Low | <a href="https://example.org/low">lowest</a></td>
    <td><code>0.0</code></td>
  </tr>
</tbody>
</table>

We sometimes hear that the urgency ignores the user's Due Date and Priority.
"""

GALLERY = """# Shipping

Before the table.

<table class="no-border" style="width:100%;">
  <tr>
    <td style="width:50%;"><img src="a.jpg" alt="the laptop"></td>
    <td style="width:50%;"><img src="b.jpg" alt="the motherboard"></td>
  </tr>
</table>

After the table.
"""


def parse(tmp_path: Path, text: str, name: str = "note.md") -> ParsedDocument:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return parse_file(path, path.read_bytes())


def table_lines(doc: ParsedDocument) -> list[str]:
    return [line for line in doc.text.splitlines() if "|" in line]


def test_colspan_rowspan_thead_and_code_read_as_a_pipe_table(tmp_path: Path) -> None:
    doc = parse(tmp_path, URGENCY)
    assert table_lines(doc) == [
        "Property | Property | Score",
        "Due | due more than 7 days ago | 12.00000",
        "Due | due 7 days ago | 12.00000",
        "Priority | Highest | 9.0",
        "Priority | High | 6.0",
        "Priority | Low \\| lowest | 0.0",
    ]
    read = [u for u, _ in units(doc.text)]
    assert "Property: Priority; Property: Highest; Score: 9.0" in read
    assert "Property: Priority; Property: Low | lowest; Score: 0.0" in read
    assert "We sometimes hear that the urgency ignores the user's Due Date and Priority." in read
    assert doc.headings == [(0, "Urgency")]


def test_the_same_table_as_markdown_pipes_reads_the_same(tmp_path: Path) -> None:
    pipes = ("# Urgency\n\nThe scores are as follows:\n\n| Property | Property | Score |\n|---|---|---|\n"
             "| Due | due more than 7 days ago | `12.00000` |\n")
    html = ("# Urgency\n\nThe scores are as follows:\n\n<table><tr><th colspan=2>Property</th><th>Score</th></tr>\n"
            "<tr><td>Due</td><td>due more than 7 days ago</td><td><code>12.00000</code></td></tr></table>\n")
    assert parse(tmp_path, html, "b.md").text == parse(tmp_path, pipes, "a.md").text


def test_copied_cells_are_passed_over_by_citation_spans(tmp_path: Path) -> None:
    """"Due" and "Priority" are written once in the file: the span of the rows ends inside the table, not at the
    later "Due Date" and "Priority" of the last paragraph."""
    doc = parse(tmp_path, URGENCY)
    assert doc.source is not None
    start = doc.text.index("Priority | High |")
    end = doc.text.index("0.0", start) + 3
    (a, b), = file_spans(doc.text, doc.source, [(start, end)], doc.hidden, doc.copied)
    assert doc.source[a:b].startswith("High</td>") and doc.source[a:b].endswith("<code>0.0")
    assert b < doc.source.index("</table>")
    assert [doc.text[s:e] for s, e in doc.copied] == ["Property", "Due", "Priority", "Priority"]


def test_an_image_only_table_leaves_nothing(tmp_path: Path) -> None:
    doc = parse(tmp_path, GALLERY)
    assert doc.text == "Shipping\n\nBefore the table.\n\nAfter the table."


def test_a_header_less_table_keeps_rows_apart_and_captions(tmp_path: Path) -> None:
    doc = parse(tmp_path, "<table><tr><td><img src='a.jpg'><br><span>Jan 2026 - 91.5 kg</span></td>"
                          "<td>Jul 2026 - 81.4 kg</td></tr>\n<tr><td>a</td><td>b</td></tr></table>\n")
    assert doc.text == "Jan 2026 - 91.5 kg | Jul 2026 - 81.4 kg\n\na | b"
    assert [u for u, _ in units(doc.text)] == ["Jan 2026 - 91.5 kg; Jul 2026 - 81.4 kg", "a; b"]


def test_an_empty_corner_cell_keeps_the_headers(tmp_path: Path) -> None:
    """A pandas table: an empty ``<th>`` over the row labels, then a ``<th>`` label on each row."""
    doc = parse(tmp_path, "<table><thead><tr><th></th><th>logit</th><th>prob</th></tr></thead>\n"
                          "<tbody><tr><th>woman</th><td>-3.50</td><td>0.000158</td></tr>\n"
                          "<tr><th>tv</th><td>5.23</td><td>0.975007</td></tr></tbody></table>\n")
    assert [u for u, _ in units(doc.text)] == ["woman; logit: -3.50; prob: 0.000158", "tv; logit: 5.23; prob: 0.975007"]


def test_a_table_in_a_code_fence_is_left_alone(tmp_path: Path) -> None:
    doc = parse(tmp_path, "Example:\n\n```html\n<table>\n<tr><td>a</td><td>b</td></tr>\n</table>\n```\n")
    assert doc.text == "Example:\n\n<table>\n<tr><td>a</td><td>b</td></tr>\n</table>"


def test_a_table_tag_named_in_prose_is_no_table(tmp_path: Path) -> None:
    doc = parse(tmp_path, "Wrap the rows in a <table> tag.\n\nA second paragraph.\n\nClose it with </table> there.\n")
    assert doc.text == "Wrap the rows in a  tag.\n\nA second paragraph.\n\nClose it with  there."


def test_unclosed_and_nested_tables_read_as_before(tmp_path: Path) -> None:
    unclosed = "# Notes\n\n<table>\n<tr><td>alpha</td>\n<td>beta</td></tr>\n\n## Later\n\nThe rest of the note.\n"
    doc = parse(tmp_path, unclosed)
    assert doc.text == "Notes\n\nalpha\nbeta\n\nLater\n\nThe rest of the note."
    assert [h for _, h in doc.headings] == ["Notes", "Later"]
    nested = ("<table><tr><td>outer\n<table><tr><td>inner</td><td>cell</td></tr></table>\n</td></tr></table>\n\n"
              "The rest of the note.\n")
    doc = parse(tmp_path, nested)
    assert "The rest of the note." in doc.text and "outer" in doc.text and "inner | cell" in doc.text


def test_a_block_id_and_an_embed_after_a_table_keep_their_offsets(tmp_path: Path) -> None:
    doc = parse(tmp_path, "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>\n"
                          "^tbl\n\nSee ![[Other note]] here.\n")
    start, end = doc.blocks["tbl"]
    assert doc.text[start:end] == "k | v\na | 1"
    (at, target, _), = doc.embeds
    assert target == "Other note" and doc.text[at:].startswith("Other note here.")


def test_search_finds_a_row_of_an_html_table(tmp_path: Path) -> None:
    """End to end on a real store and the real embedder: a value of one row is found with its row and headers."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "Urgency.md").write_text(URGENCY, encoding="utf-8")
    (notes / "Shipping.md").write_text(GALLERY, encoding="utf-8")
    (notes / "Priority.md").write_text("# Priority\n\nType the red triangle emoji to give a task the highest "
                                       "priority.\n", encoding="utf-8")
    with Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}}) as pw:
        pw.index([notes])
        hits = pw.search("urgency score of a Highest priority task", "hybrid", 3)
    top = next(h for h in hits if h["doc"].endswith("Urgency.md"))
    assert "Priority | Highest | 9.0" in top["text"]
    a, b = top["span"]
    assert "<td>Highest</td>" in URGENCY[a:b]
