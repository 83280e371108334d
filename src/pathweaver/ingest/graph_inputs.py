"""What deriving a graph needs from models, through the store's caches: NER spans, vectors of names and triples."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from pathweaver.config import Settings
from pathweaver.extract import ner
from pathweaver.extract.graph import ChunkInput, DocGraph, ExtractParams, triple_text
from pathweaver.ingest.types import EmbedderLike
from pathweaver.models.packing import RECIPE
from pathweaver.numeric.vectors import LayeredVectors, VectorTable, compose_phrases, phrase_words
from pathweaver.store import writes as w
from pathweaver.store.db import Database


def cache_space(precision: str) -> str:
    """The ``embed_cache`` key space of graph-text vectors made at ``precision`` by the current recipe
    (``packing.RECIPE``), apart from chunk vectors (key space ""), so that a vector made another way never serves."""
    return RECIPE if precision == "float32" else f"{RECIPE}-{precision}"


class GraphInputs:
    """NER spans and vectors of names and triples for deriving graphs, each made once and kept in the store's caches
    (``ner_cache``, ``embed_cache``); a new vector or span is written in a transaction of its own."""

    def __init__(self, db: Database, settings: Settings, embedder: EmbedderLike, params: ExtractParams) -> None:
        self.db = db
        self.settings = settings
        self.embedder = embedder
        self.params = params

    def with_ner(self, chunks: Sequence[ChunkInput]) -> list[ChunkInput]:
        """``chunks`` with their entity spans of ``extract.ner_labels`` (``extract.entities`` with "ner"), from
        ``ner_cache`` or the spaCy pipeline (whose output is then cached)."""
        if not self.params.uses_ner or not chunks:
            return list(chunks)
        space = f"ner:{self.params.ner_model}"
        texts = list(dict.fromkeys(c.text for c in chunks))
        spans = w.ner_cache_get(self.db.conn, texts, space)
        missing = [t for t in texts if t not in spans]
        if missing:
            found = ner.entity_spans(missing, self.params.ner_model, processes=self.params.ner_processes)
            fresh = dict(zip(missing, found, strict=True))
            with self.db.write(bump_version=False) as conn:  # the cache is not graph state
                w.ner_cache_put(conn, fresh, space)
            spans.update(fresh)
        labels = set(self.params.ner_labels)
        return [replace(c, ner=tuple(text for label, text in spans[c.text] if label in labels)) for c in chunks]

    def doc_graph_vectors(self, graph: DocGraph) -> VectorTable:
        return self.graph_vectors(graph.kinds, [(r.src, r.label, r.dst) for r in graph.relations])

    def graph_vectors(self, names: Iterable[str], triples: Sequence[tuple[str, str, str]]) -> VectorTable:
        """Vectors keyed by text for entity names (``extract.entity_vectors`` decides how; see
        ``numeric/vectors.py``), with what a snapshot makes the triples' vectors from cached (``store.graphvecs``):
        the labels' words or labels (``extract.triple_vectors`` = "composed"), else the triple texts. No triple's
        vector is made here: only a snapshot reads them."""
        names = list(names)
        labels = [label for _, label, _ in triples] if self.params.triple_vectors == "composed" else []
        if self.params.entity_vectors == "composed":
            # one model call for the names' and labels' words, as when the triples were composed here too
            words = self.vectors([w for p in names + labels for w in phrase_words(p)])
            base = compose_phrases(names, words)  # a phrase's bits do not depend on its company
        else:
            base = self.vectors(names + labels)
        if self.params.triple_vectors != "composed":
            self.vectors([triple_text(*t) for t in triples])
        return base

    def vectors(self, texts: list[str]) -> VectorTable:
        """Model vectors of short texts (words, names, triples) at ``extract.graph_vector_precision``: from
        ``embed_cache``, else embedded and cached."""
        unique = list(dict.fromkeys(texts))
        space = cache_space(self.params.precision)
        cached = VectorTable.of(w.cache_get(self.db.conn, unique, space))
        missing = [t for t in unique if t not in cached]
        if not missing:
            return cached
        vecs = self.embedder.encode(missing, batch_size=self.settings.ingest.batch_size,
                                    precision=self.params.precision, invariant=True)
        fresh = VectorTable({t: i for i, t in enumerate(missing)}, vecs)
        with self.db.write(bump_version=False) as conn:  # the cache is not graph state
            w.cache_put(conn, fresh, space)
        if not len(cached):
            return fresh
        return VectorTable.of(LayeredVectors(fresh, cached))
