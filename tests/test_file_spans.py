"""Citation spans index the file as stored on disk: for md, txt, rst and html, ``raw[start:end]`` of the decoded file
holds the cited chunk's words in order; PDF and DOCX chunks carry a page or paragraph locator instead."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pathweaver.config import Settings
from pathweaver.ingest.parsers import parse_file
from pathweaver.ingest.pipeline import Indexer
from pathweaver.ingest.spans import file_spans, locator
from pathweaver.models.embedder import get_embedder
from pathweaver.retrieval.context import build_context
from pathweaver.retrieval.types import ChunkHit, RetrievalResult
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader
from pathweaver.store.snapshot import GraphSnapshot
from test_parsers import minimal_pdf

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = Path(__file__).parent / "corpus"
MARKDOWN = (
    "\ufeff---\r\ntitle: Notes on the Curies\r\ntags: [physics]\r\n---\r\n\r\n"
    "# The *Curie* family\r\n\r\nMarie [Curie](pierre.md) and **Pierre** Curie found `polonium` in 1898, "
    "see [[Radium|the radium note]] and <https://example.org>.\r\n\r\n"
    "> A quoted line about   spaced    words.\r\n\r\n"
    "- first item with ~~struck~~ text\r\n- [ ] a task about radium salts\r\n\r\n"
    "| col a | col b |\r\n|---|---|\r\n| uranium | thorium |\r\n\r\n"
    "```python\r\nprint('code block kept')\r\n```\r\n\r\n"
    "Setext heading\r\n==============\r\n\r\n" + "A long paragraph about radioactivity and its measurement. " * 12
)
TEXT = "\n\n\r\n  Leading blank lines and CRLF.\r\nThe Vistula flows through Warsaw.\r\n" + "River words. " * 40
HTML = (
    "<!DOCTYPE html><html><head><meta charset=\"iso-8859-1\"><title>Science notes</title>"
    "<style>p { color: red }</style><script>var hidden = 'script words';</script></head><body>"
    "<h1>Physics &amp; science</h1><p>Pierre <b>Curie</b> studied <a href=\"radium.html\">radium</a>&nbsp;and "
    "piezo&shy;electricity at a caf\xe9. Caf&eacute; talk.</p><pre>  preformatted\n    text kept</pre>"
    "<ul><li>one item</li><li>two items</li></ul>" + "<p>Paragraph of physics words.</p>" * 20 + "</body></html>"
).encode("latin-1")


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def in_order(needles: list[str], haystack: str) -> bool:
    """Whether every needle occurs in ``haystack``, each after the one before."""
    at = 0
    for n in needles:
        at = haystack.find(n, at)
        if at < 0:
            return False
        at += len(n)
    return True


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("spans") / "docs"
    shutil.copytree(FIXTURES, root)
    shutil.copy(CORPUS / "vistula.txt", root / "vistula.txt")
    (root / "curies.md").write_bytes(MARKDOWN.encode("utf-8"))
    (root / "river.txt").write_bytes(TEXT.encode("utf-8"))
    (root / "cafe.html").write_bytes(HTML)
    (root / "pages.pdf").write_bytes(minimal_pdf(["Marie Curie discovered polonium.", "", "Radium glows."]))
    import docx

    document = docx.Document()
    document.add_heading("Radium notes", level=1)
    for i in range(12):
        document.add_paragraph(f"Paragraph {i} says radium {i} glows and decays into radon {i} over time.")
    document.save(root / "notes.docx")
    return root


@pytest.fixture(scope="module")
def snap(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    """The snapshot of a store of ``folder`` indexed with small chunks (several per file)."""
    store = tmp_path_factory.mktemp("store")
    settings = Settings(store_dir=store)
    settings.ingest.chunk_tokens, settings.ingest.chunk_overlap = 40, 8
    with Database(store) as db:
        report = Indexer(db, settings, get_embedder()).index_paths([folder])
        assert not report.errors and report.skipped == 0, report
        return StoreReader(db).snapshot()


@pytest.fixture(scope="module")
def citations(snap: GraphSnapshot) -> list[dict]:
    """Every stored chunk's citation and text."""
    return [{**snap.citation(p), "text": snap.chunk_texts[p]} for p in range(snap.n_passages)]


@pytest.mark.parametrize("suffix", [".md", ".txt", ".rst", ".html"])
def test_spans_index_the_raw_file(citations: list[dict], suffix: str) -> None:
    cited = [c for c in citations if c["doc"].endswith(suffix)]
    assert len(cited) >= 2 if suffix != ".rst" else cited
    for c in cited:
        data = Path(c["doc"]).read_bytes()
        raw = data.decode("iso-8859-1" if suffix == ".html" else "utf-8")  # the file's own encoding, as stored
        start, end = c["span"]
        assert 0 <= start <= end <= len(raw) and "locator" not in c
        cited_words = [w for w in words(c["text"]) if w in raw]  # "Café" from "Caf&eacute;" is not spelled out
        assert cited_words and in_order(cited_words, raw[start:end]), (c["doc"], raw[start:end], c["text"])
        assert end - start <= 3 * len(c["text"]) + 200, "the span stays near the cited text"


def test_markdown_spans_skip_front_matter_and_keep_crlf(citations: list[dict]) -> None:
    first = min((c for c in citations if c["doc"].endswith("curies.md")), key=lambda c: c["span"][0])
    raw = Path(first["doc"]).read_bytes().decode("utf-8")
    assert raw.startswith("\ufeff---\r\n")  # BOM and CRLF are characters of the decoded file, counted as such
    # the tags are a property shown as text, cited to their line; the title's line is hidden from citations
    assert raw[first["span"][0]:].startswith("tags: [physics]\r\n---\r\n\r\n# The *Curie* family")


def test_pdf_and_docx_cite_a_page_or_paragraph(citations: list[dict]) -> None:
    pdf = [c for c in citations if c["doc"].endswith(".pdf")]
    assert pdf and all(c["span"] is None for c in pdf)
    assert {c["locator"] for c in pdf} <= {"page 1", "page 3", "page 1 to page 3"}
    docx = sorted((c for c in citations if c["doc"].endswith(".docx")), key=lambda c: c["chunk_id"])
    assert len(docx) >= 2 and all(c["span"] is None for c in docx)
    for c in docx:  # block 1 is the heading, block n > 1 the paragraph numbered n - 2
        first = int(re.match(r"paragraph (\d+)", c["locator"]).group(1))  # type: ignore[union-attr]
        block = "Radium notes" if first == 1 else (f"Paragraph {first - 2} says radium {first - 2} glows and decays "
                                                   f"into radon {first - 2} over time.")
        assert block.endswith(c["text"].split("\n")[0].strip()), c  # the chunk begins inside that block


def test_prompt_context_items_carry_the_locator(snap: GraphSnapshot) -> None:
    """The answer's context items cite a PDF or DOCX chunk by its locator (no span), as its citations do."""
    passages = [next(p for p in range(snap.n_passages) if snap.chunk_docs[p].endswith(suffix))
                for suffix in (".pdf", ".docx", ".md")]
    result = RetrievalResult("dense", [ChunkHit(p, 1.0) for p in passages])
    context = build_context(snap, result, layout="chunks", question="radium?").to_dict()
    items = {item["doc"].rsplit(".", 1)[1]: item for item in context["items"] if item["kind"] == "chunk"}
    assert items["pdf"]["span"] is None and items["pdf"]["locator"].startswith("page")
    assert items["docx"]["span"] is None and items["docx"]["locator"].startswith("paragraph")
    assert items["md"]["span"][1] > items["md"]["span"][0] and "locator" not in items["md"]


def test_file_spans_and_locator_directly(folder: Path) -> None:
    path = folder / "curies.md"
    data = path.read_bytes()
    doc = parse_file(path, data)
    (span,) = file_spans(doc.text, doc.source or "", [(0, len(doc.text))])
    assert doc.source is not None and in_order(words(doc.text)[:20], doc.source[span[0]:span[1]])
    assert file_spans("x y", "nothing here", [(0, 3)]) == [(0, 0)]  # no word spelled out: an empty span
    raw = "(See *Curie*, 1898.)\r\nNext."
    assert file_spans("(See Curie, 1898.)\nNext.", raw, [(0, 18), (19, 24)]) == [(0, 20), (22, 27)]  # punctuation
    marks = [(0, "page 1"), (10, "page 2"), (30, "page 4")]
    assert locator(marks, 0, 5) == "page 1" and locator(marks, 12, 40) == "page 2 to page 4"
    assert locator([], 0, 5) == ""


def test_html_spans_skip_head_style_and_script(tmp_path: Path) -> None:
    """The body's words also stand in the title, the style sheet, a script, a comment and an attribute: every
    chunk's span lies in the body text (it once began inside ``<title>`` and took in the ``<style>`` block)."""
    raw = (
        "<!DOCTYPE html>\n<html><head><title>Radium glows green</title>\n"
        "<style>/* Radium glows green */ .glows { color: green }</style></head>\n"
        "<body><!-- Radium glows green --><script>let Radium = 'glows green';</script>\n"
        '<p class="Radium glows green">Radium glows green in the dark.</p>\n'
        "<p title='a > b'>" + "Salts of radium give off light. " * 30 + "</p>\n</body></html>"
    )
    path = tmp_path / "radium.html"
    path.write_text(raw, encoding="utf-8")
    doc = parse_file(path, path.read_bytes())
    assert doc.source == raw and doc.title == "Radium glows green"
    body = raw.index('<p class=')
    chunks = [(0, len(doc.text)), (0, 30), (doc.text.rindex("Salts"), len(doc.text))]
    spans = file_spans(doc.text, raw, chunks, doc.hidden)
    assert raw[spans[0][0]:].startswith("Radium glows green in the dark.") and spans[0][0] > body
    for (start, end), (t0, t1) in zip(spans, chunks, strict=True):
        cited = raw[start:end]
        assert start > body and "<style" not in cited and "<script" not in cited and "<title" not in cited, cited
        assert in_order(words(doc.text[t0:t1]), cited), (cited, doc.text[t0:t1])
