"""The name layer (extract/names.py, ingest/linking.py): titles and aliases as entities, mention linking by one
automaton, kept exact by every incremental change (no refresh), and used to seed PPR."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pathweaver.config import Settings
from pathweaver.extract.names import NameLinker, document_names, proper_form
from pathweaver.ingest.linking import names_of
from pathweaver.ingest.parsers import parse_file
from pathweaver.ingest.pipeline import Indexer
from pathweaver.retrieval.keywords import linked_entities, question_names
from pathweaver.retrieval.pathrag import PathRAGParams, query_nodes
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.types import Query, RetrievalEnv
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader


def settings(store: Path) -> Settings:
    s = Settings(store_dir=store)
    s.extract.auto_refresh_ratio = 1.0  # changes stay incremental: no refresh may repair them
    return s


def note(title: str, body: str, aliases: list[str] | None = None) -> str:
    fm = f"---\ntitle: {title}\n" + (f"aliases: [{', '.join(aliases)}]\n" if aliases else "") + "---\n"
    return f"{fm}# {title}\n\n{body}\n"


def mentions(db: Database) -> dict[str, set[str]]:
    """name -> the titles of the documents whose chunks mention it."""
    out: dict[str, set[str]] = {}
    for name, doc in db.conn.execute(
            "SELECT e.name, d.title FROM name_mentions m JOIN entities e ON e.id = m.entity_id "
            "JOIN chunks c ON c.id = m.chunk_id JOIN documents d ON d.id = c.doc_id"):
        out.setdefault(name, set()).add(doc)
    return out


def test_document_names_and_front_matter_aliases() -> None:
    doc = parse_file(Path("n.md"), note("Inherent Vice (film)", "A film.", ["PTA's film", "Vice"]).encode())
    assert doc.title == "Inherent Vice (film)" and doc.aliases == ["PTA's film", "Vice"]
    assert document_names(doc.title, doc.aliases) == {
        "inherent vice (film)": "title", "inherent vice": "alias", "pta film": "alias", "vice": "alias"}
    block = parse_file(Path("b.md"), b"---\naliases:\n  - First\n  - 'Second one'\n---\ntext\n")
    assert block.aliases == ["First", "Second one"] and block.title == "b"


def test_linker_longest_match_word_boundaries_and_case_rule() -> None:
    linker = NameLinker.build(["paul thomas anderson", "thomas", "music", "paris, texas", "paris", "it", "anne"])
    found = linker.link("Paul Thomas Anderson met Thomas. Annex music; Music. Paris, Texas is not Paris Texas. It")
    assert found == {"paul thomas anderson": 1, "thomas": 1, "music": 1, "paris, texas": 1, "paris": 1}


def test_titles_aliases_and_incremental_links_without_refresh(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder, store = tmp_path / "notes", tmp_path / "store"
    folder.mkdir()
    (folder / "a.md").write_text(note("Inherent Vice (film)", "A film directed by Paul Thomas Anderson."), "utf-8")
    (folder / "b.md").write_text(note("Gravity's Rainbow", "Thomas Pynchon wrote it; see Inherent Vice too."),
                                 "utf-8")
    (folder / "c.txt").write_text("Paul Thomas Anderson was born in Studio City. He admires PTA.", "utf-8")
    with Database(store) as db:
        indexer = Indexer(db, settings(store), embedder)
        indexer.index_paths([folder])
        got = mentions(db)
        assert got["inherent vice"] == {"Gravity's Rainbow"}  # the parenthetical-free alias
        assert got["inherent vice (film)"] == {"Inherent Vice (film)"}  # its own heading line
        assert "paul thomas anderson" not in got  # no document has that name yet
        # a new note titled with a name old chunks hold: they link at once, with no refresh
        (folder / "pta.md").write_text(note("Paul Thomas Anderson", "An American director.", ["PTA"]), "utf-8")
        report = indexer.index_paths([folder])
        assert not report.refreshed
        got = mentions(db)
        assert got["paul thomas anderson"] == {"Inherent Vice (film)", "c", "Paul Thomas Anderson"}
        assert got["pta"] == {"c", "Paul Thomas Anderson"}  # and its own "aliases: PTA" line
        # the question's names seed PPR: the film's own passage, then the passages its names link to
        snap = StoreReader(db).snapshot()
        question = "Where was the director of film Inherent Vice born?"
        assert [snap.entity_names[e] for e in linked_entities(snap, question)] == ["inherent vice"]
        env = RetrievalEnv(snap, lambda t, k: [], lambda texts: embedder.encode(list(texts)))
        result = run_method(env, Query(question, embedder.encode([question])[0]), "ppr", 3, {})
        assert result.info["named_entities"] == ["inherent vice"]
        assert snap.chunk_titles[result.chunks[0].passage] == "Inherent Vice (film)"
        # an alias change: "PTA" goes, "Studio City" comes
        (folder / "pta.md").write_text(note("Paul Thomas Anderson", "An American director.", ["Studio City"]),
                                       "utf-8")
        indexer.index_paths([folder])
        got = mentions(db)
        assert "pta" not in got and got["studio city"] == {"c", "Paul Thomas Anderson"}
        assert db.conn.execute("SELECT count(*) FROM doc_names WHERE name = 'pta'").fetchone()[0] == 0
        # a rename of a plain-text file renames its title entity
        (folder / "c.txt").rename(folder / "studio notes.txt")
        indexer.index_paths([folder])
        assert mentions(db)["paul thomas anderson"] == {"Inherent Vice (film)", "studio notes", "Paul Thomas Anderson"}
        # a delete takes what only that note named
        (folder / "pta.md").unlink()
        indexer.index_paths([folder])
        got = mentions(db)
        assert "paul thomas anderson" not in got and "studio city" not in got
        names = {r[0] for r in db.conn.execute("SELECT name FROM entities WHERE kind IN ('title', 'alias')")}
        assert {"inherent vice", "gravity rainbow", "studio notes"} <= names


def test_link_texts_and_headings_written_as_names() -> None:
    doc = parse_file(Path("b.md"), (
        b"# Boogie Nights\n\nBy [[Paul Thomas Anderson|PTA]], see [[Paul Thomas Anderson|here]] and "
        b"[[Paul Thomas Anderson|his work]]; [Magnolia](magnolia.md) too.\n\n## Project Apollo\n\nx\n\n"
        b"## Early life\n\ny\n\n## Usage\n\nz\n"))
    assert doc.link_texts == [("Paul Thomas Anderson", "PTA", True), ("Paul Thomas Anderson", "here", True),
                              ("Paul Thomas Anderson", "his work", True), ("magnolia", "Magnolia", True)]
    got = names_of(doc.title, doc.aliases, doc.headings, doc.link_texts)
    # "here" and "his work" are not written as names, "Magnolia" is its target's own name, "Early life" is
    # not in name form and "Usage" is one word: none of them names anything
    assert got.links == {("paul thomas anderson", "pta")}
    assert got.names == {"boogie nights": "title", "project apollo": "heading"}
    assert proper_form("The Lord of the Rings") and proper_form("The Master (2012 film)")
    assert not proper_form("his film") and not proper_form("Nolan's film") and not proper_form("1999")


def test_generic_display_texts_name_nothing_and_escaped_pipes_parse() -> None:
    """A one-word display text where every text starts with a capital (a table cell, a list item, a button) names
    nothing; the same word capitalised inside a sentence, or written with inner capitals, does."""
    doc = parse_file(Path("t.md"), (
        b"# Settings\n\n| Field | Kind |\n|---|---|\n| [[Data types\\|Date]] | [[Data types\\|Number]] |\n"
        b"| [[Lists\\|List]] | [[Attachments\\|File]] |\n\n"
        b"- [[Command palette|Open]]\n- [[Embeds|Image]]\n\n"
        b"Sync your vault with [[Obsidian Sync|Sync]], hosted by [[Amazon Web Services|AWS]] on "
        b"[[GitHub Pages|GitHub]]. [[Help|Learn more]]\n"))
    assert ("Data types", "Date", False) in doc.link_texts and ("Lists", "List", False) in doc.link_texts
    assert {"Data types", "Lists", "Attachments", "Command palette", "Embeds"} <= set(doc.links)
    assert "Date | Number" in doc.text and "\\" not in doc.text
    got = names_of(doc.title, doc.aliases, doc.headings, doc.link_texts)
    assert got.links == {("obsidian sync", "sync"), ("amazon web services", "aws"), ("github pages", "github")}


def test_link_texts_and_headings_link_incrementally(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Display texts of ``[[Target|text]]`` name Target; headings name their note unless another note shares them;
    adding, changing and removing either re-links old chunks at once (no refresh) and equals a fresh index."""
    folder, store = tmp_path / "notes", tmp_path / "store"
    folder.mkdir()
    (folder / "pta.md").write_text(note("Paul Thomas Anderson", "An American director."), "utf-8")
    (folder / "boogie.md").write_text(note("Boogie Nights", "A film by [[Paul Thomas Anderson|PTA]]."), "utf-8")
    (folder / "log.txt").write_text("PTA met Kubrick fans. The Project Apollo Guidance team; their Early Life "
                                    "chapter; kubrick in lower case.", "utf-8")
    (folder / "space.md").write_text(note("Space Notes", "Rockets.\n\n## Project Apollo\n\nThe Moon."), "utf-8")
    (folder / "bio1.md").write_text(note("Ann Lee", "A dancer.\n\n## Early Life\n\nIn Paris."), "utf-8")
    (folder / "bio2.md").write_text(note("Bob Ray", "A singer.\n\n## Early Life\n\nIn Rome."), "utf-8")
    (folder / "fans.md").write_text(note("Fans", "They love [[Stanley Kubrick|Kubrick]]."), "utf-8")

    def step_equals_fresh(tag: str) -> dict[str, set[str]]:
        with Database(tmp_path / f"fresh-{tag}") as fresh:
            Indexer(fresh, settings(tmp_path / f"fresh-{tag}"), embedder).index_paths([folder])
            assert StoreReader(db).canonical_names() == StoreReader(fresh).canonical_names(), tag
        return mentions(db)

    with Database(store) as db:
        indexer = Indexer(db, settings(store), embedder)
        indexer.index_paths([folder])
        got = step_equals_fresh("first")
        assert got["pta"] == {"Boogie Nights", "log"}  # the display text names its target wherever it is written
        assert got["project apollo"] == {"log", "Space Notes"}  # a heading names its note
        assert "early life" not in got  # two notes share that heading: it names neither
        assert "kubrick" not in got  # no note is called Stanley Kubrick yet
        snap = StoreReader(db).snapshot()
        assert [snap.entity_names[e] for e in linked_entities(snap, "Who is PTA?")] == ["pta"]
        pta = snap.entity_index["pta"]
        tied = {snap.chunk_titles[p] for p in snap.ties[:, pta].nonzero()[0]}
        assert tied == {"Paul Thomas Anderson"}
        # the target appears after the note that links to it: its display text links old chunks at once
        (folder / "kubrick.md").write_text(note("Stanley Kubrick", "A director."), "utf-8")
        assert not indexer.index_paths([folder]).refreshed
        got = step_equals_fresh("target")
        assert got["kubrick"] == {"log", "Fans"}  # one word: only where it is capitalised
        # a longer name takes over a shorter one's occurrences
        (folder / "guidance.md").write_text(note("Project Apollo Guidance", "Computers."), "utf-8")
        indexer.index_paths([folder])
        got = step_equals_fresh("longer")
        assert got["project apollo"] == {"Space Notes"} and "log" in got["project apollo guidance"]
        # one of the two notes that share a heading goes: the other's heading becomes its name
        (folder / "bio2.md").unlink()
        indexer.index_paths([folder])
        got = step_equals_fresh("unshared")
        assert got["early life"] == {"log", "Ann Lee"}
        # the link is edited away and the heading renamed: what only they supported goes
        (folder / "boogie.md").write_text(note("Boogie Nights", "A film by [[Paul Thomas Anderson]]."), "utf-8")
        (folder / "space.md").write_text(note("Space Notes", "Rockets.\n\n## Project Gemini\n\nOrbit."), "utf-8")
        indexer.index_paths([folder])
        got = step_equals_fresh("removed")
        assert "pta" not in got and "project apollo" not in got
        assert db.conn.execute("SELECT count(*) FROM name_rows WHERE name IN ('pta', 'project apollo')").fetchone() == (0,)
        # the target goes: its display texts name nothing
        (folder / "kubrick.md").unlink()
        indexer.index_paths([folder])
        assert "kubrick" not in step_equals_fresh("target-gone")


POOL = [
    "Marie Curie was born in Warsaw. She studied physics in Paris with Pierre Curie.",
    "Pierre Curie married Marie Curie in 1895. The Vistula flows through Warsaw.",
    "Polonium was discovered in Paris. Radium glows; Marie Curie isolated radium.",
    "Krakow was the capital of Poland before Warsaw. The Nobel Prize went to Paris.",
]
TITLES = ["Marie Curie", "Warsaw (city)", "Paris", "Pierre Curie", "Radium", "Nobel Prize", "Poland"]
ALIASES = ["Curie", "Vistula", "Krakow", "Polonium", "The Sorbonne"]


LINKS = ["[[Marie Curie|Madame Curie]]", "[[Warsaw (city)|Old Town]]", "[[Paris|here]]", "[[Radium|Element 88]]",
         "[[Poland|Polish Republic]]", "[[Nobel Prize]]"]
HEADINGS = ["Early Life", "Radium Institute", "Old Town", "Usage", "Later years"]


def random_note(rng: random.Random) -> str:
    body = rng.choice(POOL) + " " + rng.choice(POOL)
    if rng.random() < 0.5:  # link texts: names of their target once a note carries it
        body += " See " + " and ".join(rng.sample(LINKS, rng.randint(1, 2))) + "."
    if rng.random() < 0.5:  # headings: names of their note unless another note shares them
        body += "".join(f"\n\n## {h}\n\n{rng.choice(POOL)}" for h in rng.sample(HEADINGS, rng.randint(1, 2)))
    if rng.random() < 0.3:
        return body  # a note without front matter: titled by its file name
    return note(rng.choice(TITLES), body, rng.sample(ALIASES, rng.randint(0, 2)))


def random_step(rng: random.Random, folder: Path) -> None:
    files = sorted(folder.iterdir())
    op = rng.choice(["add", "add", "retitle", "rename", "delete"]) if files else "add"
    if op == "add":
        (folder / f"n{rng.randrange(1000)}{rng.choice(['.md', '.md', '.txt'])}").write_text(random_note(rng), "utf-8")
        return
    target = rng.choice(files)
    if op == "retitle":  # a title or alias change, same or other body
        target.write_text(random_note(rng), "utf-8")
    elif op == "rename":
        target.rename(folder / f"{rng.choice(['Warsaw', 'Marie Curie', 'r'])} {rng.randrange(100)}{target.suffix}")
    else:
        target.unlink()


@pytest.mark.parametrize("seed", range(4))
def test_incremental_name_layer_equals_a_fresh_index(seed: int, tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """After every incremental change (titles added, renamed, aliases, link texts and headings changed, notes
    deleted), with no refresh, the document names and name mentions equal those of a fresh index of the same
    folder."""
    rng = random.Random(seed)
    folder = tmp_path / "notes"
    folder.mkdir()
    for _ in range(3):
        random_step(rng, folder)
    store = tmp_path / "store"
    with Database(store) as db:
        indexer = Indexer(db, settings(store), embedder)
        indexer.index_paths([folder])
        for step in range(5):
            random_step(rng, folder)
            indexer.index_paths([folder])
            got = StoreReader(db).canonical_names()
            with Database(tmp_path / f"fresh{step}") as fresh:
                Indexer(fresh, settings(tmp_path / f"fresh{step}"), embedder).index_paths([folder])
                assert got == StoreReader(fresh).canonical_names(), f"step {step}"


def test_a_question_naming_part_of_a_title_seeds_that_document(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder, store = tmp_path / "notes", tmp_path / "store"
    folder.mkdir()
    (folder / "s.md").write_text(note("Ebenezer Scrooge", "A miser; his clerk is Bob Cratchit."), "utf-8")
    (folder / "p.md").write_text(note("Paul Thomas Anderson", "A director born in Studio City."), "utf-8")
    (folder / "w.md").write_text(note("Wes Anderson", "A director born in Houston."), "utf-8")
    (folder / "t.md").write_text(note("Christmas", "A holiday in December; misers keep counting-houses."), "utf-8")
    with Database(store) as db:
        Indexer(db, settings(store), embedder).index_paths([folder])
        snap = StoreReader(db).snapshot()
        env = RetrievalEnv(snap, lambda t, k: [], lambda texts: embedder.encode(list(texts)))

        def ppr(question: str, **params: object) -> list[str]:
            query = Query(question, embedder.encode([question])[0])
            return run_method(env, query, "ppr", 2, params).info["named_entities"]

        # "Scrooge" is part of one title: the question names that note, as a reader would
        assert ppr("Who was Scrooge's clerk?") == ["ebenezer scrooge"]
        assert ppr("Who was Scrooge's clerk?", name_parts=0) == []  # the knob turns it off
        assert ppr("who was scrooge's clerk?") == []  # only a capitalised word names someone
        # "Anderson" is part of two titles: both up to name_parts, neither beyond it
        assert sorted(ppr("Where was Anderson born?")) == ["paul thomas anderson", "wes anderson"]
        assert ppr("Where was Anderson born?", name_parts=1) == []
        # a question that names a title in full seeds it alone
        assert ppr("Where was Wes Anderson born, and was he like Scrooge?") == ["wes anderson"]
        # the other methods start from the same names
        question = "Who was Scrooge's clerk?"
        assert [snap.entity_names[e] for e in question_names(snap, question)] == ["ebenezer scrooge"]
        assert question_names(snap, question, 0) == []
        query = Query(question, embedder.encode([question])[0])
        assert run_method(env, query, "mcmi", 2, {}).info["named_entities"] == ["ebenezer scrooge"]
        scrooge = snap.entity_index["ebenezer scrooge"]
        assert query_nodes(env, query, PathRAGParams(dense_nodes=0))[0][0] == scrooge  # PathRAG's first node
        for method in ("mcmi", "pooling"):
            top = run_method(env, query, method, 2, {}).chunks[0].passage
            assert snap.chunk_titles[top] == "Ebenezer Scrooge", method
