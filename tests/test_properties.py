"""A note's properties (ingest/properties.py): YAML front matter's and Logseq's page properties that say something
about the note (a summary, tags, a description) open its text as "key: value" paragraphs, cited to their lines of
the file; dates, flags, paths, URLs and the keys that steer the app are no text, and no citation points into them.
Through a real store and the real embedder."""

from __future__ import annotations

from pathlib import Path

from pathweaver.ingest.parsers import parse_file
from pathweaver.ingest.spans import file_spans
from pathweaver.service import Pathweaver

SOURDOUGH = ("---\ntitle: Sourdough\ndate: 2024-05-01 09:00\nstatus: draft\ncssclasses: [wide-page]\n"
             "summary: a levain starter kept alive with rye flour\ntags:\n  - Baking\n  - '#Fermentation'\n"
             "cover: /media/loaf.png\npublish: true\nrating: 4\nsource: https://example.org/bread\n"
             "author:\n  name: Ann\n  site: https://example.org/ann\n---\n\n"
             "# Sourdough\n\nThe dough rises overnight in the fridge.\n")
BAGEL = "# Bagels\n\nBagels are boiled before they are baked.\n"
PAGE = "title:: Slides\nurl:: https://example.org/slides\ntype:: [[Feature]]\n\n- Present a page as slides.\n"


def test_text_properties_open_the_note_cited_to_their_lines() -> None:
    doc = parse_file(Path("sourdough.md"), SOURDOUGH.encode())
    assert doc.title == "Sourdough"
    assert doc.text == ("summary: a levain starter kept alive with rye flour\n\ntags: Baking, Fermentation\n\n"
                        "Sourdough\n\nThe dough rises overnight in the fridge.")
    source = doc.source or ""
    summary = doc.text.index("summary")
    (start, end), = file_spans(doc.text, source, [(summary, doc.text.index("\n"))], doc.hidden)
    assert source[start:end] == "summary: a levain starter kept alive with rye flour"
    tags = doc.text.index("tags")
    (start, end), = file_spans(doc.text, source, [(tags, tags + len("tags: Baking, Fermentation"))], doc.hidden)
    assert source[start:end] == "tags:\n  - Baking\n  - '#Fermentation"
    # the heading's title word is cited to the heading, not to the hidden "title:" line of the front matter
    (start, _), = file_spans(doc.text, source, [(doc.text.index("Sourdough"), len(doc.text))], doc.hidden)
    assert source[start:].startswith("Sourdough\n\nThe dough")
    # Logseq's page properties follow the same rule: the URL and the hidden title:: are no text
    page = parse_file(Path("Slides.md"), PAGE.encode())
    assert page.text == "type: Feature\n\nPresent a page as slides." and "Feature" in page.links


def test_a_summary_is_searchable_and_hidden_keys_are_not(tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "sourdough.md").write_text(SOURDOUGH, "utf-8")
    (folder / "bagels.md").write_text(BAGEL, "utf-8")
    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}})
    try:
        pw.index([folder])
        for method in ("bm25", "dense", "ppr"):
            top = pw.retrieve_json("What keeps the levain starter alive?", method=method, top_k=2)["chunks"][0]
            assert Path(top["doc"]).name == "sourdough.md", method
            start, end = top["span"]
            assert SOURDOUGH[start:end].startswith("summary: a levain starter"), method
        for word in ("draft", "wide", "loaf", "example", "2024", "ann"):  # values of keys and kinds that are no text
            hits = pw.retrieve_json(word, method="bm25", top_k=2)["chunks"]
            assert all(word not in c["text"].lower() for c in hits), word
            assert all(Path(c["doc"]).name != "sourdough.md" for c in hits), word
    finally:
        pw.close()
