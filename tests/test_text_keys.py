"""A SQLite snapshot holds no chunk texts: it reads them when asked, keyed by ``store.text_keys`` so that an id
SQLite reused for another text reads as deleted from the old snapshot and vectors are reused only for the same
text; rankings equal a cold read's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pathweaver.config import Settings
from pathweaver.ingest.pipeline import Indexer
from pathweaver.retrieval.seeds import dense_scores
from pathweaver.store.db import Database
from pathweaver.store.reads import StoreReader, chunk_texts
from pathweaver.store.snapshot import StoredTexts
from pathweaver.store.text_keys import text_key

NOTES = {
    "a.txt": "Marie Curie was born in Warsaw. She studied physics in Paris with Pierre Curie.",
    "b.txt": "The Vistula is the longest river in Poland. The Vistula flows through Warsaw and Krakow.",
    "c.txt": "Radium glows in the dark. Marie Curie isolated radium in Paris.",
}
EDITED = "Radium glows green in the dark. Marie Curie isolated radium in Paris in 1902."


def _settings(store: Path) -> Settings:
    s = Settings()
    s.store_dir = store
    return s


def test_text_key_is_the_keys_of_the_utf8_bytes() -> None:
    assert text_key("Łódź") == text_key("Łódź".encode()) != text_key("Lodz")
    assert -(2**63) <= text_key("") < 2**63


def test_texts_on_demand_after_an_edit_that_reuses_an_id(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    with Database(store) as db:
        indexer = Indexer(db, _settings(store), embedder)
        reader = StoreReader(db)
        reader.cache.clear()
        indexer.index_paths([folder])
        before = reader.snapshot()
        stored = chunk_texts(db.conn)
        assert isinstance(before.chunk_texts, StoredTexts)
        assert list(before.chunk_texts) == [stored[int(i)] for i in before.chunk_ids]
        assert before.chunk_keys.tolist() == [text_key(stored[int(i)]) for i in before.chunk_ids]
        last = int(before.chunk_ids[-1])
        assert before.chunk_texts[-1] == NOTES["c.txt"]

        (folder / "c.txt").write_text(EDITED, encoding="utf-8")  # its chunk, the last id, is replaced
        indexer.index_paths([folder])
        view = reader.passages()  # dense's view right after a change, its vectors reused from ``before`` by key
        after = reader.snapshot()
        assert after.version != before.version
        assert int(after.chunk_ids[-1]) == last  # SQLite gave the new chunk the freed id
        assert after.chunk_texts[-1] == EDITED
        # the old snapshot never shows the new text under its old passage: it reads as deleted
        assert before.chunk_texts[-1] == "" and before.chunk_texts[0] == NOTES["a.txt"]
        assert after.chunk_keys[-1] != before.chunk_keys[-1]

        cold = reader._build_snapshot(None)
        assert after.chunk_texts == cold.chunk_texts and np.array_equal(after.chunk_keys, cold.chunk_keys)
        assert np.array_equal(after.chunk_vecs, cold.chunk_vecs)  # the edited chunk's vector was not reused
        assert view.chunk_texts == cold.chunk_texts and np.array_equal(view.chunk_vecs, cold.chunk_vecs)
        assert not np.array_equal(after.chunk_vecs[-1], before.chunk_vecs[-1])
        q = embedder.encode_queries(["Who isolated radium?"])[0]
        warm_scores, cold_scores = dense_scores(after, q), dense_scores(cold, q)
        assert warm_scores.tobytes() == cold_scores.tobytes()
