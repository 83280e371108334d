"""Export the graph, with provenance, as GraphML, Parquet files or one DuckDB database.

GraphML (a networkx ``MultiDiGraph``):
- nodes: one per entity (``e<id>``: type=entity, name, kind) and one per chunk (``c<id>``: type=chunk, doc path,
  title, ord, start, end, text); ``nodes = entities + chunks``;
- edges: one per relation (``e<src> -> e<dst>``: type=relation, label, kind, description, provenance = JSON list
  of ``{chunk_id, doc, start, end}`` for each supporting sentence), one per mention (``c<chunk> -> e<entity>``:
  type=mention, count, score) and one per synonym pair (``e<a> -> e<b>``: type=synonym, cos);
  ``edges = relations + mentions + synonyms``.
Parquet: one ``<table>.parquet`` per store table in the output folder. DuckDB: one file holding the same tables.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Protocol

import duckdb
import networkx as nx
import pyarrow as pa
import pyarrow.parquet as pq

from pathweaver.config import ConfigError

FORMATS = ("graphml", "parquet", "duckdb")
TABLES = ("documents", "chunks", "entities", "relations", "mentions", "relation_sources", "synonyms")
# Column types of the store schema (store/schema.py), so empty tables keep typed columns; others are text.
INT_COLUMNS = frozenset({"id", "doc_id", "ord", "start", "end", "n_tokens", "size", "entity_id", "chunk_id", "count",
                         "src_id", "dst_id", "relation_id", "a_id", "b_id"})
FLOAT_COLUMNS = frozenset({"mtime", "indexed_at", "score", "cos"})


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(value: Any) -> str:
    """Text safe for an XML 1.0 attribute value (GraphML): control characters removed."""
    return _XML_INVALID.sub("", str(value))


class TableSource(Protocol):
    """What export needs from a store reader (``store.reads.StoreReader`` provides it)."""

    def table_rows(self, table: str) -> tuple[list[str], list[tuple[Any, ...]]]: ...


def _records(reader: TableSource, table: str) -> list[dict[str, Any]]:
    columns, rows = reader.table_rows(table)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def build_graph(reader: TableSource) -> nx.MultiDiGraph:
    """The entity/chunk graph with relation, mention and synonym edges (see the module docstring)."""
    docs = {d["id"]: d for d in _records(reader, "documents")}
    graph = nx.MultiDiGraph()
    for ent in _records(reader, "entities"):
        graph.add_node(f"e{ent['id']}", type="entity", name=_xml(ent["name"]), kind=_xml(ent.get("kind", "")))
    chunk_docs: dict[int, dict[str, Any]] = {}
    for ch in _records(reader, "chunks"):
        doc = docs.get(ch["doc_id"], {})
        chunk_docs[ch["id"]] = doc
        graph.add_node(
            f"c{ch['id']}", type="chunk", doc=_xml(doc.get("path", "")), title=_xml(doc.get("title", "")),
            ord=int(ch["ord"]), start=int(ch["start"]), end=int(ch["end"]), text=_xml(ch["text"]),
        )
    provenance: dict[int, list[dict[str, Any]]] = {}
    for src in _records(reader, "relation_sources"):
        doc = chunk_docs.get(src["chunk_id"], {})
        provenance.setdefault(src["relation_id"], []).append(
            {"chunk_id": int(src["chunk_id"]), "doc": doc.get("path", ""), "start": int(src["start"]),
             "end": int(src["end"])}
        )
    for rel in _records(reader, "relations"):
        prov = provenance.get(rel["id"], [])
        graph.add_edge(
            f"e{rel['src_id']}", f"e{rel['dst_id']}", key=f"r{rel['id']}", type="relation", label=_xml(rel["label"]),
            kind=_xml(rel.get("kind", "")), description=_xml(rel.get("description", "")),
            provenance=_xml(json.dumps(prov)), n_sources=len(prov),
        )
    for m in _records(reader, "mentions"):
        graph.add_edge(
            f"c{m['chunk_id']}", f"e{m['entity_id']}", key=f"m{m['chunk_id']}_{m['entity_id']}", type="mention",
            count=int(m["count"]), score=float(m.get("score", 0.0)),
        )
    for s in _records(reader, "synonyms"):
        graph.add_edge(
            f"e{s['a_id']}", f"e{s['b_id']}", key=f"s{s['a_id']}_{s['b_id']}", type="synonym", cos=float(s["cos"])
        )
    return graph


def graph_counts(graph: nx.MultiDiGraph) -> dict[str, int]:
    """Node and edge counts by type."""
    counts = {"nodes": graph.number_of_nodes(), "edges": graph.number_of_edges()}
    for _, data in graph.nodes(data=True):
        key = {"entity": "entities", "chunk": "chunks"}[data["type"]]
        counts[key] = counts.get(key, 0) + 1
    for _, _, data in graph.edges(data=True):
        key = {"relation": "relations", "mention": "mentions", "synonym": "synonyms"}[data["type"]]
        counts[key] = counts.get(key, 0) + 1
    for key in ("entities", "chunks", "relations", "mentions", "synonyms"):
        counts.setdefault(key, 0)
    return counts


def _arrow_array(column: str, values: list[Any]) -> pa.Array:
    """Typed by the schema for known columns; otherwise inferred (text when the table is empty)."""
    if column in INT_COLUMNS:
        return pa.array(values, type=pa.int64())
    if column in FLOAT_COLUMNS:
        return pa.array(values, type=pa.float64())
    return pa.array(values, type=None if any(v is not None for v in values) else pa.string())


def _arrow_tables(reader: TableSource) -> dict[str, pa.Table]:
    out = {}
    for table in TABLES:
        columns, rows = reader.table_rows(table)
        out[table] = pa.table({c: _arrow_array(c, [row[i] for row in rows]) for i, c in enumerate(columns)})
    return out


def export(reader: TableSource, fmt: str, out: Path | str) -> dict[str, Any]:
    """Write the store's graph to ``out`` in ``fmt``; returns what was written (counts per node/edge or table)."""
    out = Path(out)
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "graphml":
        graph = build_graph(reader)
        out.parent.mkdir(parents=True, exist_ok=True)
        nx.write_graphml(graph, out)
        return {"format": fmt, "path": str(out), **graph_counts(graph)}
    tables = _arrow_tables(reader)
    counts = {name: t.num_rows for name, t in tables.items()}
    if fmt == "parquet":
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{out} exists and is not a folder; parquet export writes one file per table there")
        out.mkdir(parents=True, exist_ok=True)
        for name, table in tables.items():
            pq.write_table(table, out / f"{name}.parquet")
    else:
        if out.is_dir():
            raise ConfigError(f"{out} is a folder; duckdb export writes one database file")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        conn = duckdb.connect(str(out))
        try:
            for name, table in tables.items():
                conn.register("_arrow_src", table)
                conn.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _arrow_src')
                conn.unregister("_arrow_src")
        finally:
            conn.close()
    return {"format": fmt, "path": str(out), "tables": counts}
