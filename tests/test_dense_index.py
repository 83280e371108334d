"""Dense search as the store answers it (``store.dense``): pgvector's HNSW index on PostgreSQL, exact over the
snapshot's chunk matrix on SQLite; the same top chunks on both for the small real corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends import is_pg, store_settings

QUESTIONS = ("Where was Marie Curie born?", "Which river flows through Warsaw?", "Who discovered polonium?")


def _ranked(pw, method: str, question: str, k: int) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(c["doc"], c["text"]) for c in pw.retrieve_json(question, method, k)["chunks"]]


def test_dense_asks_the_stores_index_and_ranks_as_the_exact_product(corpus_dir: Path, backend) -> None:  # type: ignore[no-untyped-def]
    """On PostgreSQL dense and hybrid go through the HNSW query (the plan is an index scan of ``chunk_vec_hnsw``)
    and leave the chunk matrix unread; on SQLite they rank the snapshot's matrix. Either way dense's top chunks
    and cosines are the exact ones (on this small corpus HNSW finds every true neighbour)."""
    from pathweaver.service import Pathweaver
    from pathweaver.store.dense import DenseScores

    location = backend("store")
    with Pathweaver.open(location) as pw:
        pw.index([corpus_dir])
        snap = pw.snapshot()
        for question in QUESTIONS:
            for method in ("dense", "hybrid"):
                result = pw.retrieve(question, method=method, top_k=4)
                assert result.chunks and result.info["dense_index"] == ("hnsw" if is_pg(location) else "exact")
            assert (snap.loaded("chunk_vecs") is None) == is_pg(location)
        for question in QUESTIONS:
            assert pw.retrieve(question, method="ppr", top_k=4).chunks  # its seeds ask the index too
            dense = pw.retrieve(question, method="dense", top_k=4).chunks
            exact_rows, exact_cos = DenseScores(snap, pw.embedder.encode_one(question)).top(4)
            assert [h.passage for h in dense] == exact_rows.tolist()
            assert [h.score for h in dense] == pytest.approx(exact_cos.tolist(), abs=1e-5)
        if is_pg(location):
            from pathweaver.store.pg.search import DENSE_SQL, hnsw_settings, vector_text

            conn = pw.reader.db.conn.raw
            with conn.transaction():
                hnsw_settings(conn, 4, 100)
                plan = "\n".join(r[0] for r in conn.execute(
                    "EXPLAIN " + DENSE_SQL, {"v": vector_text(pw.embedder.encode_one(QUESTIONS[0])), "k": 4}))
            assert "Index Scan using chunk_vec_hnsw" in plan


def test_dense_and_hybrid_rank_alike_on_sqlite_and_postgresql(corpus_dir: Path, tmp_path: Path, pg_url: str) -> None:
    """The same corpus indexed into both backends: dense and hybrid return the same chunks in the same order."""
    from pathweaver.service import Pathweaver

    with Pathweaver.open(tmp_path / "lite") as lite, Pathweaver.open(pg_url) as pg:
        lite.index([corpus_dir])
        pg.index([corpus_dir])
        for question in QUESTIONS:
            for method in ("dense", "hybrid"):
                assert _ranked(pg, method, question, 5) == _ranked(lite, method, question, 5), (method, question)


def test_hnsw_ef_search_is_a_store_setting_with_a_clear_error() -> None:
    from pathweaver.config import ConfigError, Settings, apply_mapping

    assert Settings().hnsw_ef_search == 200
    assert apply_mapping(store_settings("postgresql://u@h/db"), {"store": {"hnsw_ef_search": 64}}).hnsw_ef_search == 64
    for bad in (0, 1001, "many", 1.5, True):
        with pytest.raises(ConfigError, match="hnsw_ef_search"):
            apply_mapping(Settings(), {"store": {"hnsw_ef_search": bad}})


COPY = "The quokka is a small marsupial that lives on Rottnest Island near Perth."
N_COPIES = 9


def test_equal_cosines_rank_by_passage_order_on_both_backends(tmp_path: Path, backend) -> None:  # type: ignore[no-untyped-def]
    """Copies of a note have one vector: dense and hybrid rank them by passage order, also at the top k's edge,
    whether the exact product or the HNSW index (which returns equal distances in its own order) found them."""
    from pathweaver.service import Pathweaver

    folder = tmp_path / "notes"
    folder.mkdir()
    for i, text in enumerate(("Marie Curie was born in Warsaw.", "Kangaroos are marsupials of Australia.",
                              "Rottnest Island lies off Western Australia.")):
        (folder / f"other{i}.txt").write_text(text, encoding="utf-8")
    for i in range(N_COPIES):
        (folder / f"copy{i}.txt").write_text(COPY, encoding="utf-8")
    with Pathweaver.open(backend("store")) as pw:
        pw.index([folder])
        snap = pw.snapshot()
        copies = sorted(p for p, doc in enumerate(snap.chunk_docs) if Path(doc).name.startswith("copy"))
        assert len(copies) == N_COPIES
        for method in ("dense", "hybrid"):
            for k in (1, 3, 5):
                got = [h.passage for h in pw.retrieve("quokka marsupial", method, k).chunks]
                assert got == copies[:k], f"{method} top {k}"
