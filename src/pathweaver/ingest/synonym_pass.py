"""The synonym pass: entities newer than the watermark paired with all (AGRAG Eq. 5).

Synonyms depend only on the entity set: each entity is paired with all others once, when its id first passes the
``synonym_watermark`` kept in meta (entity ids are never reused), in a pass at the end of each indexing call.
"""

from __future__ import annotations

import threading

import numpy as np

from pathweaver.extract.graph import ExtractParams
from pathweaver.extract.synonyms import synonym_pairs_for
from pathweaver.store import graph_writes as gw
from pathweaver.store import indexing as ix
from pathweaver.store.cache import cache_for
from pathweaver.store.db import Connection, Database
from pathweaver.store.meta import meta_int, set_meta
from pathweaver.store.vector_rows import EntityRows, entity_rows


class SynonymPass:
    """The pass over a store, keeping every entity's vector between passes so that a watcher batch reads only its
    new entities' rows."""

    def __init__(self, db: Database, params: ExtractParams) -> None:
        self.db = db
        self.params = params
        self.entities: EntityRows | None = None  # every entity and its vector, as of the last pass

    def run(self) -> int:
        """Pair and store the synonyms of the entities new since the last pass; returns how many pairs."""
        mark = int(self.db.get_meta("synonym_watermark", "0") or 0)
        top = ix.max_entity_id(self.db.conn)
        if top is None or top <= mark:
            return 0
        with self.db.write(bump_version=False) as conn:
            pairs = self._synonyms_in(conn)
            if not pairs:
                return 0  # only the watermark moved: nothing a reader sees, so no new store version
            after = self.db.bump_version(conn)
        # the new version is the one before plus these rows: a reader of this process holding that one carries
        # it forward instead of reading the whole graph again (store.cache)
        cache_for(str(self.db.path.resolve())).patch(after - 1, after, lambda snap: snap.with_synonyms(after, pairs))
        return len(pairs)

    def _synonyms_in(self, conn: Connection) -> list[tuple[int, int, float]]:
        """Pair entities newer than the watermark with all entities (cos > phi, AGRAG Eq. 5) and store the pairs
        (which it returns)."""
        mark = self.watermark(conn)
        # the entities as of the last pass (or a reader's snapshot in this process) give every vector that did not
        # change, so a watcher batch reads only its new entities' rows
        previous = self.entities or EntityRows.of(cache_for(str(self.db.path.resolve())).latest())
        self.entities = entity_rows(conn, int(self.db.get_meta("embedding_dim", "0") or 0), previous)
        pairs = self.pairs_since(mark, self.entities.ids, self.entities.vecs)
        self.store_pairs(conn, pairs, mark, self.entities.ids)
        return pairs

    @staticmethod
    def watermark(conn: Connection) -> int:
        return meta_int(conn, "synonym_watermark")

    def pairs_since(self, mark: int, ids: np.ndarray, vecs: np.ndarray, wide_after: threading.Event | None = None
                     ) -> list[tuple[int, int, float]]:
        """Synonym pairs (Eq. 5) of the entities with ids above ``mark`` among all of ``ids``/``vecs``."""
        new = ids > mark
        if not new.any():
            return []
        return synonym_pairs_for(ids[new], vecs[new], ids, vecs, self.params.synonym_phi, wide_after=wide_after)

    @staticmethod
    def store_pairs(conn: Connection, pairs: list[tuple[int, int, float]], mark: int, ids: np.ndarray) -> None:
        """Insert the pairs and move the watermark past every entity in ``ids``."""
        gw.insert_synonyms(conn, pairs)
        if len(ids):
            set_meta(conn, "synonym_watermark", str(max(mark, int(ids.max()))))
