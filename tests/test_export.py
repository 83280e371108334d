"""Export round trips on a real store indexed from a small corpus: GraphML, Parquet and DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import networkx as nx
import pytest

from pathweaver.config import ConfigError
from pathweaver.export import TABLES, export

NOTES = {
    "curie.txt": "Marie Curie was a physicist and chemist. Marie Curie was born in Warsaw. "
    "Marie Curie won the Nobel Prize in Physics with Pierre Curie.\n",
    "warsaw.txt": "Warsaw is the capital of Poland. Warsaw lies on the Vistula river. "
    "Marie Curie was born in Warsaw in 1867.\n",
    "pierre.txt": "Pierre Curie was a French physicist. Pierre Curie shared the Nobel Prize in Physics "
    "with Marie Curie. Pierre Curie was born in Paris.\n",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    from pathweaver.service import Pathweaver

    root = tmp_path_factory.mktemp("export")
    corpus = root / "corpus"
    corpus.mkdir()
    for name, text in NOTES.items():
        (corpus / name).write_text(text, encoding="utf-8")
    pw = Pathweaver.open(root / "store")
    pw.index([corpus])
    yield pw, root
    pw.close()


def _counts(pw) -> dict[str, int]:
    return {t: len(pw.reader.table_rows(t)[1]) for t in TABLES}


def test_graphml_counts_and_provenance(store) -> None:
    pw, root = store
    rows = _counts(pw)
    stats = pw.stats()
    assert rows["relations"] > 0 and rows["mentions"] > 0 and rows["chunks"] == 3
    out = export(pw.reader, "graphml", root / "graph.graphml")
    graph = nx.read_graphml(root / "graph.graphml", force_multigraph=True)
    assert isinstance(graph, nx.MultiDiGraph)
    kinds = [d["type"] for _, d in graph.nodes(data=True)]
    assert kinds.count("entity") == rows["entities"] and kinds.count("chunk") == rows["chunks"]
    edge_kinds = [d["type"] for _, _, d in graph.edges(data=True)]
    assert edge_kinds.count("relation") == rows["relations"]
    assert edge_kinds.count("mention") == rows["mentions"] and edge_kinds.count("synonym") == rows["synonyms"]
    # the contract: nodes = entities + chunks, edges = relations + mentions + synonyms
    assert out["nodes"] == graph.number_of_nodes() == rows["entities"] + rows["chunks"]
    assert out["edges"] == graph.number_of_edges() == rows["relations"] + rows["mentions"] + rows["synonyms"]
    for key in ("entities", "chunks", "relations", "mentions", "synonyms"):
        assert stats[key] == rows[key] == out[key]
    # provenance: every relation names the document and a span inside it that holds both entities
    relations = [(u, v, d) for u, v, d in graph.edges(data=True) if d["type"] == "relation"]
    for u, v, data in relations:
        prov = json.loads(data["provenance"])
        assert prov and data["n_sources"] == len(prov)
        for src in prov:
            text = Path(src["doc"]).read_text(encoding="utf-8")
            sentence = text[src["start"] : src["end"]].casefold()
            assert (
                graph.nodes[u]["name"].casefold() in sentence or graph.nodes[v]["name"].casefold() in sentence
            )
    chunk = next(d for _, d in graph.nodes(data=True) if d["type"] == "chunk")
    assert Path(chunk["doc"]).name in NOTES and chunk["end"] > chunk["start"]


def test_parquet_loads_in_duckdb(store) -> None:
    pw, root = store
    rows = _counts(pw)
    out = export(pw.reader, "parquet", root / "parquet")
    assert out["tables"] == rows
    with duckdb.connect() as conn:
        for table in TABLES:
            path = root / "parquet" / f"{table}.parquet"
            assert conn.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0] == rows[table]
        docs = conn.execute(
            f"SELECT path FROM read_parquet('{root / 'parquet' / 'documents.parquet'}')"
        ).fetchall()
    assert sorted(Path(p).name for (p,) in docs) == sorted(NOTES)


def test_duckdb_file_has_every_table(store) -> None:
    pw, root = store
    rows = _counts(pw)
    target = root / "graph.duckdb"
    export(pw.reader, "duckdb", target)
    export(pw.reader, "duckdb", target)  # a second export replaces the file
    with duckdb.connect(str(target), read_only=True) as conn:
        for table in TABLES:
            assert conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == rows[table]
        joined = conn.execute(
            "SELECT count(*) FROM relations r JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id"
        ).fetchone()[0]
    assert joined == rows["relations"]


def test_bad_format_and_target(store, tmp_path: Path) -> None:
    pw, _ = store
    with pytest.raises(ConfigError, match="unknown export format"):
        export(pw.reader, "csv", tmp_path / "x")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        export(pw.reader, "parquet", tmp_path / "file")
    with pytest.raises(ConfigError, match="is a folder"):
        export(pw.reader, "duckdb", tmp_path)


class _Tables:
    """A hand-made table source with the store's column names."""

    data = {
        "documents": (["id", "path", "title"], [(1, "/n/a.md", "a"), (2, "/n/b.md", "b")]),
        "chunks": (
            ["id", "doc_id", "ord", "start", "end", "n_tokens", "text"],
            [
                (10, 1, 0, 0, 20, 5, "Ada met Babbage."),
                (11, 1, 1, 20, 40, 5, "Babbage built\x0c engines."),
                (12, 2, 0, 0, 15, 4, "Ada wrote notes."),
            ],
        ),
        "entities": (
            ["id", "name", "kind"],
            [(1, "ada", "title"), (2, "babbage", "ngram"), (3, "ada lovelace", "ngram")],
        ),
        "relations": (
            ["id", "src_id", "dst_id", "label", "kind", "description"],
            [(5, 1, 2, "met", "cooccur", "Ada met Babbage.")],
        ),
        "relation_sources": (
            ["relation_id", "chunk_id", "start", "end", "sentence"],
            [(5, 10, 0, 16, "Ada met Babbage."), (5, 12, 0, 9, "Ada wrote")],
        ),
        "mentions": (
            ["entity_id", "chunk_id", "count", "score"],
            [(1, 10, 1, 0.5), (2, 10, 1, 0.4), (2, 11, 2, 0.6), (1, 12, 1, 0.5)],
        ),
        "synonyms": (["a_id", "b_id", "cos"], []),
    }

    def table_rows(self, table: str):
        return self.data[table]


def test_graph_by_hand(tmp_path: Path) -> None:
    out = export(_Tables(), "graphml", tmp_path / "g.graphml")
    assert {
        k: out[k] for k in ("nodes", "edges", "entities", "chunks", "relations", "mentions", "synonyms")
    } == {"nodes": 6, "edges": 5, "entities": 3, "chunks": 3, "relations": 1, "mentions": 4, "synonyms": 0}
    graph = nx.read_graphml(tmp_path / "g.graphml", force_multigraph=True)
    rel = graph.get_edge_data("e1", "e2")["r5"]
    assert rel["label"] == "met" and json.loads(rel["provenance"]) == [
        {"chunk_id": 10, "doc": "/n/a.md", "start": 0, "end": 16},
        {"chunk_id": 12, "doc": "/n/b.md", "start": 0, "end": 9},
    ]
    assert graph.get_edge_data("c11", "e2")["m11_2"]["count"] == 2
    assert graph.nodes["c11"]["text"] == "Babbage built engines."  # control character dropped: valid XML
    assert graph.nodes["c12"]["doc"] == "/n/b.md" and graph.nodes["e3"]["name"] == "ada lovelace"
    # an empty table keeps typed columns in the DuckDB export
    export(_Tables(), "duckdb", tmp_path / "g.duckdb")
    with duckdb.connect(str(tmp_path / "g.duckdb"), read_only=True) as conn:
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'synonyms'"
            ).fetchall()
        )
    assert types == {"a_id": "BIGINT", "b_id": "BIGINT", "cos": "DOUBLE"}
