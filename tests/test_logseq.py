"""Logseq pages (ingest/logseq.py): page properties name the page and leave its text, namespace files ``A___B.md``
are the page "A/B" that ``[[A/B]]`` links to, block properties leave the text and ``id::`` names a block that
``{{embed ((uuid))}}`` shows, ``{{embed [[Page]]}}`` is an embed that follows its page, and an Obsidian note's
Dataview inline fields stay text; through a real store and the real embedder."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fresh_graph import equals_fresh
from pathweaver.ingest.parsers import parse_file
from pathweaver.ingest.spans import file_spans
from pathweaver.service import Pathweaver

UUID = "6412aaaa-1111-4222-8333-944445555666"
SLIDE = (
    "title:: slide\nalias:: [[Presentation]], Deck mode\ntype:: [[Feature]]\n\n"
    "- Logseq's slide feature is powered by Reveal.js.\n"
    "- Right click the page title and select View as slides.\n"
    f"  id:: {UUID}\n  collapsed:: true\n"
    "\t- Press f to open the slides in fullscreen.\n"
    "- Slides follow the page's top-level blocks.\n"
)
PENCIL = "alias:: Pencil tool\ntype:: [[Tool]]\n\n- The pencil draws freehand strokes on the canvas.\n"
BOARD = ("- Whiteboards hold shapes; draw with [[Whiteboard/Tool/Pencil]].\n"
         "- {{embed [[Whiteboard/Tool/Pencil]]}}\n")
GUIDE = f"- Presenting a page, step by step:\n- {{{{embed (({UUID}))}}}}\n- Then do as (({UUID})) says.\n"
READING = "# Moby Dick\n\nrating:: 5 stars\nA novel about a whale hunt.\nstatus:: finished reading\n"
NOTES = {"slide.md": SLIDE, "Whiteboard___Tool___Pencil.md": PENCIL, "Whiteboard.md": BOARD, "Guide.md": GUIDE,
         "Moby Dick.md": READING}


def parsed(name: str, text: str | None = None):  # type: ignore[no-untyped-def]
    return parse_file(Path(name), (NOTES[name] if text is None else text).encode())


def test_page_properties_name_the_page_and_stay_text_where_logseq_shows_them() -> None:
    doc = parsed("slide.md")
    assert doc.title == "slide" and doc.aliases == ["Presentation", "Deck mode"]
    # the properties Logseq shows on the page are its first lines, without the markup; title:: and the block's
    # id:: and collapsed:: are not shown
    assert doc.text.startswith("alias: Presentation, Deck mode\n\ntype: Feature\n\n")  # a paragraph each
    assert "::" not in doc.text and UUID not in doc.text and "title:" not in doc.text and "collapsed" not in doc.text
    assert "Feature" in doc.links  # a property's [[value]] still links to its page
    cited = parse_file(Path("p.md"), b"\xef\xbb\xbfdescription:: Pencil strokes\r\n\r\n- Pencil strokes stay.\r\n")
    assert cited.text == "description: Pencil strokes\n\nPencil strokes stay."
    at = cited.text.index("Pencil strokes stay.")  # the bullet's span is the bullet, not the property's same words
    (start, end), = file_spans(cited.text, cited.source or "", [(at, len(cited.text))], cited.hidden)
    assert (cited.source or "")[start:end] == "Pencil strokes stay."
    hidden = parse_file(Path("q.md"), b"title:: Q\nid:: 6412aaaa-1111-4222-8333-944445555666\n\n- Only this.\n")
    assert hidden.text == "Only this."  # no property shown: none of them is text
    start, end = doc.blocks[UUID]  # id:: names its bullet with its children
    assert doc.text[start:end] == "Right click the page title and select View as slides.\n" \
                                  "Press f to open the slides in fullscreen."


def test_a_heading_bullet_is_a_heading_and_an_org_frame_no_text() -> None:
    doc = parse_file(Path("Cards.md"), f"type:: Feature\n\n- ## Usage\n\t- Right click a bullet to make a card.\n"
                     f"\t  id:: {UUID}\n- ## Functionality\n\t- Cards come back by spaced repetition.\n"
                     "- #tag starts no heading\n- #+BEGIN_NOTE\n  Cards sync per graph.\n  #+END_NOTE\n".encode())
    assert [h for _, h in doc.headings] == ["Usage", "Functionality"] and doc.heading_levels == [2, 2]
    start, end = doc.blocks[UUID]  # the heading's child block keeps its own span
    assert doc.text[start:end] == "Right click a bullet to make a card."
    assert "#tag starts no heading" in doc.text
    assert "Cards sync per graph." in doc.text and "#+" not in doc.text  # an org block's frame is no text


def test_namespace_files_and_links() -> None:
    pencil = parsed("Whiteboard___Tool___Pencil.md")
    assert pencil.title == "Whiteboard/Tool/Pencil" and pencil.aliases == ["Pencil tool"]
    old = parse_file(Path("Whiteboard%2FElement locking.md"), b"- Lock elements with mod+l.\n")
    assert old.title == "Whiteboard/Element locking" and old.aliases == ["Element locking"]  # a two-word last part
    named = parse_file(Path("A___B.md"), b"title:: Custom name\n\n- text\n")
    assert named.title == "Custom name"
    # a slash in another note's title is part of one name: "Beat Happening/Screaming Trees" is no namespace
    plain = parse_file(Path("000337.md"), b"---\ntitle: Beat Happening/Screaming Trees\n---\n# Beat Happening/"
                       b"Screaming Trees\n\nTwo bands from the Pacific Northwest.\n")
    assert plain.title == "Beat Happening/Screaming Trees" and plain.aliases == []
    board = parsed("Whiteboard.md")
    assert board.links == ["Whiteboard/Tool/Pencil"]
    assert [(n, f) for _, n, f in board.embeds] == [("Whiteboard/Tool/Pencil", "")]
    # an Obsidian note's [[folder/Note]] still names the note by its file name
    assert parse_file(Path("o.md"), b"# O\n\nSee [[Advanced/Notifications]].\n").links == ["Notifications"]


def test_block_references_leave_no_uuid_and_dataview_fields_stay_text() -> None:
    guide = parsed("Guide.md")
    assert UUID not in guide.text and "((" not in guide.text
    assert [(n, f) for _, n, f in guide.embeds] == [(f"(({UUID}))", f"^{UUID}")]
    reading = parsed("Moby Dick.md")
    assert "rating:: 5 stars" in reading.text and "status:: finished reading" in reading.text
    # at the very top of an Obsidian note the same line would be a page property; inside a list it stays text
    listed = parse_file(Path("l.md"), b"# L\n\n- author:: Melville\n- year:: 1851\n")
    assert "author:: Melville" in listed.text and "year:: 1851" in listed.text


def chunks_of(pw: Pathweaver, name: str) -> list[dict[str, Any]]:
    path = next(d["path"] for d in pw.reader.documents() if d["path"].endswith(name))
    return [pw.reader.chunk(c["chunk_id"]) for c in pw.reader.document_chunks(path)]


def embedded(pw: Pathweaver, name: str) -> list[tuple[str, str]]:
    """(cited file name, text) of the chunks of note ``name`` that cite another file."""
    return [(Path(c["doc"]).name, c["text"]) for c in chunks_of(pw, name) if not c["doc"].endswith(name)]


@pytest.fixture()
def graph(tmp_path: Path) -> Iterator[tuple[Pathweaver, Path]]:
    folder = tmp_path / "graph"
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text, "utf-8")
    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}})
    pw.index([folder])
    yield pw, folder
    pw.close()


def test_a_logseq_graph_is_indexed_as_logseq_shows_it(graph: tuple[Pathweaver, Path], tmp_path: Path) -> None:
    pw, folder = graph
    texts = [c["text"] for d in pw.reader.documents() for c in chunks_of(pw, Path(d["path"]).name)]
    assert not any("::" in t for t in texts if "rating" not in t and "status" not in t)
    assert not any(re.search(r"[0-9a-f]{8}-[0-9a-f]{4}", t) for t in texts)
    assert any("rating:: 5 stars" in t for t in texts)  # the Obsidian note's Dataview field
    g = pw.reader.canonical_graph()
    names = {(Path(p).name, n, k) for p, n, k in g["doc_names"]}
    assert {("slide.md", "slide", "title"), ("slide.md", "presentation", "alias"), ("slide.md", "deck mode", "alias"),
            ("Whiteboard___Tool___Pencil.md", "whiteboard/tool/pencil", "title")} <= names
    # the namespace link hits the page's own title entity
    assert ("whiteboard", "whiteboard/tool/pencil", "links to") in g["relations"]
    assert ("whiteboard/tool/pencil", "title") in g["entities"]
    # an alias is found by name: the question's name seeds the graph walk at the page
    out = pw.retrieve_json("How do I start Deck mode?", method="ppr", top_k=3)
    assert Path(out["chunks"][0]["doc"]).name == "slide.md"
    # embeds: a page by its namespace name, a block by its uuid, each cited to its own file
    assert embedded(pw, "Whiteboard.md") == [("Whiteboard___Tool___Pencil.md", "alias: Pencil tool\n\ntype: Tool\n\n"
                                              "The pencil draws freehand strokes on the canvas.")]
    shown = embedded(pw, "Guide.md")
    assert [f for f, _ in shown] == ["slide.md"] and "View as slides" in shown[0][1] and "fullscreen" in shown[0][1]
    answer = pw.ask("How do I view a page as slides?")
    assert "::" not in answer["answer"] and "View as slides" in answer["answer"]
    equals_fresh(pw, folder, tmp_path, "first")

    # the embedded page changes: its embedders show the new text
    (folder / "Whiteboard___Tool___Pencil.md").write_text(PENCIL.replace("freehand", "smooth"), "utf-8")
    (folder / "slide.md").write_text(SLIDE.replace("View as slides", "Present"), "utf-8")
    pw.index([folder])
    assert "smooth strokes" in embedded(pw, "Whiteboard.md")[0][1]
    assert "select Present" in embedded(pw, "Guide.md")[0][1]
    equals_fresh(pw, folder, tmp_path, "edit")

    # the block id moves to a new page: the embed follows it; that page goes: the embed shows nothing
    (folder / "slide.md").write_text(SLIDE.replace(f"  id:: {UUID}\n", ""), "utf-8")
    (folder / "Tips.md").write_text(f"- Rehearse the talk twice.\n  id:: {UUID}\n", "utf-8")
    pw.index([folder])
    assert embedded(pw, "Guide.md") == [("Tips.md", "Rehearse the talk twice.")]
    equals_fresh(pw, folder, tmp_path, "moved")
    (folder / "Tips.md").unlink()
    pw.index([folder])
    assert embedded(pw, "Guide.md") == []
    equals_fresh(pw, folder, tmp_path, "deleted")
