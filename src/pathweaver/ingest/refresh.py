"""The refresh: the whole graph re-derived from stored chunks with current corpus statistics.

It re-selects every chunk's entities from its stored ``grams`` (ER, AGRAG §III-B Eq. 2-3), re-derives mentions,
relations, the name mentions (and the synonyms of new entities, Eq. 5) and collects garbage in one transaction,
without re-parsing or re-embedding chunks (entity and triple vectors come from ``embed_cache``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from pathweaver.extract.graph import (
    KIND_RANK,
    ChunkInput,
    ExtractParams,
    Structure,
    derive_document,
    merge_kind,
)
from pathweaver.extract.synonyms import on_our_pool
from pathweaver.ingest.graph_inputs import GraphInputs
from pathweaver.ingest.linking import LinkerCache, relink
from pathweaver.ingest.synonym_pass import SynonymPass
from pathweaver.results import RefreshOut
from pathweaver.store import graph_writes as gw
from pathweaver.store import indexing as ix
from pathweaver.store.db import Connection, Database
from pathweaver.store.graphvecs import UNRECORDED
from pathweaver.store.meta import set_meta
from pathweaver.store.reads import vocabulary
from pathweaver.store.vector_rows import EntityRows

PAIR_WHILE_WRITING_OVER = 20_000  # entities from which a refresh pairs synonyms while another thread writes rows
NameTriple = tuple[str, str, str]  # (src, dst, label) by entity name


@dataclass
class CorpusGraph:
    """The graph every stored chunk supports under current statistics: what a refresh writes."""

    kinds: dict[str, str]  # entity name -> kind (the strongest any document or name gives it)
    mentions: dict[tuple[str, int], tuple[int, float]]  # (entity name, chunk id) -> (count, ER score)
    relations: dict[NameTriple, tuple[str, str]]  # -> (kind, description)
    sources: list[tuple[NameTriple, int, int, int, str]]  # (relation, chunk id, start, end, sentence)
    names: dict[str, str]  # the document names' vocabulary: name -> kind

    def triples(self) -> list[tuple[str, str, str]]:
        """Each relation as (src, label, dst), the order its vector is made in."""
        return [(src, label, dst) for src, dst, label in self.relations]


def derive_corpus(conn: Connection, params: ExtractParams,
                  with_ner: Callable[[Sequence[ChunkInput]], list[ChunkInput]]) -> CorpusGraph:
    """The graph every stored chunk supports under current statistics (``with_ner`` gives chunks their spans)."""
    n_chunks = ix.row_count(conn, "chunks")
    df = ix.all_gram_df(conn)
    docs = ix.indexed_structures(conn)
    by_doc: dict[int, list[ChunkInput]] = {}
    rows = ix.stored_chunks(conn)
    stored = with_ner([ChunkInput(*row) for _, row in rows])
    for (doc_id, _), chunk in zip(rows, stored, strict=True):
        by_doc.setdefault(doc_id, []).append(chunk)
    graph = CorpusGraph({}, {}, {}, [], vocabulary(conn, KIND_RANK))
    kinds, mentions = graph.kinds, graph.mentions
    for doc_id, title, headings, links in docs:
        structure = Structure(title, [tuple(h) for h in json.loads(headings)], json.loads(links))
        g = derive_document(by_doc.get(doc_id, []), structure, n_chunks, df, params)
        for name, kind in g.kinds.items():
            kinds[name] = merge_kind(kinds.get(name), kind)
        for key, (count, score) in g.mentions.items():
            c0, s0 = mentions.get(key, (0, 0.0))
            mentions[key] = (max(c0, count), max(s0, score))
        for r in g.relations:
            graph.relations.setdefault((r.src, r.dst, r.label), (r.kind, r.sentence))
            graph.sources.append(((r.src, r.dst, r.label), r.chunk, r.start, r.end, r.sentence))
    for name, kind in graph.names.items():
        kinds[name] = merge_kind(kinds.get(name), kind)
    return graph


def vector_settings_changed(db: Database, params: ExtractParams) -> bool:
    """Whether the store's entity and relation vectors and synonyms were made under other ``extract.*_vectors``
    modes or another ``synonym_phi`` (a store from before these were recorded had encoded names, phi 0.9)."""
    stored = db.get_meta("vector_settings", UNRECORDED)
    return stored != params.vector_settings and ix.row_count(db.conn, "entities") > 0


class Refresher:
    """Runs the refresh on a store, retrying (up to three times) when another writer moved it meanwhile."""

    def __init__(self, db: Database, params: ExtractParams, inputs: GraphInputs, synonyms: SynonymPass,
                 linker: LinkerCache) -> None:
        self.db = db
        self.params = params
        self.inputs = inputs
        self.synonyms = synonyms
        self._linker = linker

    def run(self) -> RefreshOut:
        """Re-derive and write the whole graph; returns the counts after it, what it removed and its seconds."""
        start = time.perf_counter()
        for _ in range(3):
            version = self.db.version()
            plan = derive_corpus(self.db.conn, self.params, self.inputs.with_ner)
            vectors = self.inputs.graph_vectors(plan.kinds, plan.triples())
            with self.db.write() as conn:
                if self.db.version() != version:  # read inside this write transaction
                    continue  # another writer moved the store under us; derive again
                before = gw.clear_derived(conn)
                if vector_settings_changed(self.db, self.params):  # drop every entity and relation: all get the new vectors
                    gw.collect_garbage(conn, keep_named=False)
                entities = gw.plan_entities(conn, plan.kinds)
                names = sorted(entities.ids, key=entities.ids.__getitem__)
                id_arr = np.array([entities.ids[n] for n in names], dtype=np.int64)
                vec_arr = vectors.rows(names) if names else np.zeros((0, int(self.inputs.embedder.dim)), np.float32)
                mark = self.synonyms.watermark(conn)
                removed, pairs = self._write_plan_and_pair(conn, plan, entities, mark, id_arr, vec_arr)
                relink(conn, None, self._linker.get(plan.names))
                gw.settle_descriptions(conn, before)
                self.synonyms.store_pairs(conn, pairs, mark, id_arr)  # after the entities they refer to
                synonyms = len(pairs)
                set_meta(conn, "vector_settings", self.params.vector_settings)
                set_meta(conn, "entity_settings", self.params.entity_settings)
                self.synonyms.entities = EntityRows(id_arr, names, vec_arr) if names else None
                set_meta(conn, "changed_chunks", "0")
                set_meta(conn, "refresh_pending", "0")
                set_meta(conn, "last_refresh", str(time.time()))
                counts = {t: ix.row_count(conn, t)
                          for t in ("entities", "relations", "mentions", "synonyms", "name_mentions")}
            return RefreshOut(**counts, removed_entities=removed["entities"], removed_relations=removed["relations"],
                              new_synonyms=synonyms, seconds=time.perf_counter() - start)
        raise RuntimeError("refresh: the store kept changing during the refresh; retry when indexing is idle")

    def _write_plan_and_pair(self, conn: Connection, plan: CorpusGraph, entities: gw.EntityPlan, mark: int,
                             ids: np.ndarray, vecs: np.ndarray
                             ) -> tuple[dict[str, int], list[tuple[int, int, float]]]:
        """Write ``plan``'s rows and pair the synonyms of its entities; returns what the garbage collection
        removed, and the pairs (not yet stored).

        For a large refresh whose synonym tiles run on our pool (``synonyms.on_our_pool``), the rows are written
        on a thread of their own meanwhile: SQLite has one core, one tile worker the other, and the second worker
        joins when the rows are in (``wide_after``). The search never touches the connection; the writing thread
        is the only one using it until it is done. Tiles on torch's own two threads (the fallback) would only
        slow the writing down, so those two steps then run one after the other."""
        if len(ids) < PAIR_WHILE_WRITING_OVER or not on_our_pool():
            removed = self._apply_plan(conn, plan, entities)
            return removed, self.synonyms.pairs_since(mark, ids, vecs)
        written = threading.Event()
        with ThreadPoolExecutor(1, thread_name_prefix="pathweaver-refresh") as pool:
            writing = pool.submit(self._apply_plan, conn, plan, entities)
            writing.add_done_callback(lambda _: written.set())
            pairs = self.synonyms.pairs_since(mark, ids, vecs, written)
            return writing.result(), pairs

    @staticmethod
    def _apply_plan(conn: Connection, plan: CorpusGraph, entities: gw.EntityPlan) -> dict[str, int]:
        """Write ``plan`` (mentions and relation sources already cleared) with the entity ids of ``entities``;
        returns what the garbage collection then removed."""
        ids = entities.ids
        gw.insert_entities(conn, plan.kinds, KIND_RANK, entities)
        gw.set_entity_kinds(conn, {ids[n]: k for n, k in plan.kinds.items()})
        gw.insert_mentions(conn, [(ids[n], cid, c, s) for (n, cid), (c, s) in plan.mentions.items()])
        rows = [((ids[src], ids[dst], label), kind, description)
                for (src, dst, label), (kind, description) in plan.relations.items()]
        gw.ensure_relations(conn, rows, [((ids[key[0]], ids[key[1]], key[2]), cid, start, end)
                                        for key, cid, start, end, _ in plan.sources])
        return gw.collect_garbage(conn)
