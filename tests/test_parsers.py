"""Parsers for every supported format, on the fixtures in tests/fixtures and files built at test time."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pathweaver.ingest.parsed import SUPPORTED_SUFFIXES, ParseError, local_link_target
from pathweaver.ingest.parsers import parse_file

FIXTURES = Path(__file__).parent / "fixtures"


def _parse(name: str):
    path = FIXTURES / name
    return parse_file(path, path.read_bytes())


def _assert_headings_point_into_text(doc) -> None:
    for offset, heading in doc.headings:
        assert doc.text[offset : offset + len(heading)] == heading


def minimal_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A small valid PDF written by hand: one Helvetica text line per page, optional /Info title."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
        content_id = len(objects) + 1
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(len(objects) + 1)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"
            % content_id
        )
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    if title is not None:
        objects.append(f"<< /Title ({title}) >>".encode("latin-1"))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    info = b" /Info %d 0 R" % len(objects) if title is not None else b""
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref)
    )
    return out.getvalue()


def test_supported_suffixes() -> None:
    assert (
        frozenset({".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".pdf", ".docx"})
        == SUPPORTED_SUFFIXES
    )


def test_markdown_front_matter_headings_links() -> None:
    doc = _parse("marie_curie.md")
    assert doc.title == "Marie Curie"  # front matter wins over the first H1
    assert [h for _, h in doc.headings] == ["Maria Skłodowska", "Nobel Prizes", "Later life"]
    _assert_headings_point_into_text(doc)
    assert doc.links == ["Warsaw", "Pierre Curie", "henri_becquerel", "Vistula"]
    text = doc.text
    # front matter's tags are a property shown as text (``ingest.properties``); its title and fences and the
    # setext underline are gone
    assert text.startswith("tags: physics, chemistry\n\n") and "title:" not in text and "---" not in text
    assert "https://" not in text and "](" not in text and "**" not in text and "`" not in text
    assert "pioneering research on radioactivity." in text  # link text kept, URL dropped
    assert "She was born in Warsaw and married Pierre." in text  # wiki link -> target / alias
    assert "shared with Henri Becquerel." in text
    assert "for polonium and radium." in text  # emphasis and code markers stripped


def test_markdown_title_from_h1_then_stem(tmp_path: Path) -> None:
    assert parse_file(tmp_path / "x.md", b"intro\n# Real Title\nbody").title == "Real Title"
    doc = parse_file(tmp_path / "my_note-file.md", b"\xef\xbb\xbfJust text with a snake_case_name.")  # BOM
    assert doc.title == "my note file"
    assert doc.text == "Just text with a snake_case_name."
    fenced = parse_file(tmp_path / "c.md", b"# T\n```python\n# not a heading\nx = [1](2)\n```\n")
    assert [h for _, h in fenced.headings] == ["T"] and "# not a heading" in fenced.text


def test_txt_crlf_and_stem_title() -> None:
    doc = _parse("warsaw_city-notes.txt")
    assert doc.title == "warsaw city notes"
    assert doc.text == "Warsaw is the capital of Poland.\nIt lies on the Vistula river."
    assert doc.headings == [] and doc.links == []


def test_rst() -> None:
    doc = _parse("vistula.rst")
    assert doc.title == "Vistula"
    assert [h for _, h in doc.headings] == ["Vistula", "Course"]
    _assert_headings_point_into_text(doc)
    assert doc.links == ["warsaw", "krakow"]
    assert "The Vistula is the longest river in Poland, flowing through Warsaw." in doc.text
    assert "directive" not in doc.text and "===" not in doc.text


def test_html() -> None:
    doc = _parse("pierre.html")
    assert doc.title == "Pierre Curie"
    assert [h for _, h in doc.headings] == ["Pierre Curie", "Family"]
    _assert_headings_point_into_text(doc)
    assert doc.links == ["crystallography", "marie_curie"]  # the https link is not a local file
    assert "do not index me" not in doc.text and "color: red" not in doc.text and "comment" not in doc.text
    assert "a pioneer in crystallography, magnetism and radioactivity." in doc.text
    assert "Married Marie Curie in 1895.\nFather of Irène." in doc.text


def test_pdf_built_by_hand(tmp_path: Path) -> None:
    data = minimal_pdf(["Marie Curie discovered polonium.", "Radium glows in the dark."], title="Curie Notes")
    doc = parse_file(tmp_path / "curie.pdf", data)
    assert doc.title == "Curie Notes"
    assert "Marie Curie discovered polonium." in doc.text
    assert doc.text.index("polonium") < doc.text.index("\n\n") < doc.text.index("Radium")  # pages joined
    assert parse_file(tmp_path / "no-title.pdf", minimal_pdf(["x y z"])).title == "no title"


def test_pdf_errors(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="no extractable text"):
        parse_file(tmp_path / "blank.pdf", minimal_pdf([""]))
    with pytest.raises(ParseError, match="invalid PDF"):
        parse_file(tmp_path / "bad.pdf", b"%PDF-1.4\nthis is not really a pdf")


def test_docx_built_with_python_docx(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "Curie Family"
    document.add_heading("Marie Curie", level=1)
    document.add_paragraph("She won two Nobel Prizes.")
    document.add_heading("Children", level=2)
    document.add_paragraph("Irène Joliot-Curie and Ève Curie.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "born"
    table.rows[0].cells[1].text = "1867"
    buf = io.BytesIO()
    document.save(buf)
    doc = parse_file(tmp_path / "family.docx", buf.getvalue())
    assert doc.title == "Curie Family"
    assert [h for _, h in doc.headings] == ["Marie Curie", "Children"]
    _assert_headings_point_into_text(doc)
    assert "She won two Nobel Prizes." in doc.text and "born | 1867" in doc.text
    with pytest.raises(ParseError, match="invalid DOCX"):
        parse_file(tmp_path / "bad.docx", b"PK\x03\x04 not a zip")


@pytest.mark.parametrize("name", ["a.md", "a.txt", "a.rst", "a.html"])
def test_empty_and_invalid_utf8(tmp_path: Path, name: str) -> None:
    with pytest.raises(ParseError, match="empty document"):
        parse_file(tmp_path / name, b" \n\t\n ")
    if not name.endswith(".html"):  # HTML decoding falls back to the declared/guessed charset
        with pytest.raises(ParseError, match="invalid UTF-8 at byte 3"):
            parse_file(tmp_path / name, b"abc\xff\xfe")


def test_a_stub_note_is_its_front_matter_names(tmp_path: Path) -> None:
    data = b'---\ntitle: "Zero-shot Classification"\naliases: [ZSC]\nstatus: draft\n---\n\n'
    doc = parse_file(tmp_path / "zsc.md", data)
    assert doc.text == "aliases: ZSC" and doc.title == "Zero-shot Classification"  # its shown property is text
    doc = parse_file(tmp_path / "zsc.md", data.replace(b"aliases: [ZSC]", b"cssclasses: [wide]"))
    assert doc.text == "Zero-shot Classification" and doc.hidden == []  # no property shown: its names are
    with pytest.raises(ParseError, match="empty document"):  # front matter that names nothing is still empty
        parse_file(tmp_path / "bare.md", b"---\nstatus: draft\n---\n")


def test_unsupported_suffix(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"unsupported type \.xyz"):
        parse_file(tmp_path / "a.xyz", b"text")


def test_local_link_target() -> None:
    assert local_link_target("other.md") == "other"
    assert local_link_target("../notes/My%20Note.md#part") == "My Note"
    assert local_link_target("Plain Note") == "Plain Note"
    assert local_link_target("https://example.org/a.md") is None
    assert local_link_target("#anchor") is None and local_link_target("mailto:x@y.z") is None
    assert local_link_target("picture.png") is None
